package market

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// splitNet is a net for split jobs: a client and providers that hold real
// secp256k1 keys (hand-offs are signed), two providers per stage of a
// 2-stage job advertising their stage's slice, one backup advertising the
// whole model that bids on both stages, a spare advertising nothing, and
// one validator, "val". Disputes last 4 blocks.
type splitNet struct {
	*testNet
	keys   map[types.Address]*ecdsa.PrivateKey
	client types.Address
	stage  [2][2]types.Address // stage[s][i]: the i-th bidder of stage s (chains are assigned at the award)
	backup types.Address
	spare  types.Address
	val    types.Address
}

var (
	splitModel  = hashOf("split model")
	splitSlices = []types.Hash{hashOf("slice 0"), hashOf("slice 1")}
)

func newSplitNet(t *testing.T) *splitNet {
	t.Helper()
	params := genesis.DefaultParams()
	params.Market.DisputeBlocks = 4
	params.Market.CanaryBlocks = 1
	n := &splitNet{keys: map[types.Address]*ecdsa.PrivateKey{}, val: addrOf("val")}
	key := func(name string) types.Address {
		h := sha256.Sum256([]byte("split key " + name))
		k, err := crypto.ToECDSA(h[:])
		if err != nil {
			t.Fatal(err)
		}
		a := crypto.PubkeyToAddress(k.PublicKey)
		n.keys[a] = k
		return a
	}
	n.client, n.backup, n.spare = key("client"), key("backup"), key("spare")
	accts := []testAccount{{n.client, types.OGPU(1_000)}, {n.backup, types.OGPU(1_000)}, {n.spare, types.OGPU(1_000)}, {n.val, types.OGPU(2_000)}}
	for s := range n.stage {
		for i := range n.stage[s] {
			n.stage[s][i] = key(fmt.Sprintf("stage %d provider %d", s, i))
			accts = append(accts, testAccount{n.stage[s][i], types.OGPU(1_000)})
		}
	}
	n.testNet = newTestNet(t, params, accts, []string{"val"})
	for s := range n.stage {
		for i, a := range n.stage[s] {
			info := gpuInfo(fmt.Sprintf("s%d%d", s, i))
			info.Models = []types.Hash{splitSlices[s]}
			n.register(a, types.OGPU(100), info)
		}
	}
	whole := gpuInfo("backup")
	whole.Models = []types.Hash{splitModel}
	n.register(n.backup, types.OGPU(100), whole)
	n.register(n.spare, types.OGPU(100), gpuInfo("spare"))
	n.endBlock()
	return n
}

// splitJob is a 2-stage r=2 split auction with a cap of 3 oGPU per
// replica: bids 2 blocks, reveals 2, execute 3, verify 3.
func splitJob() *MsgPostJob {
	m := auctionJob(2, types.OGPU(3))
	m.Kind, m.Stages, m.Model, m.Slices = KindSplit, 2, splitModel, slices.Clone(splitSlices)
	m.MaxTokens, m.PromptTokens = 40, 8
	return m
}

// award posts a split job and runs its auction to the close: each stage is
// won by its two providers at 1 oGPU, the backup bidding 2 oGPU on both
// stages sets the clearing price at 2. It returns at the first height after
// the close. The bids are revealed at the last height of the reveal
// window, so the close runs at RevealEnd (the worst case the job's life
// is sized for) and the tests' deadlines count from there.
func (n *splitNet) award() uint64 {
	n.tb.Helper()
	id := n.post(n.client, splitJob())
	for s := uint16(0); s < 2; s++ {
		for _, a := range n.stage[s] {
			n.bid(a, id, s, types.OGPU(1))
		}
		n.bid(n.backup, id, s, types.OGPU(2))
	}
	n.advanceTo(n.job(id).RevealEnd)
	for s := uint16(0); s < 2; s++ {
		for _, a := range n.stage[s] {
			n.revealBid(a, id, s, types.OGPU(1))
		}
		n.revealBid(n.backup, id, s, types.OGPU(2))
	}
	n.advanceTo(n.job(id).RevealEnd + 1)
	return id
}

// holder is the provider of chain c of stage s.
func (n *splitNet) holder(id uint64, s, c uint16) types.Address {
	return n.task(id, s).Slots[c].Provider
}

// transcript is what one slot revealed: frames, input and output hashes.
type transcript struct {
	steps     uint32
	hin, hout types.Hash
}

func splitSalt(a types.Address, id uint64, s uint16) types.Hash {
	return sha256.Sum256(cat([]byte("split salt"), a[:], be64(id), be16(s)))
}

// run has every slot commit its transcript tr[s][c] in this block and
// reveal it in the next.
func (n *splitNet) run(id uint64, tr [2][2]transcript) {
	n.tb.Helper()
	for s := uint16(0); s < 2; s++ {
		for c := uint16(0); c < 2; c++ {
			a, x := n.holder(id, s, c), tr[s][c]
			n.must("commit transcript", func(k *Keeper) error {
				return k.CommitResult(a, &verifier.MsgCommitResult{Job: id, Stage: s, Commitment: SplitCommitment(id, s, c, x.steps, x.hin, x.hout, splitSalt(a, id, s), a)})
			})
		}
	}
	n.endBlock()
	for s := uint16(0); s < 2; s++ {
		for c := uint16(0); c < 2; c++ {
			a, x := n.holder(id, s, c), tr[s][c]
			n.must("reveal transcript", func(k *Keeper) error {
				return k.RevealTranscript(a, &MsgRevealTranscript{Job: id, Stage: s, Steps: x.steps, Hin: x.hin, Hout: x.hout, Salt: splitSalt(a, id, s)})
			})
		}
	}
}

