package market

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/beacon"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// testNet is the chain in miniature for the market's tests: an in-memory
// IAVL tree and blocks executed the way chain.FinalizeBlock executes them.
// Every message runs in its own write buffer, kept only if it succeeds; the
// end of a block runs the market's EndBlock, then unbonding maturity,
// validator power updates and fee distribution; after every block the
// supply, stake, exact job-escrow and pipeline-stage invariants are
// checked.
type testNet struct {
	tb     testing.TB
	tree   *store.Tree
	params genesis.Params
	// height is the block being executed.
	height uint64
	// events are those of every successful message and block end, in order.
	events     types.Events
	validators []types.Address
}

type testAccount struct {
	addr    types.Address
	balance *uint256.Int
}

// addrOf is a stable test address for a name.
func addrOf(name string) types.Address {
	h := sha256.Sum256([]byte(name))
	return types.BytesToAddress(h[:20])
}

// testChainID is the chain id the market tests run under (hand-off
// signatures are bound to it).
const testChainID = "ogpu-market-test"

// hashOf is a stable test hash for a name.
func hashOf(name string) types.Hash { return sha256.Sum256([]byte(name)) }

// newTestNet writes a genesis: the accounts' balances, the rest of the
// supply in the bridge reserve, and one validator per name in validators
// (each an account that bonds the minimum validator stake), with its power
// reported as CometBFT would have been told at InitChain. The next block
// executed is height 1.
func newTestNet(tb testing.TB, params genesis.Params, accounts []testAccount, validators []string) *testNet {
	tb.Helper()
	if err := params.Validate(); err != nil {
		tb.Fatalf("params: %v", err)
	}
	tree := store.NewMemTree()
	esc := escrow.NewKeeper(tree)
	sum := new(uint256.Int)
	for _, a := range accounts {
		esc.SetGenesisBalance(a.addr, a.balance)
		sum.Add(sum, a.balance)
	}
	esc.SetGenesisTotals(new(uint256.Int), new(uint256.Int), new(uint256.Int).Sub(types.MaxSupply, sum))
	n := &testNet{tb: tb, tree: tree, params: params, height: 1}
	for _, name := range validators {
		op := addrOf(name)
		pub := hashOf("consensus key of " + name)
		if err := esc.CreateValidator(params.Staking, op, name, pub[:], params.Staking.MinValidatorStake); err != nil {
			tb.Fatalf("genesis validator %s: %v", name, err)
		}
		n.validators = append(n.validators, op)
	}
	if ups := esc.PowerUpdates(params.Staking); len(ups) != len(validators) {
		tb.Fatalf("genesis: %d power updates for %d validators", len(ups), len(validators))
	}
	if _, _, err := tree.SaveVersion(); err != nil {
		tb.Fatal(err)
	}
	n.checkInvariants()
	return n
}

func (n *testNet) blockHash() []byte {
	h := sha256.Sum256(be64(n.height))
	return h[:]
}

func (n *testNet) keeperOver(kv store.KV, evs *types.Events) *Keeper {
	return NewKeeper(Context{KV: kv, Height: n.height, BlockHash: n.blockHash(), Params: n.params, Events: evs, ChainID: testChainID})
}

// exec runs fn as one message of the current block: its writes and events
// are kept only if it succeeds.
func (n *testNet) exec(fn func(k *Keeper) error) error {
	c := store.NewCache(n.tree)
	var evs types.Events
	if err := fn(n.keeperOver(c, &evs)); err != nil {
		return err
	}
	c.Write()
	n.events = append(n.events, evs...)
	return nil
}

// must runs fn as a message that has to succeed.
func (n *testNet) must(what string, fn func(k *Keeper) error) {
	n.tb.Helper()
	if err := n.exec(fn); err != nil {
		n.tb.Fatalf("height %d: %s: %v", n.height, what, err)
	}
}

