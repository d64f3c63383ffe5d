package finetune

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// step is a made-up optimizer step: the checkpoint after step k from the
// one before it. lie marks a step a provider did not compute.
func step(prev types.Hash, k uint64, lie string) types.Hash {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], k)
	return sha256.Sum256(append(append(append(prev[:], b[:]...), "step"...), lie...))
}

var base = sha256.Sum256([]byte("base model tensors"))

// run is a provider's checkpoint list over n steps: honest up to step
// d−1, made up (with tag lie) at step d, and computed honestly from its
// wrong state afterwards, so every later checkpoint differs too. d = 0:
// honest throughout.
type run struct {
	hashes []types.Hash
	root   types.Hash
}

func train(n, d uint64, lie string) run {
	hs := []types.Hash{base}
	for k := uint64(1); k <= n; k++ {
		tag := ""
		if k == d {
			tag = lie
		}
		hs = append(hs, step(hs[k-1], k, tag))
	}
	return run{hs, Root(hs)}
}

func (r run) final() types.Hash { return r.hashes[len(r.hashes)-1] }

// env is a real keeper over a real IAVL store.
type env struct {
	t      testing.TB
	kv     *store.Tree
	height uint64
	p      Params
	chain  genesis.Params
	events types.Events
}

func newEnv(t testing.TB) *env {
	return &env{t: t, kv: store.NewMemTree(), height: 100, p: DefaultParams()}
}

func (e *env) keeper() *Keeper {
	return NewKeeper(Context{KV: e.kv, Height: e.height, Events: &e.events, Params: e.p, Chain: e.chain})
}

func (e *env) check() {
	e.t.Helper()
	if err := Invariant(e.kv); err != nil {
		e.t.Fatal(err)
	}
}

// dump is the whole state, to show that a refusal changed nothing.
func (e *env) dump() string {
	var b strings.Builder
	e.kv.Iterate(nil, nil, func(k, v []byte) bool { fmt.Fprintf(&b, "%x=%x\n", k, v); return false })
	return b.String()
}

var (
	slotA   = types.BytesToAddress([]byte{0xa1})
	slotA2  = types.BytesToAddress([]byte{0xa2})
	slotB   = types.BytesToAddress([]byte{0xb1})
	relayer = types.BytesToAddress([]byte{0xee})
)

const job, stage = uint64(7), uint16(0)

func (e *env) open(n uint64, a, b run) *Game {
	e.t.Helper()
	if _, err := e.keeper().OpenGame(Spec{Job: job, Stage: stage, Steps: n, Base: base, Groups: []GroupSpec{
		{Root: a.root, Final: a.final(), Slots: []types.Address{slotA, slotA2}},
		{Root: b.root, Final: b.final(), Slots: []types.Address{slotB}},
	}}); err != nil {
		e.t.Fatal(err)
	}
	e.check()
	return e.game()
}

func (e *env) game() *Game {
	g, ok := GetGame(e.kv, job, stage, 0)
	if !ok {
		e.t.Fatal("no game")
	}
	return g
}

// opening is r's answer to the current round of the game.
func (e *env) opening(r run) *MsgOpenCheckpoints { return openingIn(r, e.game()) }

// openingIn is r's answer to the current round of game g.
func openingIn(r run, g *Game) *MsgOpenCheckpoints {
	m := &MsgOpenCheckpoints{Job: g.Job, Stage: g.Stage, Match: g.Match, Root: r.root, Round: g.Round}
	for _, k := range g.Points() {
		m.Openings = append(m.Openings, Opening{Step: k, Hash: r.hashes[k], Proof: Prove(r.hashes, k)})
	}
	return m
}

func (e *env) send(from types.Address, m *MsgOpenCheckpoints) error {
	// Through the wire: what a block would carry.
	dm, err := DecodeMsgOpenCheckpoints(m.Raw().Data)
	if err != nil {
		return err
	}
	return e.keeper().OpenCheckpoints(from, dm)
}

// refused asserts that sending m fails with want and changes nothing.
func (e *env) refused(t *testing.T, m *MsgOpenCheckpoints, want *types.Error, says string) {
	t.Helper()
	before := e.dump()
	err := e.send(relayer, m)
	if !errors.Is(err, want) || !strings.Contains(err.Error(), says) {
		t.Fatalf("got %v, want %q saying %q", err, want.Desc, says)
	}
	if e.dump() != before {
		t.Fatal("a refused opening changed the state")
	}
}