// sign is signer's hand-off signature over what the link (chain, from
// stage) carried.
func (n *splitNet) sign(signer types.Address, id uint64, chain, from uint16, steps uint32, hrun types.Hash) []byte {
	n.tb.Helper()
	d := HandoffDigest(testChainID, id, chain, from, steps, hrun)
	sig, err := crypto.Sign(d[:], n.keys[signer])
	if err != nil {
		n.tb.Fatal(err)
	}
	return sig
}

// prove has chain c of stage s prove its input with sig.
func (n *splitNet) prove(id uint64, s, c uint16, x transcript, sig []byte) func(k *Keeper) error {
	a := n.holder(id, s, c)
	return func(k *Keeper) error {
		return k.ProveHandoff(a, &MsgProveHandoff{Job: id, Stage: s, Chain: c, Steps: x.steps, Hin: x.hin, Sig: sig})
	}
}

func (n *splitNet) balancesOf(addrs ...types.Address) []*uint256.Int {
	out := make([]*uint256.Int, len(addrs))
	for i, a := range addrs {
		out[i] = n.balance(a)
	}
	return out
}

// honest is the transcript of an honest 2-stage run: the client's prompt
// in, x out of stage 0, y out of stage 1, 12 frames each.
var honest = [2]transcript{
	{12, hashOf("client prompt frames"), hashOf("stage 0 residuals")},
	{12, hashOf("stage 0 residuals"), hashOf("stage 1 tokens")},
}

func bothChains(a, b [2]transcript) [2][2]transcript {
	return [2][2]transcript{{a[0], b[0]}, {a[1], b[1]}}
}

func outcomes(t *testing.T, evs types.Events) map[string][]string {
	out := map[string][]string{} // looked up only
	for _, e := range eventsOf[EventSplitSlotSettled](t, evs) {
		out[fmt.Sprintf("%d/%d", e.Stage, e.Chain)] = append(out[fmt.Sprintf("%d/%d", e.Stage, e.Chain)], e.Outcome)
	}
	return out
}

// TestSplitHonest: 2 stages × 2 chains, all honest: every stage is awarded
// at the close, both confirm and settle agreed, every provider is paid the
// clearing price, and the client pays 4 prices plus the fee.
func TestSplitHonest(t *testing.T) {
	n := newSplitNet(t)
	start := n.balancesOf(n.client, n.stage[0][0], n.stage[0][1], n.stage[1][0], n.stage[1][1], n.backup)
	id := n.award()
	j := n.job(id)
	if j.State != JobRunning || !slices.Equal(j.Slices, splitSlices) {
		t.Fatalf("job %s with slices %x after the close, want running with %x", j.State, j.Slices, splitSlices)
	}
	for s := uint16(0); s < 2; s++ {
		tk := n.task(id, s)
		if tk.Status != verifier.TaskExecuting || len(tk.Slots) != 2 || !j.Prices[s].Eq(types.OGPU(2)) {
			t.Fatalf("stage %d: %s with %d slots at %s, want executing, 2 slots at 2 oGPU", s, tk.Status, len(tk.Slots), j.Prices[s].Dec())
		}
		if !slices.Contains(n.stage[s][:], tk.Slots[0].Provider) || !slices.Contains(n.stage[s][:], tk.Slots[1].Provider) {
			t.Fatalf("stage %d won by %v, want its two bidders", s, tk.Slots)
		}
	}
	n.events = nil
	n.run(id, bothChains(honest, honest))
	if got := len(eventsOf[EventTaskConfirming](t, n.events)); got != 2 {
		t.Fatalf("%d stages confirming after the last reveal, want 2 (no input waits for a proof)", got)
	}
	n.endBlock()
	n.endBlock()
	settled := eventsOf[EventTaskSettled](t, n.events)
	if len(settled) != 2 || settled[0].Outcome != "agreed" || settled[1].Outcome != "agreed" || settled[0].Result != honest[0].hout || settled[1].Result != honest[1].hout {
		t.Fatalf("settled %+v, want both stages agreed on their outputs", settled)
	}
	j = n.job(id)
	if j.State != JobCompleted || j.Verified != 2 || !j.Paid.Eq(types.OGPU(8)) {
		t.Fatalf("job %s, %d verified, paid %s; want completed, 2, 8 oGPU", j.State, j.Verified, j.Paid.Dec())
	}
	end := n.balancesOf(n.client, n.stage[0][0], n.stage[0][1], n.stage[1][0], n.stage[1][1], n.backup)
	for i := 1; i <= 4; i++ {
		if want := new(uint256.Int).Add(start[i], types.OGPU(2)); !end[i].Eq(want) {
			t.Errorf("provider %d: balance %s, want %s", i, end[i].Dec(), want.Dec())
		}
	}
	if !end[5].Eq(start[5]) {
		t.Errorf("backup: balance %s, want %s (deposits back)", end[5].Dec(), start[5].Dec())
	}
	fee := escrow.MulBps(types.OGPU(12), n.params.Market.ValidatorFeeBps)
	if want := new(uint256.Int).Sub(start[0], new(uint256.Int).Add(types.OGPU(8), fee)); !end[0].Eq(want) {
		t.Errorf("client: balance %s, want %s (4 × 2 oGPU and the fee)", end[0].Dec(), want.Dec())
	}
}