// refused runs fn and checks that it fails with want, that the message
// says each of texts, and that the keeper wrote nothing before refusing.
func (n *testNet) refused(what string, fn func(k *Keeper) error, want error, texts ...string) {
	n.tb.Helper()
	c := store.NewCache(n.tree)
	var evs types.Events
	err := fn(n.keeperOver(c, &evs))
	if !errors.Is(err, want) {
		n.tb.Fatalf("height %d: %s: error %v, want %v", n.height, what, err, want)
	}
	for _, s := range texts {
		if !strings.Contains(err.Error(), s) {
			n.tb.Errorf("height %d: %s: error %q does not say %q", n.height, what, err, s)
		}
	}
	if c.Len() != 0 || len(evs) != 0 {
		n.tb.Errorf("height %d: %s: refused, yet wrote %d keys and %d events", n.height, what, c.Len(), len(evs))
	}
}

// endBlock runs the end of the current block as chain.endBlock does,
// saves it, checks the invariants and moves to the next height.
func (n *testNet) endBlock() {
	n.tb.Helper()
	c := store.NewCache(n.tree)
	var evs types.Events
	// As chain's endBlock: the beacon first (no validator registers a
	// chain here, so each height's value is final a block later).
	beacon.NewKeeper(c, &evs).Finalize(n.height, func(types.Address) bool { return true })
	n.keeperOver(c, &evs).EndBlock()
	esc := escrow.NewKeeper(c)
	esc.MatureUnbondings(n.height)
	esc.PowerUpdates(n.params.Staking)
	esc.DistributeFees()
	c.Write()
	n.events = append(n.events, evs...)
	if _, _, err := n.tree.SaveVersion(); err != nil {
		n.tb.Fatal(err)
	}
	n.checkInvariants()
	n.height++
}

// advanceTo ends blocks until height h is the one being executed.
func (n *testNet) advanceTo(h uint64) {
	n.tb.Helper()
	for n.height < h {
		n.endBlock()
	}
}

func (n *testNet) checkInvariants() {
	n.tb.Helper()
	if err := escrow.SupplyInvariant(n.tree); err != nil {
		n.tb.Fatalf("after height %d: %v", n.height, err)
	}
	if err := escrow.StakeInvariant(n.tree, n.params.Staking); err != nil {
		n.tb.Fatalf("after height %d: %v", n.height, err)
	}
	if err := EscrowInvariant(n.tree); err != nil {
		n.tb.Fatalf("after height %d: %v", n.height, err)
	}
	if err := ExposureInvariant(n.tree); err != nil {
		n.tb.Fatalf("after height %d: %v", n.height, err)
	}
	if err := StageInvariant(n.tree); err != nil {
		n.tb.Fatalf("after height %d: %v", n.height, err)
	}
	if err := PruneInvariant(n.tree); err != nil {
		n.tb.Fatalf("after height %d: %v", n.height, err)
	}
}

// vote has each of vals seal a vote for result on a voting task and then
// open it: in the same block when vals are every active validator, else
// after the sealing phase.
func (n *testNet) vote(job uint64, stage uint16, result types.Hash, vals ...types.Address) {
	n.tb.Helper()
	salt := func(v types.Address) types.Hash {
		return sha256.Sum256(cat([]byte("vote salt"), v[:], be64(job), be16(stage)))
	}
	for _, v := range vals {
		n.must("seal vote", func(k *Keeper) error {
			return k.CommitVote(v, &verifier.MsgCommitVote{Job: job, Stage: stage, Commitment: verifier.VoteCommitment(job, stage, result, salt(v), v)})
		})
	}
	if len(vals) != len(n.validators) {
		n.advanceTo(n.task(job, stage).VoteCommitEnd + 1)
	}
	for _, v := range vals {
		if !n.task(job, stage).Status.Voting() {
			return
		}
		n.must("open vote", func(k *Keeper) error {
			return k.VoteDispute(v, &verifier.MsgVoteDispute{Job: job, Stage: stage, Result: result, Salt: salt(v)})
		})
	}
}

func (n *testNet) esc() escrow.Keeper                   { return escrow.NewKeeper(n.tree) }
func (n *testNet) ver() verifier.Keeper                 { return verifier.NewKeeper(n.tree) }
func (n *testNet) balance(a types.Address) *uint256.Int { return n.esc().Balance(a) }

func (n *testNet) job(id uint64) *Job {
	n.tb.Helper()
	j, ok := GetJob(n.tree, id)
	if !ok {
		n.tb.Fatalf("job %d does not exist", id)
	}
	return j
}