// play has both groups open every round (in one block) until the game is
// down to one step; it returns the rounds played.
func (e *env) play(a, b run) uint64 {
	e.t.Helper()
	for e.game().Status == StatusOpen {
		for _, r := range []run{a, b} {
			if err := e.send(relayer, e.opening(r)); err != nil {
				e.t.Fatal(err)
			}
		}
		e.check()
		e.height++
	}
	return e.game().Round
}

func (e *env) endBlock() []Decided {
	d := e.keeper().EndBlock()
	e.check()
	return d
}

// TestT1MadeUpStepIsFound: a provider that made up step d (and so every
// hash after it) is located at step d, in at most ⌈log_c N⌉ rounds, for
// every arity and many (N, d); the agreed checkpoint is the honest one
// before d; the verdict (h* the honest step d) convicts the liar's slots
// only and pays the honest group.
func TestT1MadeUpStepIsFound(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for c := uint64(MinArity); c <= MaxArity; c++ {
		for range 12 {
			n := 2 + rng.Uint64N(400)
			d := 1 + rng.Uint64N(n)
			e := newEnv(t)
			e.p.Arity = c
			honest, liar := train(n, 0, ""), train(n, d, "made up")
			a, b := honest, liar
			if rng.IntN(2) == 0 {
				a, b = liar, honest // the liar's group may be either
			}
			e.open(n, a, b)
			rounds := e.play(a, b)
			g := e.game()
			if g.Status != StatusReexecute || g.Hi != d || g.Lo != d-1 || g.Groups[0].HLo != honest.hashes[d-1] {
				t.Fatalf("c=%d n=%d d=%d: ended at (%d, %d) %s, want (%d, %d) from the honest h_%d", c, n, d, g.Lo, g.Hi, g.Status, d-1, d, d-1)
			}
			if bound := MaxRounds(n, c); rounds > bound {
				t.Fatalf("c=%d n=%d d=%d: %d rounds, bound %d", c, n, d, rounds, bound)
			}
			dec, err := e.keeper().Decide(job, stage, 0, Verdict{Agreed: true, HStar: honest.hashes[d]})
			if err != nil {
				t.Fatal(err)
			}
			e.check()
			liarSlots, honestSlots := []types.Address{slotB}, []types.Address{slotA, slotA2}
			if a.root == liar.root {
				liarSlots, honestSlots = honestSlots, liarSlots
			}
			if dec.Outcome != OutcomeVerdict || dec.Step != d || !slices.Equal(dec.Losers, liarSlots) || !slices.Equal(dec.Winners, honestSlots) ||
				!dec.Done || dec.ClassFailure || !slices.Equal(dec.Survivors, honestSlots) {
				t.Fatalf("c=%d n=%d d=%d: decided %+v, want the liar's slots %v convicted at step %d", c, n, d, dec, liarSlots, d)
			}
		}
	}
}

// TestT1BaseModelReturned: a provider that returns the base model and
// fills its tree with the base hash is caught at step 1.
func TestT1BaseModelReturned(t *testing.T) {
	e := newEnv(t)
	n := uint64(100)
	honest := train(n, 0, "")
	lazy := make([]types.Hash, n+1)
	for i := range lazy {
		lazy[i] = base
	}
	liar := run{lazy, Root(lazy)}
	e.open(n, honest, liar)
	e.play(honest, liar)
	if g := e.game(); g.Hi != 1 || g.Status != StatusReexecute {
		t.Fatalf("the lazy provider is located at step %d (%s), want 1", g.Hi, g.Status)
	}
	dec, err := e.keeper().Decide(job, stage, 0, Verdict{Agreed: true, HStar: honest.hashes[1]})
	if err != nil || !slices.Equal(dec.Losers, []types.Address{slotB}) {
		t.Fatalf("decided %+v, %v", dec, err)
	}
}

