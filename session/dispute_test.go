package session

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/types"
)

// disputeEnv is lanesEnv's session 7 (client, providers a and b, an
// output token at 1 oGPU, an input token free, expiry 50, grace 10) on a
// chain with three validators of equal power, a and b bonded 500 oGPU
// each, dispute_blocks 4 and the default 10 oGPU dispute bond.
type disputeEnv struct {
	*lanesEnv
	p        genesis.Params
	vals     []party
	stranger party
	frauds   []types.Address
}

func newDisputes(t *testing.T) *disputeEnv {
	e := &disputeEnv{lanesEnv: newLanes(t), p: genesis.DefaultParams(), stranger: newParty(t)}
	e.p.Market.DisputeBlocks = 4
	esc := escrow.NewKeeper(e.kv)
	for _, p := range []party{e.a, e.b, e.stranger} {
		esc.SetGenesisBalance(p.addr, types.OGPU(100))
	}
	esc.SetGenesisBond(e.a.addr, types.OGPU(500))
	esc.SetGenesisBond(e.b.addr, types.OGPU(500))
	for i := range 3 {
		v := newParty(t)
		e.vals = append(e.vals, v)
		e.addValidator(v, i)
	}
	return e
}

func (e *disputeEnv) addValidator(v party, i int) {
	esc := escrow.NewKeeper(e.kv)
	esc.SetGenesisBond(v.addr, types.OGPU(1000))
	pub := sha256.Sum256([]byte(fmt.Sprint("validator key ", v.addr, i)))
	if err := esc.CreateValidator(e.p.Staking, v.addr, fmt.Sprint("v", i), pub[:], new(uint256.Int)); err != nil {
		e.t.Fatal(err)
	}
	esc.EndBlockPower(e.p.Staking, e.height)
}

func (e *disputeEnv) keeper() *Keeper {
	return NewKeeper(Context{KV: e.kv, ChainID: chainID, Height: e.height, Params: e.p,
		Fraud: func(p types.Address, _ string) { e.frauds = append(e.frauds, p) }})
}

func word(w string) types.Hash { return types.Hash(sha256.Sum256([]byte(w))) }

// request is the client's (or signer's) signed request seq to provider.
func (e *disputeEnv) request(signer party, provider types.Address, seq uint64, prompt string) SignedRequest {
	q := Request{ChainID: chainID, Session: 7, Provider: provider, Seq: seq, Prompt: word(prompt), MaxTokens: 64}
	sig, err := Sign(signer.key, q.Hash())
	if err != nil {
		e.t.Fatal(err)
	}
	return SignedRequest{Request: q, Sig: sig}
}

// receipt is signer's receipt answering q with output, nOut tokens.
func (e *disputeEnv) receipt(signer party, q SignedRequest, output string, nOut uint64) SignedReceipt {
	r := Receipt{ChainID: chainID, Session: 7, Provider: q.Request.Provider, Seq: q.Request.Seq, Request: q.Request.Hash(), Output: word(output), NIn: 10, NOut: nOut}
	sig, err := Sign(signer.key, r.Hash())
	if err != nil {
		e.t.Fatal(err)
	}
	return SignedReceipt{Receipt: r, Sig: sig}
}

// audit is a one-receipt dispute of provider p's answer to seq.
func (e *disputeEnv) audit(p party, seq uint64, output string) *MsgDisputeSession {
	q := e.request(e.client, p.addr, seq, "prompt")
	return &MsgDisputeSession{Session: 7, Requests: []SignedRequest{q}, Receipts: []SignedReceipt{e.receipt(p, q, output, 3)}, Addrs: []string{"/ip4/127.0.0.1/tcp/4001"}}
}

// dump is every key and value in the store, in order.
func (e *disputeEnv) dump() string {
	var b strings.Builder
	e.kv.Iterate(nil, nil, func(k, v []byte) bool {
		fmt.Fprintf(&b, "%x=%x\n", k, v)
		return false
	})
	return b.String()
}

// refused runs a dispute that must fail with code and text, and checks
// that the store is unchanged.
func (e *disputeEnv) refused(from party, m *MsgDisputeSession, code *types.Error, text string) {
	e.t.Helper()
	before := e.dump()
	_, err := e.keeper().Dispute(from.addr, m)
	var got *types.Error
	if err == nil || !errors.As(err, &got) || got.Code != code.Code || !strings.Contains(err.Error(), text) {
		e.t.Fatalf("dispute: %v; want code %d containing %q", err, code.Code, text)
	}
	if e.dump() != before {
		e.t.Fatalf("a refused dispute (%v) changed the store", err)
	}
}