func (n *testNet) task(id uint64, stage uint16) *verifier.Task {
	n.tb.Helper()
	t, ok := n.ver().GetTask(id, stage)
	if !ok {
		n.tb.Fatalf("job %d stage %d has no task", id, stage)
	}
	return t
}

// register registers addr as a provider with info and bonds stake.
func (n *testNet) register(addr types.Address, stake *uint256.Int, info ProviderInfo) {
	n.tb.Helper()
	if err := info.Validate(); err != nil {
		n.tb.Fatalf("provider info: %v", err)
	}
	n.must("register "+addr.Hex(), func(k *Keeper) error {
		if err := k.RegisterProvider(addr, &info, false); err != nil {
			return err
		}
		return escrow.NewKeeper(k.kv).Bond(addr, stake)
	})
}

// post posts m from client after a round trip through its wire encoding
// (so that every test job passes the decoder's checks) and returns its id.
func (n *testNet) post(client types.Address, m *MsgPostJob) uint64 {
	n.tb.Helper()
	dm, err := DecodeMsgPostJob(m.Raw().Data)
	if err != nil {
		n.tb.Fatalf("post-job does not decode: %v", err)
	}
	var id uint64
	n.must("post job", func(k *Keeper) error {
		var err error
		id, err = k.PostJob(client, dm)
		return err
	})
	return id
}

// bid commits a sealed bid at price with a salt derived from the names.
func (n *testNet) bid(p types.Address, job uint64, stage uint16, price *uint256.Int) {
	n.tb.Helper()
	c := BidCommitment(job, stage, price, bidSalt(p, job, stage), p)
	n.must("commit bid", func(k *Keeper) error { return k.CommitBid(p, &MsgCommitBid{Job: job, Stage: stage, Commitment: c}) })
}

func (n *testNet) revealBid(p types.Address, job uint64, stage uint16, price *uint256.Int) {
	n.tb.Helper()
	n.must("reveal bid", func(k *Keeper) error {
		return k.RevealBid(p, &MsgRevealBid{Job: job, Stage: stage, Price: price, Salt: bidSalt(p, job, stage)})
	})
}

func bidSalt(p types.Address, job uint64, stage uint16) types.Hash {
	return sha256.Sum256(cat([]byte("bid salt"), p[:], be64(job), be16(stage)))
}

// auctionJob is a one-stage inference auction with short windows: bids
// for 2 blocks, reveals for 2, 3 blocks to commit a result, 3 to reveal.
func auctionJob(r uint16, maxPrice *uint256.Int) *MsgPostJob {
	return &MsgPostJob{
		Kind: KindInference, Mode: ModeAuction, Model: hashOf("model"), ModelSize: 1 << 20,
		Stages: 1, Redundancy: r, MaxPrice: maxPrice,
		Req:     Requirements{MinStake: new(uint256.Int)},
		Input:   hashOf("input"),
		Windows: Windows{Bid: 2, Reveal: 2, Execute: 3, Verify: 3},
		Seal:    hashOf("a client's random seal"),
	}
}

func gpuInfo(name string) ProviderInfo {
	return ProviderInfo{
		PeerID:     "12D3Koo" + name,
		Attributes: []string{"gpu/vendor/nvidia/model/h100/ram/80Gi", "ram/64Gi", "cpu/cores/16"},
		Runtimes:   []string{"llama.cpp"},
		Class:      "llama.cpp-b1/cuda/t8",
	}
}

// oGPU amounts with decimals, for readable tests.
func amt(s string) *uint256.Int {
	a, err := types.ParseAmount(s)
	if err != nil {
		panic(err)
	}
	return a
}

var (
	client = addrOf("client")
	prov1  = addrOf("prov1")
	prov2  = addrOf("prov2")
	prov3  = addrOf("prov3")
	prov4  = addrOf("prov4")
	loner  = addrOf("loner") // funded, never registered
)

// marketNet is a net with a client, four registered providers (100 oGPU
// bonded each) and one validator, "val", at height 2.
func marketNet(t *testing.T, params genesis.Params) *testNet {
	t.Helper()
	var accts []testAccount
	for _, a := range []types.Address{client, prov1, prov2, prov3, prov4, loner} {
		accts = append(accts, testAccount{a, types.OGPU(1_000)})
	}
	accts = append(accts, testAccount{addrOf("val"), types.OGPU(2_000)})
	n := newTestNet(t, params, accts, []string{"val"})
	for i, p := range []types.Address{prov1, prov2, prov3, prov4} {
		n.register(p, types.OGPU(100), gpuInfo(string(rune('a'+i))))
	}
	n.endBlock()
	return n
}