// TestSplitStageZeroLiar (and review 2's M-L2): chain 1's stage 0 outputs
// a lie on the agreed input; chain 1's stage 1 computes honestly on it.
// Stage 0 is disputed (the first stage with equal inputs and different
// outputs) and stage 1 is held until its verdict (it was paid at once,
// unchecked). The validators vote for the honest output: the liar is
// slashed and tombstoned; stage 1 of the lying chain computed on a lie,
// so it is unpaid but keeps its stake (P15); stage 1 of the honest chain,
// now with nothing to compare with, is audited and paid once upheld.
func TestSplitStageZeroLiar(t *testing.T) {
	n := newSplitNet(t)
	id := n.award()
	liar, downstream := n.holder(id, 0, 1), n.holder(id, 1, 1)
	stake, before := n.esc().Bonded(liar), n.balance(downstream)
	lie := [2]transcript{
		{12, honest[0].hin, hashOf("wrong residuals")},
		{12, hashOf("wrong residuals"), hashOf("tokens from wrong residuals")},
	}
	n.events = nil
	n.run(id, bothChains(honest, lie))
	div := eventsOf[EventSplitDiverged](t, n.events)
	if len(div) != 1 || div[0].Stage != 0 || div[0].Hin != honest[0].hin || div[0].Steps != 12 {
		t.Fatalf("diverged %+v, want stage 0 on the client's input", div)
	}
	if tk := n.task(id, 0); tk.Status != verifier.TaskDisputed {
		t.Fatalf("stage 0 is %s, want disputed", tk.Status)
	}
	if got := outcomes(t, n.events); len(got) != 0 {
		t.Fatalf("outcomes %v before the verdict, want none: stage 1 waits for it", got)
	}
	if tk := n.task(id, 1); tk.Status != verifier.TaskHeld {
		t.Fatalf("stage 1 is %s, want held until stage 0's verdict", tk.Status)
	}
	n.events = nil
	n.vote(id, 0, honest[0].hout, n.val)
	settled := eventsOf[EventTaskSettled](t, n.events)
	if len(settled) != 1 || settled[0].Outcome != "verdict" || settled[0].Result != honest[0].hout {
		t.Fatalf("settled %+v, want stage 0 on the verdict", settled)
	}
	if got := outcomes(t, n.events); !slices.Equal(got["1/1"], []string{SplitDownstreamOfLoser}) || len(got["1/0"]) != 0 {
		t.Fatalf("stage 1 outcomes %v, want 1/1 downstream_of_loser and 1/0 audited", got)
	}
	if tk := n.task(id, 1); tk.Status != verifier.TaskDisputed || tk.Audit != verifier.AuditSplit {
		t.Fatalf("stage 1 is %s (audit %q), want the honest chain's slot audited", tk.Status, tk.Audit)
	}
	n.vote(id, 1, honest[1].hout, n.val)
	if p, _ := GetProvider(n.tree, liar); !p.Tombstoned {
		t.Error("the stage-0 liar is not tombstoned")
	}
	if got, want := n.esc().Bonded(liar), new(uint256.Int).Sub(stake, escrow.MulBps(stake, n.params.Market.FraudSlashBps)); !got.Eq(want) {
		t.Errorf("liar's stake %s, want %s", got.Dec(), want.Dec())
	}
	if p, _ := GetProvider(n.tree, downstream); p.Jailed || !n.esc().Bonded(downstream).Eq(types.OGPU(100)) {
		t.Error("the honest stage 1 of the lying chain was jailed or slashed")
	}
	if got := n.balance(downstream); !got.Eq(before) {
		t.Errorf("downstream of the liar: balance %s, want %s (unpaid: its input was a lie)", got.Dec(), before.Dec())
	}
	if j := n.job(id); j.State != JobCompleted || j.Verified != 2 || !j.Paid.Eq(types.OGPU(4)) {
		t.Errorf("job %s, %d verified, paid %s; want completed, 2 (stage 0's verdict, stage 1's audit), 4 oGPU", j.State, j.Verified, j.Paid.Dec())
	}
}

