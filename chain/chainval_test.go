package chain

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	cmttypes "github.com/cometbft/cometbft/api/cometbft/types/v1"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// Regression tests of security review 1's findings on validators and
// staking (M1, L2, L3). The scenario scripts perform the attack through the
// real App; every expectation in them is checked, and TestScenarios holds
// their whole output to the golden.

// TestM1ValidatorSlotsFreed: two squatters create validators in a set of
// three and unbond at once. Their slots free at once, they lose validator
// privileges, and their records are removed after unbonding_blocks.
func TestM1ValidatorSlotsFreed(t *testing.T) {
	out, _ := runScenario(t, "testdata/scenarios/m1_validator_slots.txt")
	for _, want := range []string{"h4 honest: ok", "validator_removed operator=m1"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output has no %q:\n%s", want, out)
		}
	}
}

// TestL2SameBlockUnbondsKeepTheSet: two validators unbonding in one block
// cannot empty the set; a block in which no validator would have power
// keeps CometBFT's last set.
func TestL2SameBlockUnbondsKeepTheSet(t *testing.T) {
	out, _ := runScenario(t, "testdata/scenarios/l2_empty_set.txt")
	if !strings.Contains(out, "h4 b: code 29") {
		t.Errorf("b's unbond was not refused:\n%s", out)
	}
}