func TestBidWindows(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	id := n.post(client, auctionJob(2, types.OGPU(3))) // at 2: bids 2..4, reveals 5..6, close at the end of 6
	j := n.job(id)
	if j.BidEnd != 4 || j.RevealEnd != 6 || j.Expiry != 118 {
		t.Fatalf("windows: bid end %d, reveal end %d, expiry %d; want 4, 6, 118 (with one input check's 100 blocks)", j.BidEnd, j.RevealEnd, j.Expiry)
	}
	n.bid(prov1, id, 0, types.OGPU(1)) // in the posting block
	n.advanceTo(4)
	n.bid(prov2, id, 0, types.OGPU(2)) // the last bid height
	n.refused("reveal in the bid window", func(k *Keeper) error {
		return k.RevealBid(prov1, &MsgRevealBid{Job: id, Stage: 0, Price: types.OGPU(1), Salt: bidSalt(prov1, id, 0)})
	}, types.ErrWrongPhase, "takes reveals at heights 5..6 (now 4)")
	n.refused("bid on a stage the job does not have", func(k *Keeper) error {
		return k.CommitBid(prov3, &MsgCommitBid{Job: id, Stage: 1, Commitment: hashOf("x")})
	}, types.ErrInvalidMsg, "stages 0..0, not 1")
	n.refused("bid on a job that does not exist", func(k *Keeper) error {
		return k.CommitBid(prov3, &MsgCommitBid{Job: id + 1, Stage: 0, Commitment: hashOf("x")})
	}, types.ErrUnknownJob)
	n.advanceTo(5)
	if s := n.job(id).State; s != JobRevealing {
		t.Fatalf("at 5 the job is %s, want revealing", s)
	}
	n.refused("bid after the bid window", func(k *Keeper) error {
		return k.CommitBid(prov3, &MsgCommitBid{Job: id, Stage: 0, Commitment: BidCommitment(id, 0, types.OGPU(1), bidSalt(prov3, id, 0), prov3)})
	}, types.ErrWrongPhase, "bid window ended at height 4 (now 5, revealing)")
	n.revealBid(prov1, id, 0, types.OGPU(1))
	n.advanceTo(6)
	n.revealBid(prov2, id, 0, types.OGPU(2)) // the last reveal height
	n.endBlock()                             // the close
	if s := n.job(id).State; s != JobRunning {
		t.Fatalf("after the close the job is %s, want running", s)
	}
	n.refused("reveal after the close", func(k *Keeper) error {
		return k.RevealBid(prov2, &MsgRevealBid{Job: id, Stage: 0, Price: types.OGPU(2), Salt: bidSalt(prov2, id, 0)})
	}, types.ErrWrongPhase, "takes reveals at heights 5..6 (now 7)")
	n.refused("bid after the close", func(k *Keeper) error {
		return k.CommitBid(prov3, &MsgCommitBid{Job: id, Stage: 0, Commitment: hashOf("x")})
	}, types.ErrWrongPhase, "running")
}

func TestDuplicateBid(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	id := n.post(client, auctionJob(2, types.OGPU(3)))
	n.bid(prov1, id, 0, types.OGPU(1))
	before := n.balance(prov1)
	n.refused("second bid on the same stage", func(k *Keeper) error {
		return k.CommitBid(prov1, &MsgCommitBid{Job: id, Stage: 0, Commitment: BidCommitment(id, 0, types.OGPU(2), hashOf("s"), prov1)})
	}, types.ErrDuplicate, "already bid on job 1 stage 0")
	if got := n.balance(prov1); !got.Eq(before) {
		t.Errorf("a refused bid moved the deposit: balance %s, want %s", got.Dec(), before.Dec())
	}
	if got := n.job(id).Bids[0]; got != 1 {
		t.Errorf("bid count %d, want 1", got)
	}
	n.advanceTo(5)
	n.revealBid(prov1, id, 0, types.OGPU(1))
	n.refused("second reveal", func(k *Keeper) error {
		return k.RevealBid(prov1, &MsgRevealBid{Job: id, Stage: 0, Price: types.OGPU(1), Salt: bidSalt(prov1, id, 0)})
	}, types.ErrDuplicate, "already revealed")
}