// TestDisputeAdmissibility: every refusal of MsgDisputeSession, each
// leaving the store as it was. Each is an attack: an accuser gaining a
// slash and compensation without a receipt the accused really signed for
// a request the client really made (S11, S15, S20), or loading the
// validators for free (S19).
func TestDisputeAdmissibility(t *testing.T) {
	e := newDisputes(t)
	addrs := []string{"/ip4/127.0.0.1/tcp/4001"}

	// A request the client never signed (a signed it itself).
	forged := e.request(e.a, e.a.addr, 1, "prompt")
	e.refused(e.client, &MsgDisputeSession{Session: 7, Requests: []SignedRequest{forged}, Receipts: []SignedReceipt{e.receipt(e.a, forged, "x", 3)}, Addrs: addrs},
		types.ErrUnauthorized, "request 0 is signed by")
	// A receipt the accused never signed (the client forged it).
	q := e.request(e.client, e.a.addr, 1, "prompt")
	e.refused(e.client, &MsgDisputeSession{Session: 7, Requests: []SignedRequest{q}, Receipts: []SignedReceipt{e.receipt(e.client, q, "x", 3)}, Addrs: addrs},
		types.ErrUnauthorized, "not by its provider")
	// A receipt of a non-party: the stranger holds no lane.
	qs := e.request(e.client, e.stranger.addr, 1, "prompt")
	e.refused(e.client, &MsgDisputeSession{Session: 7, Requests: []SignedRequest{qs}, Receipts: []SignedReceipt{e.receipt(e.stranger, qs, "x", 3)}, Addrs: addrs},
		types.ErrInvalidMsg, "holds no lane")
	// A receipt answering another request than the one given.
	other := e.request(e.client, e.a.addr, 1, "other prompt")
	e.refused(e.client, &MsgDisputeSession{Session: 7, Requests: []SignedRequest{other}, Receipts: []SignedReceipt{e.receipt(e.a, q, "x", 3)}, Addrs: addrs},
		types.ErrInvalidMsg, "does not answer the request")
	// A receipt of another chain.
	wrong := e.audit(e.a, 1, "x")
	wrong.Receipts[0].Receipt.ChainID = "other-chain"
	e.refused(e.client, wrong, types.ErrWrongChainID, "is for chain")
	// S11: a and b were asked different prompts; their outputs differ, of
	// course.
	qa, qb := e.request(e.client, e.a.addr, 1, "prompt"), e.request(e.client, e.b.addr, 1, "another prompt")
	e.refused(e.client, &MsgDisputeSession{Session: 7, Requests: []SignedRequest{qa, qb}, Receipts: []SignedReceipt{e.receipt(e.a, qa, "x", 3), e.receipt(e.b, qb, "y", 3)}, Addrs: addrs},
		types.ErrInvalidMsg, "S11")
	// The same output from both: nothing to compare.
	qb = e.request(e.client, e.b.addr, 1, "prompt")
	e.refused(e.client, &MsgDisputeSession{Session: 7, Requests: []SignedRequest{qa, qb}, Receipts: []SignedReceipt{e.receipt(e.a, qa, "x", 3), e.receipt(e.b, qb, "x", 3)}, Addrs: addrs},
		types.ErrInvalidMsg, "same output")
	// One provider, one seq, the same receipt twice (or differing only in
	// counts): no equivocation.
	ra := e.receipt(e.a, qa, "x", 3)
	e.refused(e.client, &MsgDisputeSession{Session: 7, Requests: []SignedRequest{qa, qa}, Receipts: []SignedReceipt{ra, ra}, Addrs: addrs},
		types.ErrInvalidMsg, "no equivocation")
	e.refused(e.client, &MsgDisputeSession{Session: 7, Requests: []SignedRequest{qa, qa}, Receipts: []SignedReceipt{ra, e.receipt(e.a, qa, "x", 9)}, Addrs: addrs},
		types.ErrInvalidMsg, "no equivocation")
	// A stranger may not accuse (S20: payouts go to the client anyway).
	e.refused(e.stranger, e.audit(e.a, 1, "x"), types.ErrUnauthorized, "neither session 7's client nor a provider")
	// Unknown session.
	unknown := e.audit(e.a, 1, "x")
	unknown.Session = 8
	e.refused(e.client, unknown, types.ErrNotFound, "no session 8")
	// An accuser that cannot post the bond.
	esc := escrow.NewKeeper(e.kv)
	have := esc.Balance(e.client.addr)
	esc.SetGenesisBalance(e.client.addr, types.OGPU(9))
	e.refused(e.client, e.audit(e.a, 1, "x"), types.ErrInsufficientFunds, "locks a bond of 10ogpu")
	esc.SetGenesisBalance(e.client.addr, have)

	// Re-dispute of the same receipt by the same accuser.
	if _, err := e.keeper().Dispute(e.client.addr, e.audit(e.a, 1, "x")); err != nil {
		t.Fatal(err)
	}
	e.check()
	e.refused(e.client, e.audit(e.a, 1, "x"), types.ErrDuplicate, "already disputed")
	// Too many open disputes: 7 more fill the session's 8.
	for seq := uint64(2); seq <= MaxOpenDisputes; seq++ {
		if _, err := e.keeper().Dispute(e.client.addr, e.audit(e.a, seq, "x")); err != nil {
			t.Fatal(err)
		}
	}
	e.check()
	e.refused(e.client, e.audit(e.b, 1, "y"), types.ErrWrongPhase, "disputes open, the most")
	// Late: after expiry + grace + dispute blocks (50 + 10 + 4).
	e2 := newDisputes(t)
	e2.height = 65
	e2.refused(e2.client, e2.audit(e2.a, 1, "x"), types.ErrWrongPhase, "took disputes until height 64")
	e2.height = 64
	if _, err := e2.keeper().Dispute(e2.client.addr, e2.audit(e2.a, 1, "x")); err != nil {
		t.Fatalf("a dispute at the last height: %v", err)
	}
}