// TestL2UnbondWhileOtherJailedInBeginBlock: b double-signs and is jailed in
// the beginBlock of the block in which a unbonds everything. CheckTx (which
// cannot know the evidence) admits a's unbond; the block refuses it, since
// b has no power any more, and the block reports no empty set.
func TestL2UnbondWhileOtherJailedInBeginBlock(t *testing.T) {
	doc := genesis.Default()
	for _, n := range []string{"a", "b"} {
		if err := doc.AddAccount(addrOf(n), types.OGPU(10)); err != nil {
			t.Fatal(err)
		}
	}
	doc.Validators = []genesis.Validator{
		{Name: "a", Operator: addrOf("a"), PubKey: scenarioValKey("a"), Stake: types.OGPU(6_000)},
		{Name: "b", Operator: addrOf("b"), PubKey: scenarioValKey("b"), Stake: types.OGPU(4_000)},
	}
	h := newHarness(t, store.NewMemTree(), doc)
	h.block()
	unbond := h.tx("a", (&escrow.MsgUnbond{Amount: types.OGPU(6_000)}).Raw())
	if res := h.checkTx(unbond); res.Code != 0 {
		t.Fatalf("CheckTx: %s", res.Log)
	}
	bAddr := consAddress(scenarioValKey("b"))
	aAddr := consAddress(scenarioValKey("a"))
	h.height++
	res, err := h.app.FinalizeBlock(context.Background(), &abci.FinalizeBlockRequest{
		Height: h.height, Txs: [][]byte{unbond}, Time: time.Unix(0, 0),
		DecidedLastCommit: abci.CommitInfo{Votes: []abci.VoteInfo{
			{Validator: abci.Validator{Address: aAddr[:], Power: 6_000}, BlockIdFlag: cmttypes.BlockIDFlagCommit},
			{Validator: abci.Validator{Address: bAddr[:], Power: 4_000}, BlockIdFlag: cmttypes.BlockIDFlagCommit},
		}},
		Misbehavior: []abci.Misbehavior{{Type: abci.MISBEHAVIOR_TYPE_DUPLICATE_VOTE, Validator: abci.Validator{Address: bAddr[:]},
			Height: h.height - 1, Time: time.Unix(0, 0), TotalVotingPower: 10_000}},
	})
	if err != nil {
		t.Fatalf("FinalizeBlock: %v", err)
	}
	if _, err := h.app.Commit(context.Background(), &abci.CommitRequest{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("a's unbond: code %d %s; validator updates: %d", res.TxResults[0].Code, res.TxResults[0].Log, len(res.ValidatorUpdates))
	if res.TxResults[0].Code != types.CodeOf(types.ErrInsufficientStake) {
		t.Errorf("a's unbond in the block that jails b: code %d (%s), want it refused as the last validator", res.TxResults[0].Code, res.TxResults[0].Log)
	}
	snap, _ := h.tree.Snapshot(0)
	k := escrow.NewKeeper(snap)
	var reported int64
	k.IterateValidators(func(_ types.Address, v *escrow.Validator) bool { reported += k.ReportedPower(v.PubKey); return false })
	if reported == 0 {
		t.Errorf("the block left CometBFT with an empty validator set (updates %v)", res.ValidatorUpdates)
	}
}

// TestL3EvidenceLateStillSlashes: a double-signer unbonds everything after
// the infraction; the evidence lands 26 blocks later and still slashes the
// stake that backed the infraction height, and only that stake.
func TestL3EvidenceLateStillSlashes(t *testing.T) {
	out, _ := runScenario(t, "testdata/scenarios/l3_evidence_late.txt")
	if !strings.Contains(out, `reason="double signing" slashed=150ogpu`) {
		t.Errorf("the late evidence did not slash 150ogpu:\n%s", out)
	}
}

// TestL3EvidenceAgeBelowUnbonding: InitChain refuses consensus params under
// which evidence outlives the unbonding period (CometBFT's default evidence
// age, 100,000 blocks, against 1,200 blocks of unbonding), and accepts an
// evidence age below it.
func TestL3EvidenceAgeBelowUnbonding(t *testing.T) {
	doc := testGenesis()
	bz, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	init := func(maxAge int64) error {
		app := NewApp(store.NewMemTree())
		_, err := app.InitChain(context.Background(), &abci.InitChainRequest{ChainId: testChainID, AppStateBytes: bz, InitialHeight: 1,
			ConsensusParams: &cmttypes.ConsensusParams{Evidence: &cmttypes.EvidenceParams{MaxAgeNumBlocks: maxAge, MaxAgeDuration: time.Second}}})
		return err
	}
	err = init(100_000)
	t.Logf("evidence age 100000, unbonding %d: %v", doc.Params.Staking.UnbondingBlocks, err)
	if err == nil || !strings.Contains(err.Error(), "max_age_num_blocks = 100000") {
		t.Errorf("evidence age 100000 against unbonding %d: %v, want a refusal", doc.Params.Staking.UnbondingBlocks, err)
	}
	if err := init(int64(doc.Params.Staking.UnbondingBlocks)); err == nil {
		t.Errorf("an evidence age equal to unbonding_blocks was accepted")
	}
	if err := init(genesis.DefaultEvidenceMaxAgeBlocks); err != nil {
		t.Errorf("the default evidence age: %v", err)
	}
}

// TestL1RevealThenDodgeForfeits: bob reveals the lowest bid, then unbonds 1
// base unit below the minimum in the close block. He is dropped from the
// auction and his deposit is burned, not refunded.
func TestL1RevealThenDodgeForfeits(t *testing.T) {
	out, _ := runScenario(t, "testdata/scenarios/l1_dodge.txt")
	if !strings.Contains(out, "bid_forfeited job=1 stage=0 provider=bob deposit=1ogpu") {
		t.Errorf("bob's deposit was not forfeited:\n%s", out)
	}
}

// signTxFee is signTx with a chosen fee.
func signTxFee(t testing.TB, name string, nonce uint64, fee *uint256.Int, msgs ...types.RawMsg) []byte {
	t.Helper()
	tx := &types.Tx{Body: types.TxBody{ChainID: testChainID, Nonce: nonce, Fee: fee, Msgs: msgs}}
	if err := tx.Sign(testKey(name)); err != nil {
		t.Fatal(err)
	}
	bz, err := tx.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return bz
}

func worstCaseJob(stages, r uint16) *market.MsgPostJob {
	reqs := make([]string, market.MaxAttributes)
	for i := range reqs {
		reqs[i] = fmt.Sprintf("gpu/vendor/nvidia/model/m%d/ram>=%dGi", i, i+1)
	}
	return &market.MsgPostJob{Kind: market.KindInference, Mode: market.ModeAuction, Stages: stages, Redundancy: r, Seal: types.Hash{1},
		MaxPrice: uint256.NewInt(10_000_000_000_000_000), Req: market.Requirements{MinStake: new(uint256.Int), Attributes: reqs},
		Model: types.Hash{1}, ModelSize: 1000, Input: types.Hash{2}, Windows: market.Windows{Bid: 5, Reveal: 2, Execute: 3, Verify: 3}}
}

// TestM2RefusedBidDoesNoMatching: a commit-bid whose sender cannot pay the
// deposit is refused in CheckTx before the 64 × 64 attribute matching
// runs; and a job's gas grows with its stages × redundancy, so a 64-stage,
// 16-replica job pays for its close and a fee sized for a 1 × 2 job is
// refused.
func TestM2RefusedBidDoesNoMatching(t *testing.T) {
	doc := testGenesis()
	h := newHarness(t, store.NewMemTree(), doc)
	attrs := make([]string, market.MaxAttributes)
	for i := range attrs {
		attrs[i] = fmt.Sprintf("gpu/vendor/nvidia/model/x%d/ram/%dGi", i, i)
	}
	h.block(h.tx("bob", (&market.MsgRegisterProvider{Info: market.ProviderInfo{PeerID: "peer-bob", Attributes: attrs}}).Raw()),
		h.tx("bob", (&escrow.MsgBond{Amount: types.OGPU(100)}).Raw()))
	// bob keeps 1.5 oGPU: the 1 oGPU fee, then 0.5 for a 1 oGPU deposit.
	h.block(h.tx("bob", send("carol", uint256.MustFromDecimal("895500000000000000000"))))
	h.block(h.tx("alice", worstCaseJob(1, 2).Raw()))
	if res := h.block(); len(res) != 0 {
		t.Fatal(res)
	}
	before := market.MatchAllRuns()
	bid := h.tx("bob", (&market.MsgCommitBid{Job: 1, Stage: 0, Commitment: types.Hash{3}}).Raw())
	res := h.checkTx(bid)
	runs := market.MatchAllRuns() - before
	t.Logf("refused commit-bid: code %d (%s); MatchAll runs: %d", res.Code, res.Log, runs)
	if res.Code != types.CodeOf(types.ErrInsufficientFunds) {
		t.Errorf("the bid: code %d (%s), want it refused for the deposit", res.Code, res.Log)
	}
	if runs != 0 {
		t.Errorf("a bid refused for its deposit ran MatchAll %d times", runs)
	}

	small, large := worstCaseJob(1, 2).Raw(), worstCaseJob(64, 16).Raw()
	p := doc.Params
	feeSmall := p.RequiredFee(len(signTxFee(t, "alice", 1, new(uint256.Int).SetAllOne(), small))+65, MsgWorks([]types.RawMsg{small}))
	gasSmall := h.checkTx(signTxFee(t, "alice", 1, feeSmall, small)).GasWanted
	if res := h.checkTx(signTxFee(t, "alice", 2, feeSmall, large)); res.Code != types.CodeOf(types.ErrFeeTooLow) {
		t.Errorf("a 64 x 16 job paying a 1 x 2 job's fee: code %d (%s), want fee too low", res.Code, res.Log)
	} else {
		t.Logf("a 64 x 16 job paying a 1 x 2 job's fee: %s", res.Log)
	}
	resLarge := h.checkTx(signTxFee(t, "alice", 2, types.OGPU(1), large))
	gasLarge := resLarge.GasWanted
	t.Logf("post-job gas: 1 stage x 2 = %d, 64 stages x 16 = %d (code %d %s)", gasSmall, gasLarge, resLarge.Code, resLarge.Log)
	if resLarge.Code != 0 || gasSmall == 0 || gasLarge-gasSmall < int64(1022*p.WorkGas.SlotGas+63*p.WorkGas.StageGas) {
		t.Errorf("a 64 x 16 job uses %d gas, a 1 x 2 one %d: not proportional to the close's work", gasLarge, gasSmall)
	}
}

// TestM3ReputationFarming: two sybils agree on junk in 12 one-base-unit
// jobs: their score stays 500 (it was 928 before the fix). Paying them
// 1ogpu per slot counts, at the validator fee's cost to the farmer.
func TestM3ReputationFarming(t *testing.T) {
	out, _ := runScenario(t, "testdata/scenarios/m3_rep_farm.txt")
	if !strings.Contains(out, "s1 registered=1 class=\"\" attrs= reputation=500 (done=0 agreed=0") {
		t.Errorf("the 1-base-unit jobs moved the sybils' reputation:\n%s", out)
	}
}