// TestSplitInputLie (P1): chain 1's stage 1 claims an input its upstream
// never sent, so that its wrong output looks computed on it. It cannot
// prove the input (no upstream signature over it; a signature by anyone
// else is refused): at the handoff deadline it is slashed and unpaid,
// stage 0 agrees, and its stage-1 replica, alone, is audited before it is
// paid (it was paid unverified: review 2's M-H4).
func TestSplitInputLie(t *testing.T) {
	n := newSplitNet(t)
	id := n.award()
	liar := n.holder(id, 1, 1)
	stake := n.esc().Bonded(liar)
	claim := [2]transcript{honest[0], {12, hashOf("an input nobody sent"), hashOf("a wrong output")}}
	n.events = nil
	n.run(id, bothChains(honest, claim))
	if got := len(eventsOf[EventTaskConfirming](t, n.events)); got != 0 {
		t.Fatalf("%d stages confirming while an input is unproven, want 0", got)
	}
	n.advanceTo(n.task(id, 0).RevealDeadline)
	n.events = nil
	n.endBlock()
	pending := eventsOf[EventSplitInputsPending](t, n.events)
	if len(pending) != 1 || !slices.Equal(pending[0].Slots, []string{"1/1"}) || pending[0].ProveBy != n.task(id, 0).RevealDeadline+4 {
		t.Fatalf("pending %+v, want slot 1/1 until the reveal deadline + 4", pending)
	}
	// Its own key, the other chain's upstream, the client: none is its upstream.
	for _, signer := range []types.Address{liar, n.holder(id, 0, 0), n.client} {
		n.refused("prove an input signed by "+signer.Hex(), n.prove(id, 1, 1, claim[1], n.sign(signer, id, 1, 0, 12, claim[1].hin)),
			types.ErrBadSignature, "not by the upstream "+n.holder(id, 0, 1).Hex())
	}
	n.events = nil
	n.advanceTo(pending[0].ProveBy + 1)
	got := outcomes(t, n.events)
	if !slices.Equal(got["1/1"], []string{SplitInputLie}) || len(got["1/0"]) != 0 {
		t.Fatalf("outcomes %v, want 1/1 input_lie and 1/0 audited", got)
	}
	if tk := n.task(id, 1); tk.Status != verifier.TaskDisputed || tk.Audit != verifier.AuditSplit {
		t.Fatalf("stage 1 is %s (audit %q), want an audit of its lone slot", tk.Status, tk.Audit)
	}
	if p, _ := GetProvider(n.tree, liar); !p.Tombstoned {
		t.Error("the input liar is not tombstoned")
	}
	if got, want := n.esc().Bonded(liar), new(uint256.Int).Sub(stake, escrow.MulBps(stake, n.params.Market.FraudSlashBps)); !got.Eq(want) {
		t.Errorf("input liar's stake %s, want %s", got.Dec(), want.Dec())
	}
	n.vote(id, 1, honest[1].hout, n.val)
	n.endBlock()
	n.endBlock()
	if j := n.job(id); j.State != JobCompleted || j.Verified != 2 || !j.Paid.Eq(types.OGPU(6)) {
		t.Errorf("job %s, %d verified, paid %s; want completed, 2 (stage 0 agreed, stage 1 audited), 6 oGPU", j.State, j.Verified, j.Paid.Dec())
	}
}

// TestSplitEquivocation (P2): chain 1's stage 0 sends the right residuals
// downstream (signed) but reveals a different output, to shift blame onto
// its downstream. The downstream proves what it received with the
// upstream's signature: the upstream is slashed and tombstoned with no
// vote, stage 1's two replicas, now on equal inputs, agree, and stage 0's
// honest slot, alone, is audited before it is paid.
func TestSplitEquivocation(t *testing.T) {
	n := newSplitNet(t)
	id := n.award()
	cheat := n.holder(id, 0, 1)
	stake := n.esc().Bonded(cheat)
	two := [2]transcript{{12, honest[0].hin, hashOf("a claimed output")}, honest[1]}
	n.run(id, bothChains(honest, two))
	if got := n.task(id, 0).Status; got != verifier.TaskExecuting {
		t.Fatalf("stage 0 is %s before the proof, want executing", got)
	}
	n.events = nil
	n.must("prove the signed input", n.prove(id, 1, 1, honest[1], n.sign(cheat, id, 1, 0, 12, honest[1].hin)))
	eq := eventsOf[EventHandoffEquivocation](t, n.events)
	if len(eq) != 1 || eq[0].Provider != cheat || eq[0].Signed != honest[1].hin || eq[0].Revealed != two[0].hout {
		t.Fatalf("equivocation events %+v, want the stage-0 cheat", eq)
	}
	for _, d := range eventsOf[EventDisputeOpened](t, n.events) {
		if len(d.Results) != 1 || d.Stage != 0 {
			t.Errorf("dispute %+v: equivocation needs no vote; only stage 0's lone slot is audited", d)
		}
	}
	if p, _ := GetProvider(n.tree, cheat); !p.Tombstoned {
		t.Error("the equivocator is not tombstoned")
	}
	if got, want := n.esc().Bonded(cheat), new(uint256.Int).Sub(stake, escrow.MulBps(stake, n.params.Market.FraudSlashBps)); !got.Eq(want) {
		t.Errorf("equivocator's stake %s, want %s", got.Dec(), want.Dec())
	}
	got := outcomes(t, n.events)
	if !slices.Equal(got["0/1"], []string{SplitEquivocated}) || len(got["0/0"]) != 0 {
		t.Fatalf("outcomes %v, want 0/1 equivocated, 0/0 audited", got)
	}
	if c := eventsOf[EventTaskConfirming](t, n.events); len(c) != 1 || c[0].Stage != 1 || c[0].Result != honest[1].hout {
		t.Fatalf("confirming %+v, want stage 1 agreed on equal (one proven) inputs", c)
	}
	n.vote(id, 0, honest[0].hout, n.val)
	n.endBlock()
	n.endBlock()
	if j := n.job(id); j.State != JobCompleted || !j.Paid.Eq(types.OGPU(6)) {
		t.Errorf("job %s paid %s, want completed, 6 oGPU (all but the equivocator)", j.State, j.Paid.Dec())
	}
}