// TestT3Verdicts: both wrong at the same step, differently: neither
// matches h* and both lose; no agreed verdict is a class failure that
// slashes nobody, as is a verdict that never comes; a verdict before the
// game is down to one step, or twice, is refused.
func TestT3Verdicts(t *testing.T) {
	n := uint64(64)
	setup := func(t *testing.T) (*env, run) {
		e := newEnv(t)
		honest, x, y := train(n, 0, ""), train(n, 20, "x"), train(n, 20, "y")
		e.open(n, x, y)
		if _, err := e.keeper().Decide(job, stage, 0, Verdict{Agreed: true, HStar: honest.hashes[20]}); !errors.Is(err, types.ErrWrongPhase) {
			t.Fatalf("a verdict during the rounds: %v", err)
		}
		e.play(x, y)
		if g := e.game(); g.Hi != 20 {
			t.Fatalf("located at %d, want 20", g.Hi)
		}
		return e, honest
	}
	t.Run("neither matches", func(t *testing.T) {
		e, honest := setup(t)
		dec, err := e.keeper().Decide(job, stage, 0, Verdict{Agreed: true, HStar: honest.hashes[20]})
		if err != nil || len(dec.Losers) != 3 || len(dec.Winners) != 0 {
			t.Fatalf("decided %+v, %v: want every slot convicted", dec, err)
		}
		if _, err := e.keeper().Decide(job, stage, 0, Verdict{Agreed: true, HStar: honest.hashes[20]}); !errors.Is(err, types.ErrWrongPhase) {
			t.Fatalf("a second verdict: %v", err)
		}
	})
	t.Run("no two thirds", func(t *testing.T) {
		e, _ := setup(t)
		dec, err := e.keeper().Decide(job, stage, 0, Verdict{})
		if err != nil || dec.Outcome != OutcomeClassFailure || len(dec.Losers)+len(dec.Winners) != 0 {
			t.Fatalf("decided %+v, %v: want a class failure, nobody slashed", dec, err)
		}
		e.check()
	})
	t.Run("no verdict in time", func(t *testing.T) {
		e, honest := setup(t)
		g := e.game()
		e.height = g.Deadline - 1
		if out := e.endBlock(); len(out) != 0 {
			t.Fatalf("decided before the verdict deadline: %+v", out)
		}
		e.height = g.Deadline
		out := e.endBlock()
		if len(out) != 1 || out[0].Outcome != OutcomeClassFailure || len(out[0].Losers) != 0 {
			t.Fatalf("at the verdict deadline: %+v, want a class failure", out)
		}
		e.height++
		if _, err := e.keeper().Decide(job, stage, 0, Verdict{Agreed: true, HStar: honest.hashes[20]}); !errors.Is(err, types.ErrWrongPhase) {
			t.Fatalf("a late verdict: %v", err)
		}
	})
}

// TestOneStepJob: a one-step job has nothing to bisect: the game awaits
// the verdict on step 1 at once, from the base hash.
func TestOneStepJob(t *testing.T) {
	e := newEnv(t)
	honest, liar := train(1, 0, ""), train(1, 1, "x")
	g := e.open(1, honest, liar)
	if g.Status != StatusReexecute || g.Lo != 0 || g.Hi != 1 || g.Round != 0 {
		t.Fatalf("one-step game %+v", g)
	}
	dec, err := e.keeper().Decide(job, stage, 0, Verdict{Agreed: true, HStar: honest.final()})
	if err != nil || !slices.Equal(dec.Losers, []types.Address{slotB}) {
		t.Fatalf("decided %+v, %v", dec, err)
	}
}