func TestIneligibleBidders(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	// prov2 is a provider with too little stake; prov3 has a lower
	// reputation than the job needs; prov4 is jailed.
	n.must("unbond prov2", func(k *Keeper) error {
		return escrow.NewKeeper(k.kv).Unbond(prov2, types.OGPU(40), 1_000)
	})
	n.must("jail prov4", func(k *Keeper) error { k.jailProvider(prov4, 500, false, "test"); return nil })
	n.must("reputation", func(k *Keeper) error {
		k.ver.UpdateReputation(prov1, func(r *verifier.Reputation) { r.Done, r.Agreed = 8, 8 }) // 900
		k.ver.UpdateReputation(prov3, func(r *verifier.Reputation) { r.Done, r.Agreed = 2, 1 })
		return nil
	})
	m := auctionJob(2, types.OGPU(3))
	m.Req = Requirements{
		MinStake: types.OGPU(50), MinReputation: 600,
		Attributes: []string{"gpu/vendor/nvidia", "ram>=32Gi"}, Runtime: "llama.cpp", Class: "llama.cpp-b1/cuda/t8",
	}
	id := n.post(client, m)
	bid := func(p types.Address) func(k *Keeper) error {
		return func(k *Keeper) error {
			return k.CommitBid(p, &MsgCommitBid{Job: id, Stage: 0, Commitment: BidCommitment(id, 0, types.OGPU(1), bidSalt(p, id, 0), p)})
		}
	}
	n.bid(prov1, id, 0, types.OGPU(1)) // meets every requirement
	cases := []struct {
		name string
		who  types.Address
		info *ProviderInfo // re-published before bidding, if set
		text string
	}{
		{name: "unregistered", who: loner, text: loner.Hex() + " is not a registered provider: ogpu tx provider register"},
		{name: "the client itself", who: client, text: "is not a registered provider"},
		{name: "stake below the provider minimum", who: prov2, text: "has 60ogpu bonded, job 1 needs 100ogpu: ogpu tx provider bond"},
		{name: "reputation", who: prov3, text: "has reputation 500, job 1 needs 600"},
		{name: "jailed", who: prov4, text: "is jailed (until height 500, then ogpu tx provider unjail)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n.tb = t
			n.refused("bid", bid(tc.who), types.ErrNotEligible, tc.text)
		})
	}
	// Requirements on the record: a provider that stops meeting one is
	// refused with the requirement it misses.
	n.tb = t
	n.must("client registers", func(k *Keeper) error { info := gpuInfo("c"); return k.RegisterProvider(client, &info, false) })
	n.must("client bonds", func(k *Keeper) error { return escrow.NewKeeper(k.kv).Bond(client, types.OGPU(100)) })
	n.refused("the client's own job", bid(client), types.ErrNotEligible, "posted job 1 and cannot work on it")
	records := []struct {
		name string
		edit func(*ProviderInfo)
		text string
	}{
		{"no nvidia gpu", func(p *ProviderInfo) { p.Attributes = []string{"gpu/vendor/amd/model/mi300", "ram/64Gi"} }, `has no attribute matching "gpu/vendor/nvidia"`},
		{"too little ram", func(p *ProviderInfo) { p.Attributes = []string{"gpu/vendor/nvidia", "ram/16Gi"} }, `has no attribute matching "ram>=32Gi"`},
		{"runtime", func(p *ProviderInfo) { p.Runtimes = []string{"ckks"} }, `does not offer runtime "llama.cpp"`},
		{"class", func(p *ProviderInfo) { p.Class = "llama.cpp-b2/cpu" }, `is in determinism class "llama.cpp-b2/cpu", job 1 needs "llama.cpp-b1/cuda/t8"`},
	}
	for _, tc := range records {
		t.Run(tc.name, func(t *testing.T) {
			n.tb = t
			info := gpuInfo("a")
			tc.edit(&info)
			n.must("update", func(k *Keeper) error { return k.RegisterProvider(prov1, &info, true) })
			n.refused("eligibility", func(k *Keeper) error {
				return Eligible(k.kv, n.params, n.height, n.job(id), prov1)
			}, types.ErrNotEligible, tc.text)
			restore := gpuInfo("a")
			n.must("restore", func(k *Keeper) error { return k.RegisterProvider(prov1, &restore, true) })
		})
	}
	n.tb = t
	if err := Eligible(n.tree, n.params, n.height, n.job(id), prov1); err != nil {
		t.Fatalf("prov1 restored is not eligible: %v", err)
	}
	if got := n.job(id).Bids[0]; got != 1 {
		t.Errorf("%d bids recorded, want only prov1's", got)
	}
}

