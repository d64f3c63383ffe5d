package finetune

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/types"
)

// voteEnv is a game between an honest group (slotA, slotA2) and a liar
// (slotB) who made up step 21 of 64, played down to step 21, on a chain
// with four validators of equal power (1000 oGPU each) and slotB a fifth
// validator: a party, so not a voter.
type voteEnv struct {
	*env
	vals         []types.Address
	honest, liar run
	salt         types.Hash
	vsBefore     *uint256.Int
	commitOf     func(v types.Address, h types.Hash) types.Hash
}

func newVoteEnv(t *testing.T) *voteEnv {
	e := &voteEnv{env: newEnv(t), salt: types.Hash{0x5a}}
	e.chain = genesis.DefaultParams()
	esc := escrow.NewKeeper(e.kv)
	for i := range 5 {
		op := types.BytesToAddress([]byte{0x70, byte(i)})
		if i == 4 {
			op = slotB
		}
		esc.SetGenesisBond(op, types.OGPU(1000))
		pub := sha256.Sum256([]byte(fmt.Sprint("validator key ", i)))
		if err := esc.CreateValidator(e.chain.Staking, op, fmt.Sprint("v", i), pub[:], new(uint256.Int)); err != nil {
			t.Fatal(err)
		}
		if i < 4 {
			e.vals = append(e.vals, op)
		}
	}
	esc.EndBlockPower(e.chain.Staking, e.height)
	n := uint64(64)
	e.honest, e.liar = train(n, 0, ""), train(n, 21, "x")
	e.open(n, e.honest, e.liar)
	e.play(e.honest, e.liar)
	if g := e.game(); g.Status != StatusReexecute || g.Hi != 21 {
		t.Fatalf("the game is %s at step %d", g.Status, g.Hi)
	}
	return e
}

func (e *voteEnv) seal(v types.Address, h types.Hash) error {
	m, err := DecodeMsgSealGameVote((&MsgSealGameVote{Job: job, Stage: stage, Commitment: GameVoteCommitment(job, stage, 0, h, e.salt, v)}).Raw().Data)
	if err != nil {
		return err
	}
	return e.keeper().SealVote(v, m)
}

func (e *voteEnv) openVote(v types.Address, h types.Hash) (*Decided, error) {
	m, err := DecodeMsgOpenGameVote((&MsgOpenGameVote{Job: job, Stage: stage, HStar: h, Salt: e.salt}).Raw().Data)
	if err != nil {
		return nil, err
	}
	return e.keeper().OpenVote(v, m)
}

func bonded(e *voteEnv, v types.Address) *uint256.Int { return escrow.NewKeeper(e.kv).Bonded(v) }

// TestVoteConvictsTheLiar: the voter set is the validators without the
// game's slots (slotB, a validator, does not judge its own case); votes
// are sealed before any is opened; three of four voters' h* (the honest
// step 21) is more than two thirds: the liar's slot loses, the honest
// group wins, and the voter that opened another h* loses vote_slash_bps.
func TestVoteConvictsTheLiar(t *testing.T) {
	e := newVoteEnv(t)
	g := e.game()
	if len(g.Voters) != 4 || g.VoterPower(slotB) != 0 {
		t.Fatalf("voters %+v: want the four validators that are not slots", g.Voters)
	}
	right, wrong := e.honest.hashes[21], e.liar.hashes[21]
	if err := e.seal(slotB, right); !errors.Is(err, types.ErrUnauthorized) {
		t.Fatalf("a party sealed a vote: %v", err)
	}
	for i, v := range e.vals {
		h := right
		if i == 3 {
			h = wrong
		}
		if err := e.seal(v, h); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := e.seal(v, h); !errors.Is(err, types.ErrDuplicate) {
				t.Fatalf("a second seal: %v", err)
			}
			if _, err := e.openVote(v, h); !errors.Is(err, types.ErrWrongPhase) {
				t.Fatalf("opened while others had not sealed: %v", err)
			}
		}
	}
	e.check()
	if _, err := e.openVote(e.vals[0], wrong); !errors.Is(err, types.ErrCommitMismatch) {
		t.Fatalf("opened another h* than sealed: %v", err)
	}
	before := bonded(e, e.vals[3])
	var dec *Decided
	for i, v := range e.vals {
		h := right
		if i == 3 {
			h = wrong
		}
		d, err := e.openVote(v, h)
		if err != nil {
			t.Fatal(err)
		}
		if (d != nil) != (i == 3) {
			t.Fatalf("after %d opened votes, decided = %v", i+1, d)
		}
		dec = d
	}
	e.check()
	if dec.Outcome != OutcomeVerdict || dec.Step != 21 || !slices.Equal(dec.Losers, []types.Address{slotB}) || !slices.Equal(dec.Winners, []types.Address{slotA, slotA2}) {
		t.Fatalf("decided %+v", dec)
	}
	if want := types.OGPU(1000); !bonded(e, e.vals[3]).Lt(before) || !bonded(e, e.vals[0]).Eq(want) {
		t.Fatal("the contrary voter kept its stake, or an agreeing voter lost some")
	}
	if e.height++; e.endBlock() != nil {
		t.Fatal("the decided game ended again")
	}
}