// TestT2BadTreesCannotBeOpened: a group whose tree has the wrong shape
// (built over another step count), whose leaf N is not its committed
// final hash, or whose leaf 0 is not the base, cannot answer round 1: each
// attempt is refused with the reason and changes nothing, and the group
// loses at the deadline while the honest group wins.
func TestT2BadTreesCannotBeOpened(t *testing.T) {
	n := uint64(50)
	honest := train(n, 0, "")
	longer := train(n+3, 2, "x") // a tree of n+4 leaves, its leaf n as final
	wrongFinal := train(n, 30, "x")
	badBase := train(n, 0, "")
	badBase.hashes = slices.Clone(badBase.hashes)
	badBase.hashes[0] = sha256.Sum256([]byte("another base"))
	badBase.root = Root(badBase.hashes)
	for _, tc := range []struct {
		name  string
		bad   run
		final types.Hash
		says  string
		edit  func(*MsgOpenCheckpoints)
	}{
		{"wrong shape", longer, longer.hashes[n], "fixes", nil},
		{"leaf N is not the final hash", wrongFinal, sha256.Sum256([]byte("claimed final")), "must be the final model", nil},
		{"leaf 0 is not the base", badBase, sha256.Sum256([]byte("claimed final")), "must be the base model", nil},
		{"true leaf N, proof of the shape the tree has", longer, longer.hashes[n], "does not verify", func(m *MsgOpenCheckpoints) {
			// Pad or cut each proof to the job's length: still no opening.
			for i := range m.Openings {
				want := ProofLen(n+1, m.Openings[i].Step)
				for len(m.Openings[i].Proof) < want {
					m.Openings[i].Proof = append(m.Openings[i].Proof, types.Hash{})
				}
				m.Openings[i].Proof = m.Openings[i].Proof[:want]
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if _, err := e.keeper().OpenGame(Spec{Job: job, Stage: stage, Steps: n, Base: base, Groups: []GroupSpec{
				{Root: honest.root, Final: honest.final(), Slots: []types.Address{slotA}},
				{Root: tc.bad.root, Final: tc.final, Slots: []types.Address{slotB}},
			}}); err != nil {
				t.Fatal(err)
			}
			m := e.opening(tc.bad)
			if tc.edit != nil {
				tc.edit(m)
			}
			e.refused(t, m, types.ErrInvalidMsg, tc.says)
			if err := e.send(slotA, e.opening(honest)); err != nil {
				t.Fatal(err)
			}
			e.height = e.game().Deadline
			out := e.endBlock()
			if len(out) != 1 || out[0].Outcome != OutcomeTimeout || !slices.Equal(out[0].Losers, []types.Address{slotB}) || !slices.Equal(out[0].Winners, []types.Address{slotA}) {
				t.Fatalf("decided %+v: want the bad tree's group to lose", out)
			}
		})
	}
}

// TestT6SilenceLoses: a group that does not open by the round's deadline
// loses with the same outcome as a convicted one; both silent, both lose;
// nothing happens before the deadline, and an opening after it is refused
// even when the end-block has not reached the game.
func TestT6SilenceLoses(t *testing.T) {
	n := uint64(1000)
	honest, liar := train(n, 0, ""), train(n, 777, "x")
	t.Run("the loser goes silent mid-game", func(t *testing.T) {
		e := newEnv(t)
		e.open(n, honest, liar)
		for range 3 {
			for _, r := range []run{honest, liar} {
				if err := e.send(relayer, e.opening(r)); err != nil {
					t.Fatal(err)
				}
			}
			e.height++
		}
		if err := e.send(slotA, e.opening(honest)); err != nil {
			t.Fatal(err)
		}
		g := e.game()
		e.height = g.Deadline - 1
		if out := e.endBlock(); len(out) != 0 {
			t.Fatalf("ended before the deadline: %+v", out)
		}
		e.height = g.Deadline
		n0 := len(e.events)
		out := e.endBlock()
		if len(out) != 1 || out[0].Outcome != OutcomeTimeout || !slices.Equal(out[0].Losers, []types.Address{slotB}) ||
			!slices.Equal(out[0].Winners, []types.Address{slotA, slotA2}) {
			t.Fatalf("at the deadline: %+v, want the silent group to lose", out)
		}
		var ev EventGameTimeout
		if err := types.DecodeEvent(e.events[n0], &ev); err != nil || ev.Round != 4 || !slices.Equal(ev.Silent, []string{liar.root.Hex()}) {
			t.Fatalf("timeout event %+v, %v", ev, err)
		}
		e.height++
		m := e.opening(liar)
		e.refused(t, m, types.ErrWrongPhase, "is decided")
	})
	t.Run("both silent", func(t *testing.T) {
		e := newEnv(t)
		g := e.open(n, honest, liar)
		e.height = g.Deadline
		out := e.endBlock()
		if len(out) != 1 || len(out[0].Losers) != 3 || len(out[0].Winners) != 0 {
			t.Fatalf("both silent: %+v, want every slot to lose", out)
		}
	})
	t.Run("late opening while the queue carries over", func(t *testing.T) {
		e := newEnv(t)
		g := e.open(n, honest, liar)
		e.height = g.Deadline + 1 // the end-block has not worked the game yet
		e.refused(t, e.opening(honest), types.ErrWrongPhase, "took openings until height")
	})
}

// TestT7RelayedOpenings: an opening sent by a stranger counts for the
// group whose root it verifies against (a silent sybil in the honest group
// cannot sink it); a relayer's bad opening (one hash changed, a proof
// element changed, the other group's root, too few points) is refused and
// changes nothing, and the group can still open afterwards.
func TestT7RelayedOpenings(t *testing.T) {
	n := uint64(300)
	honest, liar := train(n, 0, ""), train(n, 123, "x")
	e := newEnv(t)
	e.open(n, honest, liar)
	good := e.opening(honest)
	for _, tc := range []struct {
		name string
		edit func(m *MsgOpenCheckpoints)
		want *types.Error
		says string
	}{
		{"changed hash", func(m *MsgOpenCheckpoints) { m.Openings[1].Hash[0] ^= 1 }, types.ErrInvalidMsg, "does not verify"},
		{"changed proof", func(m *MsgOpenCheckpoints) { m.Openings[1].Proof[2][5] ^= 1 }, types.ErrInvalidMsg, "does not verify"},
		{"another group's root", func(m *MsgOpenCheckpoints) { m.Root = liar.root }, types.ErrInvalidMsg, "the last leaf must be the final model"},
		{"another group's root and final", func(m *MsgOpenCheckpoints) {
			m.Root = liar.root
			m.Openings[2] = Opening{Step: n, Hash: liar.final(), Proof: Prove(liar.hashes, n)}
		}, types.ErrInvalidMsg, "does not verify"},
		{"unknown root", func(m *MsgOpenCheckpoints) { m.Root = types.Hash{1} }, types.ErrInvalidMsg, "no group"},
		{"a point left out", func(m *MsgOpenCheckpoints) { m.Openings = m.Openings[:2] }, types.ErrInvalidMsg, "opens steps"},
		{"another point", func(m *MsgOpenCheckpoints) {
			m.Openings[1] = Opening{Step: 149, Hash: honest.hashes[149], Proof: Prove(honest.hashes, 149)}
		}, types.ErrInvalidMsg, "opening 1 is step 149"},
		{"short proof", func(m *MsgOpenCheckpoints) { m.Openings[1].Proof = m.Openings[1].Proof[1:] }, types.ErrInvalidMsg, "fixes"},
		{"next round", func(m *MsgOpenCheckpoints) { m.Round = 2 }, types.ErrWrongPhase, "in round 1"},
		{"unknown job", func(m *MsgOpenCheckpoints) { m.Job = 8 }, types.ErrUnknownJob, "no fine-tune game"},
		{"unknown stage", func(m *MsgOpenCheckpoints) { m.Stage = 1 }, types.ErrUnknownJob, "no fine-tune game"},
	} {
		m := &MsgOpenCheckpoints{Job: good.Job, Stage: good.Stage, Root: good.Root, Round: good.Round}
		for _, o := range good.Openings {
			m.Openings = append(m.Openings, Opening{o.Step, o.Hash, slices.Clone(o.Proof)})
		}
		tc.edit(m)
		t.Run(tc.name, func(t *testing.T) { e.refused(t, m, tc.want, tc.says) })
	}
	n0 := len(e.events)
	if err := e.send(relayer, good); err != nil {
		t.Fatal(err)
	}
	var ev EventCheckpointsOpened
	if err := types.DecodeEvent(e.events[n0], &ev); err != nil || ev.From != relayer || ev.Root != honest.root || ev.Round != 1 {
		t.Fatalf("opened event %+v, %v", ev, err)
	}
	if g := e.game(); !g.Groups[0].Opened || g.Groups[1].Opened || g.Round != 1 {
		t.Fatal("the relayed opening did not count for the honest group alone")
	}
	e.check()
	e.refused(t, good, types.ErrDuplicate, "already opened round 1")
	if err := e.send(slotB, e.opening(liar)); err != nil {
		t.Fatal(err)
	}
	e.check()
	// Round 2 now: the round-1 opening replayed is refused.
	if g := e.game(); g.Round != 2 || g.Lo != 0 || g.Hi != 150 {
		t.Fatalf("after round 1: round %d, interval (%d, %d); want round 2 over (0, 150)", g.Round, g.Lo, g.Hi)
	}
	e.refused(t, good, types.ErrWrongPhase, "in round 2")
}

// TestT5RoundsBounded: MaxRounds is ⌈log_c N⌉ (c^(r−1) < N ≤ c^r); every
// divergence point ends within it, and the worst one reaches it; a
// staller answering in the last block of every window keeps the game
// within MaxGameBlocks.
func TestT5RoundsBounded(t *testing.T) {
	pow := func(c, r uint64) uint64 {
		x := uint64(1)
		for range r {
			x *= c
		}
		return x
	}
	for c := uint64(MinArity); c <= MaxArity; c++ {
		for _, n := range []uint64{2, 3, 7, 8, 9, 100, 351, 1000, 1 << 20, 1<<20 - 1, MaxMaxSteps} {
			r := MaxRounds(n, c)
			if pow(c, r) < n || pow(c, r-1) >= n {
				t.Fatalf("MaxRounds(%d, %d) = %d is not ⌈log_c N⌉", n, c, r)
			}
		}
	}
	if MaxRounds(100_000, 2) != 17 || MaxRounds(100_000, 8) != 6 {
		t.Fatal("protocol-threats §3: N = 10^5 takes 17 binary rounds or 6 at c = 8")
	}
	for _, c := range []uint64{2, 3, 8} {
		n := uint64(97)
		worst := uint64(0)
		for d := uint64(1); d <= n; d++ {
			e := newEnv(t)
			e.p.Arity = c
			honest, liar := train(n, 0, ""), train(n, d, "x")
			e.open(n, honest, liar)
			worst = max(worst, e.play(honest, liar))
		}
		if worst != MaxRounds(n, c) {
			t.Fatalf("c=%d: the worst divergence took %d rounds, the bound is %d", c, worst, MaxRounds(n, c))
		}
	}
	// The staller: every opening in the last block of its window.
	e := newEnv(t)
	n := uint64(1 << 16)
	honest, liar := train(n, 0, ""), train(n, 54_321, "x")
	start := e.height
	e.open(n, honest, liar)
	for e.game().Status == StatusOpen {
		e.height = e.game().Deadline
		for _, r := range []run{honest, liar} {
			if err := e.send(relayer, e.opening(r)); err != nil {
				t.Fatal(err)
			}
		}
		if out := e.endBlock(); len(out) != 0 {
			t.Fatalf("a game answered in time was ended: %+v", out)
		}
	}
	if g := e.game(); g.Deadline-start > e.p.MaxGameBlocks(n) || g.Hi != 54_321 {
		t.Fatalf("the stalled game ends at height %d (%d blocks) at step %d; bound %d blocks", g.Deadline, g.Deadline-start, g.Hi, e.p.MaxGameBlocks(n))
	}
}

// TestOpenGameRefusals: the market's bad calls are refused with the
// reason and write nothing.
func TestOpenGameRefusals(t *testing.T) {
	n := uint64(10)
	a, b := train(n, 0, ""), train(n, 4, "x")
	ga := GroupSpec{Root: a.root, Final: a.final(), Slots: []types.Address{slotA}}
	gb := GroupSpec{Root: b.root, Final: b.final(), Slots: []types.Address{slotB}}
	for _, tc := range []struct {
		name string
		s    Spec
		p    func(*Params)
		says string
	}{
		{"one group", Spec{Steps: n, Groups: []GroupSpec{ga}}, nil, "2 to 64 distinct claims"},
		{"65 groups", Spec{Steps: n, Groups: make([]GroupSpec, 65)}, nil, "2 to 64 distinct claims"},
		{"one final for all", Spec{Steps: n, Groups: []GroupSpec{ga, {Root: b.root, Final: a.final(), Slots: gb.Slots}, {Root: types.Hash{3}, Final: a.final(), Slots: []types.Address{relayer}}}}, nil, "no game"},
		{"one root", Spec{Steps: n, Groups: []GroupSpec{ga, {Root: a.root, Final: b.final(), Slots: gb.Slots}}}, nil, "are one group"},
		{"one final", Spec{Steps: n, Groups: []GroupSpec{ga, {Root: b.root, Final: a.final(), Slots: gb.Slots}}}, nil, "no game"},
		{"no slots", Spec{Steps: n, Groups: []GroupSpec{ga, {Root: b.root, Final: b.final()}}}, nil, "has no slots"},
		{"a slot in both", Spec{Steps: n, Groups: []GroupSpec{ga, {Root: b.root, Final: b.final(), Slots: []types.Address{slotB, slotA}}}}, nil, "in two groups"},
		{"no steps", Spec{Groups: []GroupSpec{ga, gb}}, nil, "1 to"},
		{"too many steps", Spec{Steps: 1<<20 + 1, Groups: []GroupSpec{ga, gb}}, nil, "max_steps"},
		{"arity 9", Spec{Steps: n, Groups: []GroupSpec{ga, gb}}, func(p *Params) { p.Arity = 9 }, "arity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.p != nil {
				tc.p(&e.p)
			}
			tc.s.Job, tc.s.Base = job, base
			_, err := e.keeper().OpenGame(tc.s)
			if !errors.Is(err, types.ErrInvalidMsg) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v, want an invalid-message refusal saying %q", err, tc.says)
			}
			if e.dump() != "" {
				t.Fatal("a refused game wrote state")
			}
		})
	}
	e := newEnv(t)
	e.open(n, a, b)
	before := e.dump()
	if _, err := e.keeper().OpenGame(Spec{Job: job, Stage: stage, Steps: n, Base: base, Groups: []GroupSpec{ga, gb}}); !errors.Is(err, types.ErrDuplicate) || e.dump() != before {
		t.Fatalf("a second game for the stage: %v", err)
	}
}