func TestRevealMismatchAndCap(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	id := n.post(client, auctionJob(2, types.OGPU(3)))
	n.bid(prov1, id, 0, types.OGPU(1))
	n.bid(prov2, id, 0, amt("3.000000000000000001ogpu")) // one base unit above the cap
	n.advanceTo(5)
	reveal := func(p types.Address, price *uint256.Int, salt types.Hash) func(k *Keeper) error {
		return func(k *Keeper) error {
			return k.RevealBid(p, &MsgRevealBid{Job: id, Stage: 0, Price: price, Salt: salt})
		}
	}
	n.refused("another price", reveal(prov1, types.OGPU(2), bidSalt(prov1, id, 0)), types.ErrCommitMismatch, "is not the sealed bid")
	n.refused("another salt", reveal(prov1, types.OGPU(1), hashOf("other")), types.ErrCommitMismatch)
	// prov3 never bid; knowing prov1's price and salt does not help it.
	n.refused("someone else's opening", reveal(prov3, types.OGPU(1), bidSalt(prov1, id, 0)), types.ErrUnknownJob, "has no sealed bid on job 1 stage 0")
	n.refused("above the cap", reveal(prov2, amt("3.000000000000000001ogpu"), bidSalt(prov2, id, 0)), types.ErrInvalidMsg, "is above job 1's cap of 3ogpu")
	n.revealBid(prov1, id, 0, types.OGPU(1))
	if b, _ := GetBid(n.tree, id, 0, prov1); !b.Revealed || !b.Price.Eq(types.OGPU(1)) {
		t.Fatalf("prov1's bid after its reveal: %+v", b)
	}
	// At the close prov2's bid is unrevealed: its deposit is burned; prov1
	// is the only winner and, with no (r+1)-th bid, is paid its own bid
	// (the highest winning bid, not the cap: M-M2).
	burned := n.esc().Burned()
	p2 := n.balance(prov2)
	n.advanceTo(7)
	if got := new(uint256.Int).Sub(n.esc().Burned(), burned); !got.Eq(n.params.Market.BidDeposit) {
		t.Errorf("burned %s at the close, want the deposit %s", got.Dec(), n.params.Market.BidDeposit.Dec())
	}
	if got := n.balance(prov2); !got.Eq(p2) {
		t.Errorf("prov2's balance moved from %s to %s: its deposit must not come back", p2.Dec(), got.Dec())
	}
	if j := n.job(id); !j.Prices[0].Eq(types.OGPU(1)) {
		t.Errorf("clearing price %s, want prov1's bid, 1 oGPU", j.Prices[0].Dec())
	}
	if tk := n.task(id, 0); len(tk.Slots) != 1 || tk.Slots[0].Provider != prov1 {
		t.Errorf("slots %+v, want prov1 alone", tk.Slots)
	}
}