// TestSplitClientEquivocation (P8): the client feeds the two chains
// different prompts, signing both. Both stage-0 providers prove their
// input: nobody is slashed; chain 0 (the first) is audited stage by
// stage, chain 1, on the client's second prompt, is paid by the client
// (client_input, not verified), so equivocating buys no free work.
func TestSplitClientEquivocation(t *testing.T) {
	n := newSplitNet(t)
	id := n.award()
	other := [2]transcript{{12, hashOf("another prompt"), hashOf("other residuals")}, {12, hashOf("other residuals"), hashOf("other tokens")}}
	n.run(id, bothChains(honest, other))
	for c, x := range []transcript{honest[0], other[0]} {
		n.must("prove the client's input", n.prove(id, 0, uint16(c), x, n.sign(n.client, id, uint16(c), ClientStage, x.steps, x.hin)))
	}
	if got := len(eventsOf[EventClientEquivocated](t, n.events)); got != 1 {
		t.Fatalf("%d client equivocation events, want 1", got)
	}
	if got := len(eventsOf[EventSlashed](t, n.events)); got != 0 {
		t.Fatalf("%d slashes, want none", got)
	}
	got := outcomes(t, n.events)
	if !slices.Equal(got["0/1"], []string{SplitClientInput}) || !slices.Equal(got["1/1"], []string{SplitClientInput}) || len(got["0/0"])+len(got["1/0"]) != 0 {
		t.Fatalf("outcomes %v, want chain 1 client_input (paid), chain 0 audited", got)
	}
	n.vote(id, 0, honest[0].hout, n.val)
	n.vote(id, 1, honest[1].hout, n.val)
	if j := n.job(id); j.State != JobCompleted || !j.Paid.Eq(types.OGPU(8)) || j.Verified != 2 {
		t.Errorf("job %s paid %s, %d verified; want completed, 8 oGPU, 2 (chain 0's audits)", j.State, j.Paid.Dec(), j.Verified)
	}
}

// TestSplitBadProofs: every malformed or misdirected hand-off proof is
// refused with a clear error and writes nothing; the right one is then
// accepted once.
func TestSplitBadProofs(t *testing.T) {
	n := newSplitNet(t)
	id := n.award()
	up, holder := n.holder(id, 0, 1), n.holder(id, 1, 1)
	x := transcript{12, hashOf("signed frames"), hashOf("its output")}
	n.run(id, bothChains(honest, [2]transcript{honest[0], x}))
	good := n.sign(up, id, 1, 0, 12, x.hin)
	high := slices.Clone(good) // the same signature with S' = N - S and V flipped
	s := new(uint256.Int).SetBytes(high[32:64])
	nS := uint256.MustFromBig(crypto.S256().Params().N)
	s.Sub(nS, s)
	sb := s.Bytes32()
	copy(high[32:64], sb[:])
	high[64] ^= 1
	wrongKey, _ := crypto.GenerateKey()
	forged, _ := crypto.Sign(func() []byte { d := HandoffDigest(testChainID, id, 1, 0, 12, x.hin); return d[:] }(), wrongKey)
	garbage := bytes.Repeat([]byte{0xff}, 65)
	for _, c := range []struct {
		name  string
		from  types.Address
		m     MsgProveHandoff
		want  error
		texts []string
	}{
		{"forged by a stranger", holder, MsgProveHandoff{id, 1, 1, 12, x.hin, forged}, types.ErrBadSignature, []string{"not by the upstream " + up.Hex()}},
		{"high S", holder, MsgProveHandoff{id, 1, 1, 12, x.hin, high}, types.ErrBadSignature, []string{"high S"}},
		{"not a signature", holder, MsgProveHandoff{id, 1, 1, 12, x.hin, garbage}, types.ErrBadSignature, []string{"non-canonical"}},
		{"another chain's link", holder, MsgProveHandoff{id, 1, 1, 12, x.hin, n.sign(up, id, 0, 0, 12, x.hin)}, types.ErrBadSignature, []string{"not by the upstream"}},
		{"another chain id", holder, MsgProveHandoff{id, 1, 1, 12, x.hin, func() []byte {
			d := HandoffDigest("another-chain", id, 1, 0, 12, x.hin)
			sig, _ := crypto.Sign(d[:], n.keys[up])
			return sig
		}()}, types.ErrBadSignature, []string{"not by the upstream"}},
		{"not its slot", n.holder(id, 1, 0), MsgProveHandoff{id, 1, 1, 12, x.hin, good}, types.ErrUnauthorized, []string{"does not hold chain 1"}},
		{"not the input it revealed", holder, MsgProveHandoff{id, 1, 1, 11, x.hin, good}, types.ErrInvalidMsg, []string{"prove the input you revealed"}},
		{"a consistent input", n.holder(id, 1, 0), MsgProveHandoff{id, 1, 0, 12, honest[1].hin, n.sign(n.holder(id, 0, 0), id, 0, 0, 12, honest[1].hin)}, types.ErrInvalidMsg, []string{"needs no proof"}},
		{"consistent stage-0 inputs", n.holder(id, 0, 0), MsgProveHandoff{id, 0, 0, 12, honest[0].hin, n.sign(n.client, id, 0, ClientStage, 12, honest[0].hin)}, types.ErrInvalidMsg, []string{"needs no proof"}},
		{"no such chain", holder, MsgProveHandoff{id, 1, 2, 12, x.hin, good}, types.ErrInvalidMsg, []string{"chains 0..1"}},
	} {
		n.refused(c.name, func(k *Keeper) error { return k.ProveHandoff(c.from, &c.m) }, c.want, c.texts...)
	}
	if _, err := DecodeMsgProveHandoff((&MsgProveHandoff{id, 1, 1, 12, x.hin, good[:64]}).Raw().Data); err == nil || !strings.Contains(err.Error(), "want 65") {
		t.Errorf("a 64-byte signature decodes: %v", err)
	}
	n.must("the upstream's signature", n.prove(id, 1, 1, x, good))
	n.refused("prove twice", n.prove(id, 1, 1, x, good), types.ErrWrongPhase, "not executing") // the scan ran: the stages moved on
	if got := eventsOf[EventHandoffEquivocation](t, n.events); len(got) != 1 || got[0].Provider != up {
		t.Fatalf("equivocation %+v, want the upstream that revealed another output", got)
	}
}