// TestVoteWithoutTwoThirds: two voters against two is no verdict: at the
// deadline the game is a class failure, no provider loses, and only the
// voter that never opened is penalized; a vote after the deadline is
// refused.
func TestVoteWithoutTwoThirds(t *testing.T) {
	e := newVoteEnv(t)
	right, wrong := e.honest.hashes[21], e.liar.hashes[21]
	for i, v := range e.vals {
		h := right
		if i >= 2 {
			h = wrong
		}
		if err := e.seal(v, h); err != nil {
			t.Fatal(err)
		}
	}
	for i, v := range e.vals[:3] {
		h := right
		if i >= 2 {
			h = wrong
		}
		if _, err := e.openVote(v, h); err != nil {
			t.Fatal(err)
		}
	}
	g := e.game()
	e.height = g.Deadline
	out := e.endBlock()
	if len(out) != 1 || out[0].Outcome != OutcomeClassFailure || len(out[0].Losers)+len(out[0].Winners) != 0 {
		t.Fatalf("decided %+v: want a class failure", out)
	}
	for i, v := range e.vals {
		if slashed := !bonded(e, v).Eq(types.OGPU(1000)); slashed != (i == 3) {
			t.Fatalf("voter %d slashed = %v", i, slashed)
		}
	}
	if !bonded(e, slotB).Eq(types.OGPU(1000)) {
		t.Fatal("a provider was slashed without a verdict")
	}
	e.height++
	if _, err := e.openVote(e.vals[3], wrong); !errors.Is(err, types.ErrWrongPhase) {
		t.Fatalf("a vote after the game ended: %v", err)
	}
}

// TestVoteAtTheDeadline: three of four voters open the honest h* and the
// fourth never votes: the end-block decides on the opened votes (3/4 >
// 2/3), convicting the liar, and the silent voter is penalized.
func TestVoteAtTheDeadline(t *testing.T) {
	e := newVoteEnv(t)
	right := e.honest.hashes[21]
	for _, v := range e.vals[:3] {
		if err := e.seal(v, right); err != nil {
			t.Fatal(err)
		}
	}
	g := e.game()
	e.height = g.SealBy
	if err := e.seal(e.vals[3], right); err != nil {
		t.Fatal(err)
	}
	e.height = g.SealBy + 1
	if err := e.seal(e.vals[3], right); !errors.Is(err, types.ErrWrongPhase) {
		t.Fatalf("a seal after SealBy: %v", err)
	}
	for _, v := range e.vals[:3] {
		if _, err := e.openVote(v, right); err != nil {
			t.Fatal(err)
		}
	}
	e.height = g.Deadline
	out := e.endBlock()
	if len(out) != 1 || out[0].Outcome != OutcomeVerdict || !slices.Equal(out[0].Losers, []types.Address{slotB}) {
		t.Fatalf("decided %+v", out)
	}
	if bonded(e, e.vals[3]).Eq(types.OGPU(1000)) {
		t.Fatal("the voter that never opened kept its stake")
	}
}