func TestCancelJob(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	start := n.balance(client)
	id := n.post(client, auctionJob(2, types.OGPU(3)))
	n.bid(prov1, id, 0, types.OGPU(1))
	n.advanceTo(5)
	n.revealBid(prov1, id, 0, types.OGPU(1))
	n.refused("cancel by a provider", func(k *Keeper) error { return k.CancelJob(prov1, id) }, types.ErrUnauthorized, "job 1 belongs to "+client.Hex())
	n.refused("cancel by anyone", func(k *Keeper) error { return k.CancelJob(loner, id) }, types.ErrUnauthorized)
	n.refused("cancel a job that does not exist", func(k *Keeper) error { return k.CancelJob(client, 99) }, types.ErrUnknownJob)
	p1 := n.balance(prov1)
	n.must("cancel", func(k *Keeper) error { return k.CancelJob(client, id) })
	if got := n.balance(client); !got.Eq(start) {
		t.Errorf("client balance after cancel %s, want all of %s back", got.Dec(), start.Dec())
	}
	if got, want := n.balance(prov1), new(uint256.Int).Add(p1, n.params.Market.BidDeposit); !got.Eq(want) {
		t.Errorf("bidder balance after cancel %s, want %s (deposit back)", got.Dec(), want.Dec())
	}
	if j := n.job(id); j.State != JobCancelled || !n.esc().Locked(id).IsZero() {
		t.Errorf("job is %s holding %s, want cancelled holding nothing", j.State, n.esc().Locked(id).Dec())
	}
	n.refused("cancel twice", func(k *Keeper) error { return k.CancelJob(client, id) }, types.ErrWrongPhase, "only a job not yet awarded")
	n.advanceTo(8) // the close would have run at the end of 6: nothing happens
	if j := n.job(id); j.State != JobCancelled {
		t.Errorf("a cancelled job became %s", j.State)
	}

	// After the award it is too late.
	id2 := n.post(client, auctionJob(2, types.OGPU(3)))
	n.bid(prov1, id2, 0, types.OGPU(1))
	n.advanceTo(n.job(id2).BidEnd + 1)
	n.revealBid(prov1, id2, 0, types.OGPU(1))
	n.advanceTo(n.job(id2).RevealEnd + 1)
	n.refused("cancel a running job", func(k *Keeper) error { return k.CancelJob(client, id2) }, types.ErrWrongPhase, "job 2 is running")
}

// TestUniformPrice runs one auction to the end: the two lowest of four
// bids win, both are paid the third-lowest price, the validator fee goes
// to the pool and the client gets the rest back.
func TestUniformPrice(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	start := n.balance(client)
	id := n.post(client, auctionJob(2, types.OGPU(5)))
	prices := []*uint256.Int{types.OGPU(2), types.OGPU(1), types.OGPU(4), types.OGPU(3)}
	provs := []types.Address{prov1, prov2, prov3, prov4}
	bal := make([]*uint256.Int, 4)
	for i, p := range provs {
		bal[i] = n.balance(p)
		n.bid(p, id, 0, prices[i])
	}
	n.advanceTo(5)
	for i, p := range provs {
		n.revealBid(p, id, 0, prices[i])
	}
	n.advanceTo(7)
	tk := n.task(id, 0)
	if len(tk.Slots) != 2 || tk.Slots[0].Provider != prov2 || tk.Slots[1].Provider != prov1 {
		t.Fatalf("winners %v, want prov2 (1) then prov1 (2)", tk.Slots)
	}
	if len(tk.Backups) != 2 || tk.Backups[0] != prov4 || tk.Backups[1] != prov3 {
		t.Fatalf("backups %v, want prov4 (3) then prov3 (4)", tk.Backups)
	}
	result, salt := hashOf("result"), hashOf("salt")
	for _, p := range []types.Address{prov1, prov2} {
		n.must("commit", func(k *Keeper) error {
			return k.CommitResult(p, &verifier.MsgCommitResult{Job: id, Stage: 0, Commitment: verifier.ResultCommitment(result, salt, p)})
		})
	}
	for _, p := range []types.Address{prov1, prov2} {
		n.must("reveal", func(k *Keeper) error {
			return k.RevealResult(p, &verifier.MsgRevealResult{Job: id, Stage: 0, Result: result, Salt: salt})
		})
	}
	if tk := n.task(id, 0); tk.Status != verifier.TaskConfirming || tk.ConfirmBy != n.height+n.params.Market.CanaryBlocks {
		t.Fatalf("task %s until %d after the last reveal, want confirming for canary_blocks", tk.Status, tk.ConfirmBy)
	}
	n.advanceTo(n.task(id, 0).ConfirmBy + 1)
	j := n.job(id)
	if j.State != JobCompleted {
		t.Fatalf("job %s after its canary window, want completed", j.State)
	}
	for i, p := range provs {
		want := bal[i].Clone()
		if i < 2 {
			want.Add(want, types.OGPU(3))
		}
		if got := n.balance(p); !got.Eq(want) {
			t.Errorf("provider %d balance %s, want %s", i+1, got.Dec(), want.Dec())
		}
	}
	fee := escrow.MulBps(types.OGPU(10), n.params.Market.ValidatorFeeBps) // 2 × 5 oGPU locked per stage
	want := new(uint256.Int).Sub(start, types.OGPU(6))
	want.Sub(want, fee)
	if got := n.balance(client); !got.Eq(want) {
		t.Errorf("client balance %s, want %s (start - 2 × 3 - fee)", got.Dec(), want.Dec())
	}
}