// TestEndBlockCarriesOver: 20 games due at one height end 16 in that
// block and 4 in the next (earliest deadline first, no scan of state).
func TestEndBlockCarriesOver(t *testing.T) {
	e := newEnv(t)
	n := uint64(40)
	a, b := train(n, 0, ""), train(n, 9, "x")
	for j := range uint64(20) {
		if _, err := e.keeper().OpenGame(Spec{Job: 100 + j, Steps: n, Base: base, Groups: []GroupSpec{
			{Root: a.root, Final: a.final(), Slots: []types.Address{slotA}},
			{Root: b.root, Final: b.final(), Slots: []types.Address{slotB}},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	e.check()
	e.height += e.p.WindowBlocks
	if out := e.endBlock(); len(out) != MaxGamesPerBlock || out[0].Job != 100 {
		t.Fatalf("first block ended %d games, want %d", len(out), MaxGamesPerBlock)
	}
	e.height++
	if out := e.endBlock(); len(out) != 20-MaxGamesPerBlock || out[0].Job != 116 {
		t.Fatalf("second block ended %d games, want %d", len(out), 20-MaxGamesPerBlock)
	}
	if out := e.endBlock(); len(out) != 0 {
		t.Fatal("a game ended twice")
	}
}

// TestInvariantCatchesBrokenGames: the invariant is not vacuous: a game
// whose groups disagree at lo, whose interval is empty, whose round is
// beyond the bound, or whose deadline is not queued, is reported.
func TestInvariantCatchesBrokenGames(t *testing.T) {
	n := uint64(64)
	a, b := train(n, 0, ""), train(n, 30, "x")
	for _, tc := range []struct {
		name string
		edit func(*env, *Game)
	}{
		{"disagree at lo", func(_ *env, g *Game) { g.Groups[1].HLo = types.Hash{1} }},
		{"agree at hi", func(_ *env, g *Game) { g.Groups[1].HHi = g.Groups[0].HHi }},
		{"empty interval", func(_ *env, g *Game) { g.Lo = g.Hi }},
		{"rounds beyond the bound", func(_ *env, g *Game) { g.Round = MaxRounds(n, g.Arity) + 1 }},
		{"deadline not queued", func(e *env, g *Game) { e.kv.Delete(DueKey(g.Deadline, g.Job, g.Stage, g.Match)) }},
		{"every group opened", func(_ *env, g *Game) {
			for i := range g.Groups {
				g.Groups[i].Opened, g.Groups[i].Hashes = true, []types.Hash{{}}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			g := e.open(n, a, b)
			tc.edit(e, g)
			e.keeper().set(g)
			if err := Invariant(e.kv); err == nil {
				t.Fatal("the invariant did not notice")
			}
		})
	}
}

// TestEventsAndKeys: the game's events parse back, and the key builders
// have inverses.
func TestEventsAndKeys(t *testing.T) {
	e := newEnv(t)
	n := uint64(16)
	a, b := train(n, 0, ""), train(n, 5, "x")
	e.open(n, a, b)
	e.play(a, b)
	var opened EventGameOpened
	if err := types.DecodeEvent(e.events[0], &opened); err != nil || opened.Steps != n || !slices.Equal(opened.Roots, []string{a.root.Hex(), b.root.Hex()}) {
		t.Fatalf("opened %+v, %v", opened, err)
	}
	var narrowed EventGameNarrowed
	if err := types.DecodeEvent(e.events[3], &narrowed); err != nil || narrowed.Round != 2 || narrowed.Lo != 0 || narrowed.Hi != 8 {
		t.Fatalf("narrowed %+v, %v", narrowed, err)
	}
	var ended EventGameEnded
	if err := types.DecodeEvent(e.events[len(e.events)-1], &ended); err != nil || ended.Step != 5 || ended.HLo != a.hashes[4] || ended.Rounds != 4 {
		t.Fatalf("ended %+v, %v", ended, err)
	}
	if _, err := e.keeper().Decide(job, stage, 0, Verdict{Agreed: true, HStar: a.hashes[5]}); err != nil {
		t.Fatal(err)
	}
	var decided EventGameDecided
	if err := types.DecodeEvent(e.events[len(e.events)-2], &decided); err != nil || decided.Outcome != OutcomeVerdict || !slices.Equal(decided.Losers, []string{slotB.Hex()}) {
		t.Fatalf("decided %+v, %v", decided, err)
	}
	var done EventBracketDone
	if err := types.DecodeEvent(e.events[len(e.events)-1], &done); err != nil || done.Rounds != 1 || !slices.Equal(done.Survivors, []string{a.root.Hex()}) || done.ClassFailure {
		t.Fatalf("bracket done %+v, %v", done, err)
	}
	if j, s, m, ok := ParseGameKey(GameKey(1<<40+3, 513, 7)); !ok || j != 1<<40+3 || s != 513 || m != 7 {
		t.Fatal("game key round trip")
	}
	if h, j, s, m, ok := ParseDueKey(DueKey(99, 1<<40+3, 513, 7)); !ok || h != 99 || j != 1<<40+3 || s != 513 || m != 7 {
		t.Fatal("due key round trip")
	}
}

// TestGameDeterminism: the same game script on two fresh stores gives the
// same state root (no map order, clock or randomness reaches the state).
func TestGameDeterminism(t *testing.T) {
	roots := make([][]byte, 2)
	for i := range roots {
		e := newEnv(t)
		n := uint64(500)
		honest, liar := train(n, 0, ""), train(n, 333, "x")
		e.open(n, honest, liar)
		e.play(honest, liar)
		if _, err := e.keeper().Decide(job, stage, 0, Verdict{Agreed: true, HStar: honest.hashes[333]}); err != nil {
			t.Fatal(err)
		}
		roots[i] = e.kv.WorkingHash()
	}
	if !slices.Equal(roots[0], roots[1]) {
		t.Fatalf("two runs of one script: roots %x and %x", roots[0], roots[1])
	}
}

// BenchmarkOpenCheckpoints: one round's opening at the largest default
// job (2^20 steps) and the largest arity (8): 7 interior points plus
// leaves 0 and N, each a 21-hash proof; the cost the message's gas pays.
func BenchmarkOpenCheckpoints(b *testing.B) {
	n := uint64(1 << 20)
	honest, liar := train(n, 0, ""), train(n, 777_777, "x")
	e := newEnv(b)
	e.p.Arity = MaxArity
	e.open(n, honest, liar)
	m := e.opening(honest)
	b.ResetTimer()
	for range b.N {
		c := store.NewCache(e.kv)
		k := NewKeeper(Context{KV: c, Height: e.height, Params: e.p})
		if err := k.OpenCheckpoints(relayer, m); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(m.Hashes()), "hashes/op")
}

func TestStatusJSONRoundTrip(t *testing.T) {
	for _, s := range []Status{StatusOpen, StatusReexecute, StatusDecided} {
		b, err := s.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Status
		if err := back.UnmarshalText(b); err != nil || back != s {
			t.Fatalf("%s: read back %s, %v", s, back, err)
		}
	}
	var x Status
	if err := x.UnmarshalText([]byte("closed")); err == nil {
		t.Fatal("an unknown status was read")
	}
}