// TestSplitProofTiming: a proof is refused before every slot revealed (the
// upstream's claim is not final) and after the handoff deadline.
func TestSplitProofTiming(t *testing.T) {
	n := newSplitNet(t)
	id := n.award()
	up, holder := n.holder(id, 0, 1), n.holder(id, 1, 1)
	x := transcript{12, hashOf("signed frames"), hashOf("its output")}
	tr := bothChains(honest, [2]transcript{honest[0], x})
	for s := uint16(0); s < 2; s++ {
		for c := uint16(0); c < 2; c++ {
			a, y := n.holder(id, s, c), tr[s][c]
			n.must("commit", func(k *Keeper) error {
				return k.CommitResult(a, &verifier.MsgCommitResult{Job: id, Stage: s, Commitment: SplitCommitment(id, s, c, y.steps, y.hin, y.hout, splitSalt(a, id, s), a)})
			})
		}
	}
	n.endBlock()
	n.must("reveal", func(k *Keeper) error {
		return k.RevealTranscript(holder, &MsgRevealTranscript{Job: id, Stage: 1, Steps: 12, Hin: x.hin, Hout: x.hout, Salt: splitSalt(holder, id, 1)})
	})
	sig := n.sign(up, id, 1, 0, 12, x.hin)
	n.refused("prove before the upstream revealed", n.prove(id, 1, 1, x, sig), types.ErrWrongPhase, "once every slot has revealed")
	n.advanceTo(n.task(id, 0).RevealDeadline + 4 + 1)
	if got := n.task(id, 1).Status; got == verifier.TaskExecuting {
		t.Fatal("stage 1 still executing after the handoff deadline")
	}
	// Three slots never revealed: no-shows, and the revealed one's
	// upstream gave nothing, so its input stays unproven: unpaid, not slashed.
	if p, _ := GetProvider(n.tree, holder); p.Jailed {
		t.Error("a slot whose upstream never revealed was jailed for its unproven input")
	}
	n.refused("prove after the handoff deadline", n.prove(id, 1, 1, x, sig), types.ErrWrongPhase, "not executing")
	if j := n.job(id); j.State != JobCompleted || !j.Paid.IsZero() {
		t.Errorf("job %s paid %s, want completed, nothing paid", j.State, j.Paid.Dec())
	}
}

// TestSplitOneSlotPerAccount (P6): an account bidding the lowest price on
// both stages wins one slot only (stage 0, the first); its stage-1 bid is
// neither a winner nor a backup, and the other bidders fill stage 1.
func TestSplitOneSlotPerAccount(t *testing.T) {
	n := newSplitNet(t)
	id := n.post(n.client, splitJob())
	greedy := n.backup // advertises the whole model: eligible on both stages
	for s := uint16(0); s < 2; s++ {
		n.bid(greedy, id, s, amt("0.5ogpu"))
		for _, a := range n.stage[s] {
			n.bid(a, id, s, types.OGPU(1))
		}
	}
	n.advanceTo(n.job(id).BidEnd + 1)
	for s := uint16(0); s < 2; s++ {
		n.revealBid(greedy, id, s, amt("0.5ogpu"))
		for _, a := range n.stage[s] {
			n.revealBid(a, id, s, types.OGPU(1))
		}
	}
	n.advanceTo(n.job(id).RevealEnd + 1)
	t0, t1 := n.task(id, 0), n.task(id, 1)
	if t0.SlotOf(greedy) < 0 || t1.Assigned(greedy) || slices.Contains(t1.Backups, greedy) {
		t.Fatalf("greedy account: stage 0 slots %v, stage 1 slots %v backups %v; want it in stage 0 only", t0.Slots, t1.Slots, t1.Backups)
	}
	if !t1.Assigned(n.stage[1][0]) || !t1.Assigned(n.stage[1][1]) {
		t.Fatalf("stage 1 slots %v, want its two bidders", t1.Slots)
	}
	// Stage 0: greedy and one stage-0 bidder win; the other is the backup and sets the price.
	if j := n.job(id); !j.Prices[0].Eq(types.OGPU(1)) || !j.Prices[1].Eq(types.OGPU(1)) {
		t.Errorf("prices %s and %s, want 1 (the first backup) and 1 (no backup: the highest winning bid, not the cap)", j.Prices[0].Dec(), j.Prices[1].Dec())
	}
}