// TestDisputeShape: the decoder refuses what no state could accept.
func TestDisputeShape(t *testing.T) {
	e := newDisputes(t)
	good := e.audit(e.a, 1, "x")
	for name, mut := range map[string]func(m *MsgDisputeSession){
		"no receipt": func(m *MsgDisputeSession) { m.Receipts, m.Requests = nil, nil },
		"three receipts": func(m *MsgDisputeSession) {
			m.Receipts, m.Requests = append(m.Receipts, m.Receipts[0], m.Receipts[0]), append(m.Requests, m.Requests[0], m.Requests[0])
		},
		"missing request": func(m *MsgDisputeSession) { m.Requests = nil },
		"no address":      func(m *MsgDisputeSession) { m.Addrs = nil },
		"nine addresses":  func(m *MsgDisputeSession) { m.Addrs = make([]string, 9); fillAddrs(m.Addrs) },
		"long address":    func(m *MsgDisputeSession) { m.Addrs = []string{strings.Repeat("a", 257)} },
		"control byte":    func(m *MsgDisputeSession) { m.Addrs = []string{"/ip4/\n"} },
		"short sig":       func(m *MsgDisputeSession) { m.Receipts[0].Sig = m.Receipts[0].Sig[:64] },
	} {
		m := *good
		m.Requests, m.Receipts = append([]SignedRequest(nil), good.Requests...), append([]SignedReceipt(nil), good.Receipts...)
		mut(&m)
		if _, err := DecodeMsgDisputeSession(m.Raw().Data); err == nil || types.CodeOf(err) != types.ErrInvalidMsg.Code {
			t.Errorf("%s: decoded (%v)", name, err)
		}
	}
	if _, err := DecodeMsgDisputeSession(good.Raw().Data); err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeMsgOpenSessionVote((&MsgOpenSessionVote{Verdict: 4}).Raw().Data); err == nil {
		t.Error("verdict 4 decoded: receipts are at most 2")
	}
}

func fillAddrs(a []string) {
	for i := range a {
		a[i] = fmt.Sprint("/ip4/127.0.0.1/tcp/", 4000+i)
	}
}