// TestMaxTokens: an inference job's token budget travels through the wire
// encoding into the job record; a job without one encodes exactly as before
// the field existed (old transactions and state hashes are unchanged).
func TestMaxTokens(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	m := auctionJob(2, types.OGPU(3))
	before := m.Raw().Data
	m.MaxTokens = 0
	if !bytes.Equal(before, m.Raw().Data) {
		t.Fatal("a zero MaxTokens changed the encoding")
	}
	m.MaxTokens = 64
	if bytes.Equal(before, m.Raw().Data) {
		t.Fatal("MaxTokens is not encoded")
	}
	id := n.post(client, m)
	if got := n.job(id).MaxTokens; got != 64 {
		t.Fatalf("job max tokens = %d, want 64", got)
	}
	for _, c := range []struct {
		mut  func(*MsgPostJob)
		want string
	}{
		{func(m *MsgPostJob) { m.MaxTokens = MaxJobTokens + 1 }, "max tokens 1048577: at most 1048576"},
		{func(m *MsgPostJob) { m.Kind = KindPipeline }, "max tokens applies to inference and split jobs only"},
	} {
		bad := auctionJob(2, types.OGPU(3))
		bad.MaxTokens = 64
		c.mut(bad)
		_, err := DecodeMsgPostJob(bad.Raw().Data)
		if !errors.Is(err, types.ErrInvalidMsg) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("decode: %v, want ErrInvalidMsg %q", err, c.want)
		}
	}
}

// TestC2DeadlineWorkIsBounded: many jobs closing at one height (the
// review's C2 attack: bidless jobs of many stages, cheap to post; an
// auction without a sealed bid closes at the end of its bid window) cannot
// make one block do unbounded work: each block runs at most
// max_deadline_work units of deadlines (one job's stages + 1 each), the
// rest carries over oldest first, and every job still closes and refunds.
func TestC2DeadlineWorkIsBounded(t *testing.T) {
	params := genesis.DefaultParams()
	params.Market.MaxDeadlineWork = 200 // four 40-stage jobs (41 units each) per block
	n := marketNet(t, params)
	var ids []uint64
	for range 10 {
		m := auctionJob(2, uint256.NewInt(1))
		m.Stages = 40
		ids = append(ids, n.post(client, m))
	}
	close := n.job(ids[0]).BidEnd
	n.advanceTo(close)
	closedBy := map[uint64]uint64{}
	for h := close; len(closedBy) < len(ids); h++ {
		if h > close+10 {
			t.Fatalf("after %d blocks only %d of %d jobs closed", h-close, len(closedBy), len(ids))
		}
		n.events = nil
		n.endBlock()
		work := uint64(0)
		for _, id := range ids {
			if _, done := closedBy[id]; !done && !n.job(id).State.Open() {
				closedBy[id] = h
				work += 41
			}
		}
		if work > params.Market.MaxDeadlineWork {
			t.Fatalf("block %d closed %d units of jobs, the bound is %d", h, work, params.Market.MaxDeadlineWork)
		}
		if deferred := eventsOf[EventDeadlinesDeferred](t, n.events); h < close+2 && len(deferred) != 1 {
			t.Fatalf("block %d: deferred events %+v, want one", h, deferred)
		}
	}
	// Four per block, in posting (key) order: 4, 4, 2.
	for i, id := range ids {
		if want := close + uint64(i/4); closedBy[id] != want {
			t.Errorf("job %d closed at %d, want %d", id, closedBy[id], want)
		}
		if j := n.job(id); j.State != JobExpired || !n.esc().Locked(id).IsZero() {
			t.Errorf("job %d is %s holding %s, want expired and refunded", id, j.State, n.esc().Locked(id).Dec())
		}
	}
}