// TestSplitShortStageExpires: stage 1 has one eligible bidder for two
// chains: the whole job expires at the close and the client gets back
// everything, the bidders their deposits.
func TestSplitShortStageExpires(t *testing.T) {
	n := newSplitNet(t)
	start := n.balancesOf(n.client, n.stage[0][0], n.stage[0][1], n.stage[1][0])
	id := n.post(n.client, splitJob())
	for _, a := range n.stage[0] {
		n.bid(a, id, 0, types.OGPU(1))
	}
	n.bid(n.stage[1][0], id, 1, types.OGPU(1))
	n.refused("a provider without the slice bids", func(k *Keeper) error {
		return k.CommitBid(n.spare, &MsgCommitBid{Job: id, Stage: 1, Commitment: hashOf("bid")})
	}, types.ErrNotEligible, "advertises neither stage 1's slice")
	n.advanceTo(n.job(id).BidEnd + 1)
	for _, a := range n.stage[0] {
		n.revealBid(a, id, 0, types.OGPU(1))
	}
	n.revealBid(n.stage[1][0], id, 1, types.OGPU(1))
	n.events = nil
	n.advanceTo(n.job(id).RevealEnd + 1)
	exp := eventsOf[EventJobExpired](t, n.events)
	if len(exp) != 1 || !strings.Contains(exp[0].Reason, "stage 1 has 1 eligible winners") {
		t.Fatalf("expired %+v, want stage 1 short of winners", exp)
	}
	if _, ok := n.ver().GetTask(id, 0); ok {
		t.Error("stage 0 was awarded although stage 1 is short")
	}
	end := n.balancesOf(n.client, n.stage[0][0], n.stage[0][1], n.stage[1][0])
	for i := range start {
		if !end[i].Eq(start[i]) {
			t.Errorf("account %d: balance %s, want %s (all refunded)", i, end[i].Dec(), start[i].Dec())
		}
	}
}

// TestSplitRevealChecks: a transcript that does not open the commitment,
// a result reveal on a split job and a transcript reveal on an inference
// job are refused.
func TestSplitRevealChecks(t *testing.T) {
	n := newSplitNet(t)
	id := n.award()
	a := n.holder(id, 0, 0)
	x := honest[0]
	n.must("commit", func(k *Keeper) error {
		return k.CommitResult(a, &verifier.MsgCommitResult{Job: id, Stage: 0, Commitment: SplitCommitment(id, 0, 0, x.steps, x.hin, x.hout, splitSalt(a, id, 0), a)})
	})
	n.advanceTo(n.task(id, 0).CommitDeadline + 1)
	for _, c := range []struct {
		name string
		m    MsgRevealTranscript
	}{
		{"another input", MsgRevealTranscript{id, 0, x.steps, hashOf("other"), x.hout, splitSalt(a, id, 0)}},
		{"another output", MsgRevealTranscript{id, 0, x.steps, x.hin, hashOf("other"), splitSalt(a, id, 0)}},
		{"more frames", MsgRevealTranscript{id, 0, x.steps + 1, x.hin, x.hout, splitSalt(a, id, 0)}},
	} {
		n.refused(c.name, func(k *Keeper) error { return k.RevealTranscript(a, &c.m) }, types.ErrCommitMismatch, "is not the commitment")
	}
	n.refused("too many frames", func(k *Keeper) error {
		return k.RevealTranscript(a, &MsgRevealTranscript{id, 0, 49, x.hin, x.hout, splitSalt(a, id, 0)})
	}, types.ErrInvalidMsg, "at most 48 positions")
	n.refused("a result reveal", func(k *Keeper) error {
		return k.RevealResult(a, &verifier.MsgRevealResult{Job: id, Stage: 0, Result: x.hout, Salt: splitSalt(a, id, 0)})
	}, types.ErrInvalidMsg, "reveal-transcript")
	n.refused("an input report", func(k *Keeper) error {
		return k.ReportInput(a, &verifier.MsgReportInput{Job: id, Stage: 0, Reason: verifier.InputUnavailable})
	}, types.ErrInvalidMsg, "empty transcript")
	inf := n.post(n.client, auctionJob(2, types.OGPU(3)))
	n.refused("a transcript on an inference job", func(k *Keeper) error {
		return k.RevealTranscript(a, &MsgRevealTranscript{inf, 0, x.steps, x.hin, x.hout, splitSalt(a, inf, 0)})
	}, types.ErrInvalidMsg, "reveal-result")
	n.must("the right transcript", func(k *Keeper) error {
		return k.RevealTranscript(a, &MsgRevealTranscript{id, 0, x.steps, x.hin, x.hout, splitSalt(a, id, 0)})
	})
}

// TestSplitPostChecks: the decoder's rules for split posts.
func TestSplitPostChecks(t *testing.T) {
	for _, c := range []struct {
		name string
		mut  func(*MsgPostJob)
		want string
	}{
		{"one stage", func(m *MsgPostJob) { m.Stages, m.Slices = 1, m.Slices[:1] }, "at least 2 stages"},
		{"a slice missing", func(m *MsgPostJob) { m.Slices = m.Slices[:1] }, "2 stages, 1 slices"},
		{"a zero slice", func(m *MsgPostJob) { m.Slices[1] = types.Hash{} }, "slice 1: the hash is missing"},
		{"a repeated slice", func(m *MsgPostJob) { m.Slices[1] = m.Slices[0] }, "slices 0 and 1 are the same"},
		{"the whole model as a slice", func(m *MsgPostJob) { m.Slices[0] = m.Model }, "slice 0 is the whole model"},
		{"one replica", func(m *MsgPostJob) { m.Redundancy = 1 }, "at least 2 replicas"},
		{"slices on inference", func(m *MsgPostJob) { m.Kind, m.Stages = KindInference, 2 }, "slices apply to split jobs only"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := splitJob()
			c.mut(m)
			_, err := DecodeMsgPostJob(m.Raw().Data)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("decode: %v, want %q", err, c.want)
			}
		})
	}
	if _, err := DecodeMsgPostJob(splitJob().Raw().Data); err != nil {
		t.Fatalf("a valid split post: %v", err)
	}
}