// vote seals and opens verdict for each voter in the given order; a nil
// verdict skips the voter (it seals nothing).
func (e *disputeEnv) vote(index uint64, verdicts ...*uint8) {
	e.t.Helper()
	for i, v := range verdicts {
		if v == nil {
			continue
		}
		c := SessionVoteCommitment(7, index, *v, word(fmt.Sprint("salt", i)), e.vals[i].addr)
		if err := e.keeper().SealVote(e.vals[i].addr, &MsgSealSessionVote{Session: 7, Dispute: index, Commitment: c}); err != nil {
			e.t.Fatalf("seal %d: %v", i, err)
		}
	}
	e.height += 3 // past SealBy (+2): open even if someone did not seal
	for i, v := range verdicts {
		if v == nil {
			continue
		}
		if err := e.keeper().OpenVote(e.vals[i].addr, &MsgOpenSessionVote{Session: 7, Dispute: index, Verdict: *v, Salt: word(fmt.Sprint("salt", i))}); err != nil {
			e.t.Fatalf("open %d: %v", i, err)
		}
	}
}

func v8(v uint8) *uint8 { return &v }

func (e *disputeEnv) endBlocks(to uint64) {
	for ; e.height <= to; e.height++ {
		e.keeper().EndBlock()
		e.check()
	}
}

// TestDisputeLiarSlashed: an audit the validators find invalid slashes the
// provider fraud_slash_bps, compensates the client at most the request's
// charge (3 output tokens at 1 oGPU: 3 oGPU, far below half the slash,
// rule 8), burns the rest, returns the bond, reports the fraud to the
// market, and the receipt cannot be disputed again. A validator that
// skipped the vote loses vote_slash_bps.
func TestDisputeLiarSlashed(t *testing.T) {
	e := newDisputes(t)
	esc := escrow.NewKeeper(e.kv)
	clientBefore, burnedBefore := esc.Balance(e.client.addr).Clone(), esc.Burned().Clone()
	d, err := e.keeper().Dispute(e.client.addr, e.audit(e.a, 1, "wrong"))
	if err != nil {
		t.Fatal(err)
	}
	if !esc.Balance(e.client.addr).Eq(new(uint256.Int).Sub(clientBefore, types.OGPU(10))) {
		t.Fatalf("the bond was not locked: client holds %s", types.FormatAmount(esc.Balance(e.client.addr)))
	}
	e.check()
	e.vote(d.Index, v8(1), v8(1), nil) // two of three: a majority; the third skipped
	e.endBlocks(d.Deadline)
	d, _ = GetDispute(e.kv, 7, d.Index)
	if d.Status != DisputeDecided || d.Verdict != 1 {
		t.Fatalf("dispute is %s verdict %d", d.Status, d.Verdict)
	}
	if !esc.Bonded(e.a.addr).Eq(types.OGPU(250)) {
		t.Fatalf("a has %s bonded, want half of 500 slashed", types.FormatAmount(esc.Bonded(e.a.addr)))
	}
	if !d.Compensated.Eq(types.OGPU(3)) || !d.Slashed.Eq(types.OGPU(250)) {
		t.Fatalf("slashed %s, compensated %s; want 250 and the 3 oGPU charge", types.FormatAmount(d.Slashed), types.FormatAmount(d.Compensated))
	}
	if want := new(uint256.Int).Add(clientBefore, types.OGPU(3)); !esc.Balance(e.client.addr).Eq(want) {
		t.Fatalf("client holds %s, want its bond back and 3 oGPU: %s", types.FormatAmount(esc.Balance(e.client.addr)), types.FormatAmount(want))
	}
	// 247 of the slash and 1 of the skipper's 1000 (10 bps) are burned.
	if burned := new(uint256.Int).Sub(esc.Burned(), burnedBefore); !burned.Eq(types.OGPU(248)) {
		t.Fatalf("burned %s, want 248", types.FormatAmount(burned))
	}
	if !esc.Bonded(e.vals[2].addr).Eq(types.OGPU(999)) || !esc.Bonded(e.vals[0].addr).Eq(types.OGPU(1000)) {
		t.Fatalf("the skipper holds %s, a voter %s", types.FormatAmount(esc.Bonded(e.vals[2].addr)), types.FormatAmount(esc.Bonded(e.vals[0].addr)))
	}
	if len(e.frauds) != 1 || e.frauds[0] != e.a.addr {
		t.Fatalf("frauds reported: %v", e.frauds)
	}
	// Proven wrong once: nobody disputes it again (a second compensation).
	e.refused(e.b, e.audit(e.a, 1, "wrong"), types.ErrDuplicate, "already proven wrong")
}

// TestDisputeOutcomesWithoutFault: every receipt valid (S14) and no data
// (S12) pay the bond to the fee pool and slash nobody; no majority returns
// the bond and slashes only those that did not vote.
func TestDisputeOutcomesWithoutFault(t *testing.T) {
	for _, c := range []struct {
		name     string
		votes    []*uint8
		status   DisputeStatus
		feePool  bool
		slashedV []bool
	}{
		{"valid", []*uint8{v8(0), v8(0), v8(0)}, DisputeDecided, true, []bool{false, false, false}},
		{"no data", []*uint8{v8(VerdictNoData), v8(VerdictNoData), v8(0)}, DisputeDismissed, true, []bool{false, false, true}},
		{"no majority", []*uint8{v8(1), v8(0), nil}, DisputeUnresolved, false, []bool{false, false, true}},
		// Validator 2 jailed before the opening: two voters, and half of
		// the power is not a majority.
		{"half", []*uint8{v8(1), v8(0)}, DisputeUnresolved, false, []bool{false, false, false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newDisputes(t)
			esc := escrow.NewKeeper(e.kv)
			if c.name == "half" {
				esc.Jail(e.vals[2].addr, 1000, false)
			}
			clientBefore, poolBefore := esc.Balance(e.client.addr).Clone(), esc.FeePool().Clone()
			d, err := e.keeper().Dispute(e.client.addr, e.audit(e.a, 1, "out"))
			if err != nil {
				t.Fatal(err)
			}
			e.vote(d.Index, c.votes...)
			e.endBlocks(d.Deadline)
			d, _ = GetDispute(e.kv, 7, d.Index)
			if d.Status != c.status || !d.Slashed.IsZero() {
				t.Fatalf("dispute is %s, slashed %s; want %s, nothing", d.Status, types.FormatAmount(d.Slashed), c.status)
			}
			if !esc.Bonded(e.a.addr).Eq(types.OGPU(500)) || len(e.frauds) != 0 {
				t.Fatal("the accused was punished")
			}
			pool := new(uint256.Int).Sub(esc.FeePool(), poolBefore)
			back := esc.Balance(e.client.addr).Eq(clientBefore)
			if c.feePool != pool.Eq(types.OGPU(10)) || c.feePool == back {
				t.Fatalf("fee pool +%s, bond back %v; want bond to the pool %v", types.FormatAmount(pool), back, c.feePool)
			}
			for i, want := range c.slashedV {
				if got := !esc.Bonded(e.vals[i].addr).Eq(types.OGPU(1000)); got != want {
					t.Errorf("validator %d slashed %v, want %v", i, got, want)
				}
			}
		})
	}
}

// TestEquivocationDecidedInTx: two receipts of a for seq 4 with different
// outputs slash a at once, compensate at most the larger charge, lock no
// bond, and open no vote (S15). A second showing is refused.
func TestEquivocationDecidedInTx(t *testing.T) {
	e := newDisputes(t)
	esc := escrow.NewKeeper(e.kv)
	clientBefore := esc.Balance(e.client.addr).Clone()
	q := e.request(e.client, e.a.addr, 4, "prompt")
	m := &MsgDisputeSession{Session: 7, Requests: []SignedRequest{q, q}, Receipts: []SignedReceipt{e.receipt(e.a, q, "one", 2), e.receipt(e.a, q, "two", 5)}, Addrs: []string{"/dns/x"}}
	d, err := e.keeper().Dispute(e.client.addr, m)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != DisputeEquivocation || d.Kind != KindEquivocation || len(d.Voters) != 0 || !d.Bond.IsZero() {
		t.Fatalf("dispute %+v", d)
	}
	if !d.Compensated.Eq(types.OGPU(5)) || !esc.Balance(e.client.addr).Eq(new(uint256.Int).Add(clientBefore, types.OGPU(5))) {
		t.Fatalf("compensated %s; want the larger charge, 5 oGPU, and no bond taken", types.FormatAmount(d.Compensated))
	}
	if !esc.Bonded(e.a.addr).Eq(types.OGPU(250)) || len(e.frauds) != 1 {
		t.Fatal("a was not slashed and reported")
	}
	e.check()
	e.refused(e.client, m, types.ErrDuplicate, "already proven wrong")
}