// TestSplitChainOrder: which winner holds which chain follows the
// documented rule (sha256 of the award block's hash, job, stage and
// provider), not the bid order.
func TestSplitChainOrder(t *testing.T) {
	n := newSplitNet(t)
	id := n.award()
	closeHeight := n.job(id).RevealEnd
	hash := sha256.Sum256(be64(closeHeight)) // testNet's block hash
	for s := uint16(0); s < 2; s++ {
		key := func(a types.Address) []byte {
			h := sha256.New()
			h.Write([]byte("ogpu/split/chain/v1"))
			h.Write(hash[:])
			h.Write(be64(id))
			h.Write(be16(s))
			h.Write(a[:])
			return h.Sum(nil)
		}
		want := slices.Clone(n.stage[s][:])
		slices.SortFunc(want, func(a, b types.Address) int { return bytes.Compare(key(a), key(b)) })
		if got := []types.Address{n.holder(id, s, 0), n.holder(id, s, 1)}; !slices.Equal(got, want) {
			t.Errorf("stage %d chains %v, want %v", s, got, want)
		}
	}
}

// TestSplitPrefixProofFramesNobody: a downstream that shows an older,
// shorter signature of its upstream (a prefix of what it received) to
// frame it cannot: a signed prefix differs from the final hash by nature,
// so it proves the input only, and nobody is slashed for equivocation.
// The downstream's input (fewer frames than its upstream sent) is then
// compared with nobody: stage 1 audits the first chain's slot, and the
// prefix claimant is not compared (unpaid, not slashed).
func TestSplitPrefixProofFramesNobody(t *testing.T) {
	n := newSplitNet(t)
	id := n.award()
	up := n.holder(id, 0, 1)
	prefix := transcript{7, hashOf("running hash after 7 frames"), hashOf("output on 7 frames")}
	n.run(id, bothChains(honest, [2]transcript{honest[0], prefix}))
	n.events = nil
	n.must("prove a prefix", n.prove(id, 1, 1, prefix, n.sign(up, id, 1, 0, 7, prefix.hin)))
	if got := eventsOf[EventHandoffEquivocation](t, n.events); len(got) != 0 {
		t.Fatalf("equivocation %+v on a prefix signature, want none", got)
	}
	if got := len(eventsOf[EventSlashed](t, n.events)); got != 0 {
		t.Fatalf("%d slashes, want none", got)
	}
	got := outcomes(t, n.events)
	if !slices.Equal(got["1/1"], []string{SplitNotCompared}) || len(got["1/0"]) != 0 {
		t.Fatalf("outcomes %v, want 1/1 not_compared and 1/0 audited", got)
	}
	if tk := n.task(id, 1); tk.Status != verifier.TaskDisputed || tk.Audit != verifier.AuditSplit {
		t.Fatalf("stage 1 is %s (audit %q), want an audit", tk.Status, tk.Audit)
	}
	if c := eventsOf[EventTaskConfirming](t, n.events); len(c) != 1 || c[0].Stage != 0 {
		t.Fatalf("confirming %+v, want stage 0 agreed", c)
	}
}

// TestSplitStageZeroInputLie (P1 at stage 0): the client fed both chains
// the same prompt; chain 1's stage 0 claims another one to excuse its
// output. The stage-0 inputs differ, so each must be proven with the
// client's signature: chain 0 proves its own, chain 1 cannot (the client
// never signed its claim) and is slashed at the handoff deadline.
func TestSplitStageZeroInputLie(t *testing.T) {
	n := newSplitNet(t)
	id := n.award()
	liar := n.holder(id, 0, 1)
	claim := [2]transcript{{12, hashOf("a prompt nobody sent"), hashOf("excused output")}, {12, hashOf("excused output"), hashOf("tokens")}}
	n.run(id, bothChains(honest, claim))
	n.advanceTo(n.task(id, 0).RevealDeadline + 1)
	n.refused("a stage-0 input signed by its own provider", n.prove(id, 0, 1, claim[0], n.sign(liar, id, 1, ClientStage, 12, claim[0].hin)),
		types.ErrBadSignature, "not by the upstream "+n.client.Hex())
	n.must("chain 0 proves the client's prompt", n.prove(id, 0, 0, honest[0], n.sign(n.client, id, 0, ClientStage, 12, honest[0].hin)))
	n.events = nil
	n.advanceTo(n.task(id, 0).RevealDeadline + 4 + 1)
	got := outcomes(t, n.events)
	if !slices.Equal(got["0/1"], []string{SplitInputLie}) || len(got["0/0"]) != 0 {
		t.Fatalf("outcomes %v, want 0/1 input_lie, 0/0 audited", got)
	}
	if p, _ := GetProvider(n.tree, liar); !p.Tombstoned {
		t.Error("the stage-0 input liar is not tombstoned")
	}
	if len(eventsOf[EventClientEquivocated](t, n.events)) != 0 {
		t.Error("one signed prompt was taken for client equivocation")
	}
}