// TestAccusedValidatorCannotVote (S18): a provider that also operates a
// validator is left out of the voter set of its own case, and so is the
// accuser; the others decide.
func TestAccusedValidatorCannotVote(t *testing.T) {
	e := newDisputes(t)
	e.addValidator(e.a, 9) // a's 500 oGPU become a validator with power
	esc := escrow.NewKeeper(e.kv)
	if esc.ReportedPower(mustValidator(t, esc, e.a.addr).PubKey) == 0 {
		t.Fatal("a has no power: the test proves nothing")
	}
	d, err := e.keeper().Dispute(e.client.addr, e.audit(e.a, 1, "wrong"))
	if err != nil {
		t.Fatal(err)
	}
	if d.VoterPower(e.a.addr) != 0 || len(d.Voters) != 3 {
		t.Fatalf("voters %v include the accused", d.Voters)
	}
	c := SessionVoteCommitment(7, d.Index, 0, word("s"), e.a.addr)
	before := e.dump()
	if err := e.keeper().SealVote(e.a.addr, &MsgSealSessionVote{Session: 7, Dispute: d.Index, Commitment: c}); err == nil || types.CodeOf(err) != types.ErrUnauthorized.Code {
		t.Fatalf("the accused sealed a vote in its own case: %v", err)
	}
	if e.dump() != before {
		t.Fatal("a refused vote changed the store")
	}
}

func mustValidator(t *testing.T, esc escrow.Keeper, op types.Address) *escrow.Validator {
	v, ok := esc.GetValidator(op)
	if !ok {
		t.Fatal("no validator")
	}
	return v
}

// TestVoteRules: a sealed vote opens only with its verdict and salt, once;
// seals close at SealBy; a verdict naming a receipt the dispute does not
// have is refused.
func TestVoteRules(t *testing.T) {
	e := newDisputes(t)
	d, err := e.keeper().Dispute(e.client.addr, e.audit(e.a, 1, "x"))
	if err != nil {
		t.Fatal(err)
	}
	v := e.vals[0]
	seal := func(verdict uint8, salt string) error {
		return e.keeper().SealVote(v.addr, &MsgSealSessionVote{Session: 7, Dispute: d.Index, Commitment: SessionVoteCommitment(7, d.Index, verdict, word(salt), v.addr)})
	}
	open := func(verdict uint8, salt string) error {
		return e.keeper().OpenVote(v.addr, &MsgOpenSessionVote{Session: 7, Dispute: d.Index, Verdict: verdict, Salt: word(salt)})
	}
	if err := seal(2, "s"); err != nil {
		t.Fatal(err)
	}
	if err := seal(1, "s"); types.CodeOf(err) != types.ErrDuplicate.Code {
		t.Fatalf("sealed twice: %v", err)
	}
	if err := open(2, "s"); types.CodeOf(err) != types.ErrWrongPhase.Code {
		t.Fatalf("opened before the others sealed and before SealBy: %v", err)
	}
	e.height = d.SealBy + 1
	if err := e.keeper().SealVote(e.vals[1].addr, &MsgSealSessionVote{Session: 7, Dispute: d.Index, Commitment: word("c")}); types.CodeOf(err) != types.ErrWrongPhase.Code {
		t.Fatalf("sealed after SealBy: %v", err)
	}
	if err := open(1, "s"); types.CodeOf(err) != types.ErrCommitMismatch.Code {
		t.Fatalf("opened another verdict than sealed: %v", err)
	}
	if err := open(2, "s"); types.CodeOf(err) != types.ErrInvalidMsg.Code {
		t.Fatalf("verdict 2 on a one-receipt dispute: %v", err)
	}
	if err := e.keeper().OpenVote(e.stranger.addr, &MsgOpenSessionVote{Session: 7, Dispute: d.Index}); types.CodeOf(err) != types.ErrUnauthorized.Code {
		t.Fatalf("a stranger opened a vote: %v", err)
	}
}

// TestBondOutlivesRefund: a dispute opened in the grace's last block stays
// open after the session settled; the escrow keeps exactly the bond (the
// invariants hold every block) and returns it at the decision.
func TestBondOutlivesRefund(t *testing.T) {
	e := newDisputes(t)
	e.height = 60
	d, err := e.keeper().Dispute(e.client.addr, e.audit(e.a, 1, "x"))
	if err != nil {
		t.Fatal(err)
	}
	e.endBlocks(61) // heights 60 and 61: the session settles at 61
	s, _ := Get(e.kv, 7)
	if !s.Settled || !escrow.NewKeeper(e.kv).Locked(7).Eq(types.OGPU(10)) {
		t.Fatalf("settled %v, escrow %s: want settled with the bond still held", s.Settled, types.FormatAmount(escrow.NewKeeper(e.kv).Locked(7)))
	}
	e.endBlocks(d.Deadline) // nobody votes: unresolved, bond back
	if !escrow.NewKeeper(e.kv).Locked(7).IsZero() {
		t.Fatal("the bond is still held")
	}
	d, _ = GetDispute(e.kv, 7, d.Index)
	if d.Status != DisputeUnresolved {
		t.Fatalf("dispute %s", d.Status)
	}
}

// TestPreemptionDoesNotShield: a provider that disputes its own wrong
// receipt first (and will withhold the data) does not stop the client from
// disputing it: a receipt is disputed once per accuser, and only a
// conviction closes it to everyone.
func TestPreemptionDoesNotShield(t *testing.T) {
	e := newDisputes(t)
	if _, err := e.keeper().Dispute(e.a.addr, e.audit(e.a, 1, "wrong")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.keeper().Dispute(e.client.addr, e.audit(e.a, 1, "wrong")); err != nil {
		t.Fatalf("the client's dispute was shut out by the accused's own: %v", err)
	}
	e.check()
}

// TestDisputeDeadlinesAreBounded: at most MaxDisputesPerBlock disputes end
// in one end-block (S19: a flood of disputes due at one height cannot
// stall it); the rest end the next block.
func TestDisputeDeadlinesAreBounded(t *testing.T) {
	e := newDisputes(t)
	esc := escrow.NewKeeper(e.kv)
	esc.SetGenesisBalance(e.client.addr, types.OGPU(10_000))
	for id := uint64(8); id <= 9; id++ {
		if err := esc.Lock(e.client.addr, id, types.OGPU(1)); err != nil {
			t.Fatal(err)
		}
		s := &Session{ID: id, Client: e.client.addr, PriceIn: types.OGPU(0), PriceOut: types.OGPU(1), Expiry: 50, Grace: 10,
			Lanes: []Lane{{Provider: e.a.addr, Budget: types.OGPU(1)}}, Fee: new(uint256.Int)}
		if err := e.keeper().Open(s); err != nil {
			t.Fatal(err)
		}
	}
	for id := uint64(7); id <= 9; id++ {
		for seq := uint64(1); seq <= MaxOpenDisputes; seq++ {
			m := e.audit(e.a, seq, "x")
			q := m.Requests[0].Request
			q.Session = id
			m.Session, m.Requests[0] = id, e.sign(q)
			r := m.Receipts[0].Receipt
			r.Session, r.Request = id, q.Hash()
			m.Receipts[0] = e.signReceipt(e.a, r)
			if _, err := e.keeper().Dispute(e.client.addr, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	open := func() (n uint64) {
		for id := uint64(7); id <= 9; id++ {
			s, _ := Get(e.kv, id)
			n += s.OpenDisputes
		}
		return n
	}
	e.height = 14 // every deadline
	e.keeper().EndBlock()
	e.check()
	if got := open(); got != 3*MaxOpenDisputes-MaxDisputesPerBlock {
		t.Fatalf("%d disputes open after the first end-block, want %d", got, 3*MaxOpenDisputes-MaxDisputesPerBlock)
	}
	e.height++
	e.keeper().EndBlock()
	e.check()
	if got := open(); got != 0 {
		t.Fatalf("%d disputes open after the second end-block", got)
	}
}

func (e *disputeEnv) sign(q Request) SignedRequest {
	sig, err := Sign(e.client.key, q.Hash())
	if err != nil {
		e.t.Fatal(err)
	}
	return SignedRequest{Request: q, Sig: sig}
}

func (e *disputeEnv) signReceipt(p party, r Receipt) SignedReceipt {
	sig, err := Sign(p.key, r.Hash())
	if err != nil {
		e.t.Fatal(err)
	}
	return SignedReceipt{Receipt: r, Sig: sig}
}
