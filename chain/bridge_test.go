package chain

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	cmtproto "github.com/cometbft/cometbft/api/cometbft/types/v1"
	cmttypes "github.com/cometbft/cometbft/types"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/bridge"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// bridgeHarness is a chain with the bridge on and four validators v1..v4
// whose stakes (in thousands) are given, each with a bridge key.
type bridgeHarness struct {
	*harness
	vals   []string
	privs  []ed25519.PrivateKey
	powers []int64
}

var testBridgeContract = common.HexToAddress("0x00000000000000000000000000000000000b41d6")

func bridgeKey(name string) *ecdsa.PrivateKey { return testKey("bridge " + name) }

func newBridgeHarness(t *testing.T, thousands ...uint64) *bridgeHarness {
	t.Helper()
	return newBridgeHarnessWith(t, func(*genesis.BridgeParams) {}, thousands...)
}

func newBridgeHarnessWith(t *testing.T, mod func(*genesis.BridgeParams), thousands ...uint64) *bridgeHarness {
	t.Helper()
	d := testGenesis()
	bp := genesis.DefaultBridgeParams()
	bp.EthChainID, bp.Contract = 1337, testBridgeContract
	mod(&bp)
	d.Params.Bridge = &bp
	b := &bridgeHarness{}
	d.Validators = nil
	for i, th := range thousands {
		name := "v" + string(rune('1'+i))
		seed := byte(10 + i)
		priv := ed25519.NewKeyFromSeed(append([]byte{seed}, make([]byte, ed25519.SeedSize-1)...))
		d.Validators = append(d.Validators, genesis.Validator{Name: name, Operator: addrOf(name), PubKey: priv.Public().(ed25519.PublicKey), Stake: types.OGPU(th * 1000)})
		if err := d.AddAccount(addrOf(name), types.OGPU(100)); err != nil {
			t.Fatal(err)
		}
		b.vals, b.privs = append(b.vals, name), append(b.privs, priv)
		b.powers = append(b.powers, int64(th*1000))
	}
	b.harness = newHarness(t, store.NewMemTree(), d)
	var txs [][]byte
	for _, n := range b.vals {
		proof, err := bridge.ProveKey(bridgeKey(n), testChainID, addrOf(n))
		if err != nil {
			t.Fatal(err)
		}
		txs = append(txs, b.tx(n, (&bridge.MsgSetBridgeKey{Key: crypto.PubkeyToAddress(bridgeKey(n).PublicKey), Proof: proof}).Raw()))
	}
	for i, r := range b.block(txs...) {
		if r.Code != 0 {
			t.Fatalf("set bridge key %d: %s", i, r.Log)
		}
	}
	if vs, ok := b.view().LatestValset(); !ok || vs.Nonce != 0 || len(vs.Members) != len(thousands) {
		t.Fatalf("valset 0 = %+v, %v", vs, ok)
	}
	return b
}

func (b *bridgeHarness) view() bridge.View {
	snap, err := b.tree.Snapshot(0)
	if err != nil {
		b.t.Fatal(err)
	}
	return bridge.NewView(snap)
}

func (b *bridgeHarness) kv() store.KV {
	snap, err := b.tree.Snapshot(0)
	if err != nil {
		b.t.Fatal(err)
	}
	return snap
}

// commit builds the last commit of the previous height in which validator
// i sent exts[i] (nil: an empty extension; every validator precommits),
// as CometBFT hands it to the proposer and to every node.
func (b *bridgeHarness) commit(exts ...*bridge.Extension) (abci.ExtendedCommitInfo, abci.CommitInfo) {
	var ext abci.ExtendedCommitInfo
	var last abci.CommitInfo
	for i, priv := range b.privs {
		var bz []byte
		if i < len(exts) && exts[i] != nil {
			bz = exts[i].Encode()
		}
		pub := priv.Public().(ed25519.PublicKey)
		addr := consAddress(pub)
		sign := cmttypes.VoteExtensionSignBytes(testChainID, &cmtproto.Vote{Extension: bz, Height: b.height, Round: 0})
		val := abci.Validator{Address: addr[:], Power: b.powers[i]}
		ext.Votes = append(ext.Votes, abci.ExtendedVoteInfo{Validator: val, VoteExtension: bz, ExtensionSignature: ed25519.Sign(priv, sign), BlockIdFlag: cmtproto.BlockIDFlagCommit})
		last.Votes = append(last.Votes, abci.VoteInfo{Validator: val, BlockIdFlag: cmtproto.BlockIDFlagCommit})
	}
	return ext, last
}

// propose runs PrepareProposal with the commit and returns its txs.
func (b *bridgeHarness) propose(ext abci.ExtendedCommitInfo, txs ...[]byte) [][]byte {
	b.t.Helper()
	res, err := b.app.PrepareProposal(context.Background(), &abci.PrepareProposalRequest{Height: b.height + 1, Txs: txs, LocalLastCommit: ext, MaxTxBytes: 1 << 22})
	if err != nil {
		b.t.Fatal(err)
	}
	return res.Txs
}

func (b *bridgeHarness) process(txs [][]byte, last abci.CommitInfo) bool {
	b.t.Helper()
	res, err := b.app.ProcessProposal(context.Background(), &abci.ProcessProposalRequest{Height: b.height + 1, Txs: txs, ProposedLastCommit: last})
	if err != nil {
		b.t.Fatal(err)
	}
	return res.Status == abci.PROCESS_PROPOSAL_STATUS_ACCEPT
}

// finalize runs and commits the block with the decided last commit.
func (b *bridgeHarness) finalize(txs [][]byte, last abci.CommitInfo) []*abci.ExecTxResult {
	b.t.Helper()
	b.height++
	res, err := b.app.FinalizeBlock(context.Background(), &abci.FinalizeBlockRequest{Height: b.height, Txs: txs, Time: time.Unix(0, 0), DecidedLastCommit: last})
	if err != nil {
		b.t.Fatalf("FinalizeBlock %d: %v", b.height, err)
	}
	if _, err := b.app.Commit(context.Background(), &abci.CommitRequest{}); err != nil {
		b.t.Fatal(err)
	}
	b.hashes = append(b.hashes, hex.EncodeToString(res.AppHash))
	return res.TxResults
}

// round proposes, checks and finalizes a block carrying the extensions.
func (b *bridgeHarness) round(exts []*bridge.Extension, txs ...[]byte) []*abci.ExecTxResult {
	b.t.Helper()
	ext, last := b.commit(exts...)
	prop := b.propose(ext, txs...)
	if !b.process(prop, last) {
		b.t.Fatal("an honest proposal was rejected")
	}
	return b.finalize(prop, last)
}

func deposit(n uint64, to string, amt uint64) bridge.Deposit {
	return bridge.Deposit{Nonce: n, From: common.HexToAddress("0xe7e7"), Recipient: addrOf(to), Amount: types.OGPU(amt)}
}

func deposits(ds ...bridge.Deposit) *bridge.Extension { return &bridge.Extension{Deposits: ds} }

func (b *bridgeHarness) reserve() *uint256.Int { return escrow.NewKeeper(b.kv()).BridgeReserve() }

// TestBridgeInjectedCommitTampered: a proposer that drops a vote, changes a
// power or a flag, forges, alters or strips an extension, or hides the
// commit further down the block has its proposal rejected, and FinalizeBlock
// (block sync runs no ProcessProposal) ignores such a commit.
func TestBridgeInjectedCommitTampered(t *testing.T) {
	b := newBridgeHarness(t, 10, 10, 10, 10)
	d := deposit(1, "alice", 50)
	ext, last := b.commit(deposits(d), deposits(d), deposits(d), deposits(d))
	good := b.propose(ext)
	if len(good) != 1 || !isInjected(good[0]) {
		t.Fatalf("the proposer did not inject the commit: %d txs", len(good))
	}
	if !b.process(good, last) {
		t.Fatal("the honest commit was rejected")
	}
	forged := deposits(deposit(1, "bob", 5000))
	tamper := map[string]func(e *abci.ExtendedCommitInfo) [][]byte{
		"dropped vote": func(e *abci.ExtendedCommitInfo) [][]byte { e.Votes = e.Votes[:3]; return nil },
		"wrong power":  func(e *abci.ExtendedCommitInfo) [][]byte { e.Votes[0].Validator.Power *= 10; return nil },
		"wrong flag": func(e *abci.ExtendedCommitInfo) [][]byte {
			e.Votes[1].BlockIdFlag = cmtproto.BlockIDFlagNil
			return nil
		},
		"forged signature": func(e *abci.ExtendedCommitInfo) [][]byte {
			e.Votes[2].ExtensionSignature = ed25519.Sign(b.privs[3], []byte("anything"))
			return nil
		},
		"altered extension":  func(e *abci.ExtendedCommitInfo) [][]byte { e.Votes[2].VoteExtension = forged.Encode(); return nil },
		"stripped extension": func(e *abci.ExtendedCommitInfo) [][]byte { e.Votes[3].VoteExtension = nil; return nil },
		"wrong round":        func(e *abci.ExtendedCommitInfo) [][]byte { e.Round = 1; return nil },
		"not first": func(e *abci.ExtendedCommitInfo) [][]byte {
			return [][]byte{b.tx("alice", send("bob", types.OGPU(1))), injection(*e)}
		},
	}
	for name, f := range tamper {
		e := ext
		e.Votes = append([]abci.ExtendedVoteInfo(nil), ext.Votes...)
		txs := f(&e)
		if txs == nil {
			txs = [][]byte{injection(e)}
		}
		if b.process(txs, last) {
			t.Errorf("%s: ProcessProposal accepted it", name)
		}
	}
	// FinalizeBlock ignores a bad commit: nothing is credited.
	bad := ext
	bad.Votes = append([]abci.ExtendedVoteInfo(nil), ext.Votes...)
	bad.Votes[0].Validator.Power = 1
	before := b.balance("alice")
	res := b.finalize([][]byte{injection(bad)}, last)
	if res[0].Code == 0 || !strings.Contains(res[0].Log, "not the last commit's") {
		t.Fatalf("FinalizeBlock applied a tampered commit: %+v", res[0])
	}
	if !b.balance("alice").Eq(before) || b.view().LastDeposit() != 0 {
		t.Fatal("a tampered commit credited a deposit")
	}
	// The honest one, next height, credits it once.
	b.round([]*bridge.Extension{deposits(d), deposits(d), deposits(d), deposits(d)})
	if got := new(uint256.Int).Sub(b.balance("alice"), before); !got.Eq(types.OGPU(50)) || b.view().LastDeposit() != 1 {
		t.Fatalf("alice got %s, last deposit %d", types.FormatAmount(got), b.view().LastDeposit())
	}
	// A commit from an earlier height replayed (same validators, powers and
	// flags): its extension signatures are for another height.
	if b.process([][]byte{injection(ext)}, last) {
		t.Error("a commit from an earlier height was accepted")
	}
}

// TestBridgeDepositNeedsTwoThirdsOfTheSameTuple: powers 20, 10, 10, 20
// (thousands). Exactly 2/3 of the power is not enough, a split vote credits
// nothing, a cartel below 2/3 cannot redirect a deposit, a nonce is never
// credited twice, and the nonces after a disputed one wait.
func TestBridgeDepositNeedsTwoThirdsOfTheSameTuple(t *testing.T) {
	b := newBridgeHarness(t, 20, 10, 10, 20)
	d1 := deposit(1, "alice", 7)
	reserve := b.reserve()
	// v1 + v4 = 40 of 60: exactly 2/3.
	b.round([]*bridge.Extension{deposits(d1), nil, nil, deposits(d1)})
	if b.view().LastDeposit() != 0 {
		t.Fatal("exactly 2/3 of the power credited a deposit")
	}
	// v1, v4 say alice, v2, v3 say bob: no tuple above 2/3.
	lie := deposit(1, "bob", 7)
	b.round([]*bridge.Extension{deposits(d1), deposits(lie), deposits(lie), deposits(d1)})
	if b.view().LastDeposit() != 0 || !b.balance("bob").Eq(types.OGPU(1000)) {
		t.Fatal("a split vote credited a deposit")
	}
	// Same nonce and recipient, another amount: not the same tuple.
	more := deposit(1, "alice", 700)
	b.round([]*bridge.Extension{deposits(d1), deposits(d1), deposits(more), deposits(more)})
	if b.view().LastDeposit() != 0 {
		t.Fatal("tuples differing in amount were added up")
	}
	// v1 + v2 + v4 = 50 of 60 agree on nonce 1; v3 lies; nonce 2 has v1 + v4 only.
	d2 := deposit(2, "carol", 3)
	alice := b.balance("alice")
	res := b.round([]*bridge.Extension{deposits(d1, d2), deposits(d1), deposits(lie), deposits(d1, d2)})
	if b.view().LastDeposit() != 1 {
		t.Fatalf("last deposit %d, want 1 (nonce 2 has only 40 of 60)", b.view().LastDeposit())
	}
	if got := new(uint256.Int).Sub(b.balance("alice"), alice); !got.Eq(types.OGPU(7)) {
		t.Fatalf("alice credited %s", types.FormatAmount(got))
	}
	if !hasEvent(res[0].Events, "bridge_deposit_credited") {
		t.Fatal("no credited event")
	}
	// The same reports again: nonce 1 is not credited twice; nonce 2 now is.
	b.round([]*bridge.Extension{deposits(d1, d2), deposits(d1, d2), deposits(d1, d2), deposits(d1, d2)})
	if b.view().LastDeposit() != 2 || !b.balance("alice").Eq(new(uint256.Int).Add(alice, types.OGPU(7))) {
		t.Fatalf("replayed reports: last deposit %d, alice %s", b.view().LastDeposit(), types.FormatAmount(b.balance("alice")))
	}
	if want := new(uint256.Int).Sub(reserve, types.OGPU(10)); !b.reserve().Eq(want) {
		t.Fatalf("reserve %s, want %s", types.FormatAmount(b.reserve()), types.FormatAmount(want))
	}
	// A gap: nonce 4 without 3 waits.
	b.round([]*bridge.Extension{deposits(deposit(4, "bob", 1)), deposits(deposit(4, "bob", 1)), deposits(deposit(4, "bob", 1)), deposits(deposit(4, "bob", 1))})
	if b.view().LastDeposit() != 2 {
		t.Fatal("a deposit after a gap was credited")
	}
}

func hasEvent(evs []abci.Event, typ string) bool {
	for _, e := range evs {
		if e.Type == typ {
			return true
		}
	}
	return false
}

// TestBridgeWithdrawalLifecycle: a withdrawal is debited at once into the
// outbound escrow (the supply invariant, checked after every block, counts
// it), signed by the validators' bridge keys (bad and foreign signatures
// dropped), and closed only when more than 2/3 of the power reports the
// identical Withdrawn event. There is no way to get it back.
func TestBridgeWithdrawalLifecycle(t *testing.T) {
	b := newBridgeHarness(t, 10, 10, 10, 10)
	eth := common.HexToAddress("0x00000000000000000000000000000000000e7e7a")
	alice := b.balance("alice")
	res := b.block(b.tx("alice", (&bridge.MsgBridgeWithdraw{To: eth, Amount: types.OGPU(40)}).Raw()))
	if res[0].Code != 0 {
		t.Fatal(res[0].Log)
	}
	fee := types.OGPU(1)
	if want := new(uint256.Int).Sub(alice, new(uint256.Int).Add(types.OGPU(40), fee)); !b.balance("alice").Eq(want) {
		t.Fatalf("alice has %s, want %s", types.FormatAmount(b.balance("alice")), types.FormatAmount(want))
	}
	if out := escrow.NewKeeper(b.kv()).BridgeOutbound(); !out.Eq(types.OGPU(40)) {
		t.Fatalf("outbound %s", types.FormatAmount(out))
	}
	// Refusals: below the minimum, zero address, more than the balance.
	for name, m := range map[string]*bridge.MsgBridgeWithdraw{
		"dust":    {To: eth, Amount: uint256.NewInt(1)},
		"too big": {To: eth, Amount: types.OGPU(5000)},
	} {
		if r := b.checkTx(b.tx("bob", m.Raw())); r.Code == 0 {
			t.Errorf("%s withdrawal admitted", name)
		}
		b.nonces["bob"]--
	}
	w, _ := b.view().Withdrawal(1)
	domain := bridge.Domain(1337, testBridgeContract, testChainID)
	digest := bridge.WithdrawDigest(domain, 1, w.To, w.Amount)
	sig := func(name string) bridge.NonceSig {
		s, err := bridge.Sign(bridgeKey(name), digest)
		if err != nil {
			t.Fatal(err)
		}
		return bridge.NonceSig{Nonce: 1, Sig: s}
	}
	// v1 signs, v2 signs with the wrong key, v3 signs another amount.
	other, _ := bridge.Sign(bridgeKey("v3"), bridge.WithdrawDigest(domain, 1, w.To, types.OGPU(4000)))
	b.round([]*bridge.Extension{
		{Withdrawals: []bridge.NonceSig{sig("v1")}},
		{Withdrawals: []bridge.NonceSig{sig("v9")}},
		{Withdrawals: []bridge.NonceSig{{Nonce: 1, Sig: other}}},
	})
	if got := len(b.view().WithdrawalSigs(1)); got != 1 {
		t.Fatalf("%d signatures stored, want v1's only", got)
	}
	res = b.round([]*bridge.Extension{{Withdrawals: []bridge.NonceSig{sig("v1")}}, {Withdrawals: []bridge.NonceSig{sig("v2")}}, {Withdrawals: []bridge.NonceSig{sig("v3")}}})
	sigs := b.view().WithdrawalSigs(1)
	vs, _ := b.view().LatestValset()
	if len(sigs) != 3 || !bridge.Enough(bridge.SignedPower(vs, sigs), vs.Total()) || !hasEvent(res[0].Events, "bridge_withdrawal_signed") {
		t.Fatalf("after three signers: %d signatures stored", len(sigs))
	}
	for a, s := range sigs {
		if got, err := s.Signer(digest); err != nil || got != a {
			t.Fatalf("stored signature of %s recovers to %s (%v)", a, got, err)
		}
	}
	// Withdrawn reported by two of four: still pending. A lie about the
	// amount by the other two does not close it either.
	x := bridge.Executed{Nonce: 1, To: eth, Amount: types.OGPU(40)}
	lie := bridge.Executed{Nonce: 1, To: eth, Amount: types.OGPU(4)}
	b.round([]*bridge.Extension{{Executed: []bridge.Executed{x}}, {Executed: []bridge.Executed{x}}, {Executed: []bridge.Executed{lie}}, {Executed: []bridge.Executed{lie}}})
	if len(b.view().Pending()) != 1 {
		t.Fatal("a withdrawal closed on half the power")
	}
	reserve := b.reserve()
	b.round([]*bridge.Extension{{Executed: []bridge.Executed{x}}, {Executed: []bridge.Executed{x}}, {Executed: []bridge.Executed{x}}})
	w, _ = b.view().Withdrawal(1)
	if len(b.view().Pending()) != 0 || w.Executed == 0 || !escrow.NewKeeper(b.kv()).BridgeOutbound().IsZero() {
		t.Fatal("the attested withdrawal is still pending")
	}
	if want := new(uint256.Int).Add(reserve, types.OGPU(40)); !b.reserve().Eq(want) {
		t.Fatalf("reserve %s, want %s", types.FormatAmount(b.reserve()), types.FormatAmount(want))
	}
	if len(b.view().WithdrawalSigs(1)) != 0 {
		t.Fatal("signatures of a paid withdrawal kept")
	}
	// Reported again: nothing moves twice.
	b.round([]*bridge.Extension{{Executed: []bridge.Executed{x}}, {Executed: []bridge.Executed{x}}, {Executed: []bridge.Executed{x}}})
	if !b.reserve().Eq(new(uint256.Int).Add(reserve, types.OGPU(40))) {
		t.Fatal("a withdrawal was closed twice")
	}
}

// TestBridgeValsetRotation: a validator rotating its bridge key makes valset
// 1; only members of valset 0 can sign it, and it is adopted at more than
// 2/3 of valset 0's power. Another key may not claim a used address or be
// the operator key, and a proof for another operator is refused.
func TestBridgeValsetRotation(t *testing.T) {
	b := newBridgeHarness(t, 10, 10, 10, 10)
	v0, _ := b.view().LatestValset()
	newKey := testKey("v4 rotated")
	proof, _ := bridge.ProveKey(newKey, testChainID, addrOf("v4"))
	res := b.block(b.tx("v4", (&bridge.MsgSetBridgeKey{Key: crypto.PubkeyToAddress(newKey.PublicKey), Proof: proof}).Raw()))
	if res[0].Code != 0 {
		t.Fatal(res[0].Log)
	}
	v1, ok := b.view().LatestValset()
	if !ok || v1.Nonce != 1 || v1.Power(crypto.PubkeyToAddress(newKey.PublicKey)) == 0 {
		t.Fatalf("no valset 1 with the rotated key: %+v", v1)
	}
	// Refused keys.
	stolen, _ := bridge.ProveKey(bridgeKey("v1"), testChainID, addrOf("v2"))
	own, _ := bridge.ProveKey(testKey("v3"), testChainID, addrOf("v3"))
	otherOp, _ := bridge.ProveKey(testKey("x"), testChainID, addrOf("v1"))
	for name, tc := range map[string]struct {
		from string
		msg  *bridge.MsgSetBridgeKey
	}{
		"another validator's key": {"v2", &bridge.MsgSetBridgeKey{Key: crypto.PubkeyToAddress(bridgeKey("v1").PublicKey), Proof: stolen}},
		"the operator key":        {"v3", &bridge.MsgSetBridgeKey{Key: addrOf("v3"), Proof: own}},
		"a proof for v1":          {"v2", &bridge.MsgSetBridgeKey{Key: crypto.PubkeyToAddress(testKey("x").PublicKey), Proof: otherOp}},
		"not a validator":         {"alice", &bridge.MsgSetBridgeKey{Key: crypto.PubkeyToAddress(testKey("x").PublicKey), Proof: otherOp}},
	} {
		if r := b.checkTx(b.tx(tc.from, tc.msg.Raw())); r.Code == 0 {
			t.Errorf("%s: admitted", name)
		}
		b.nonces[tc.from]--
	}
	domain := bridge.Domain(1337, testBridgeContract, testChainID)
	cp := bridge.Checkpoint(domain, v1)
	vsig := func(k *ecdsa.PrivateKey) bridge.NonceSig {
		s, _ := bridge.Sign(k, cp)
		return bridge.NonceSig{Nonce: 1, Sig: s}
	}
	// v4 signs with its new key (not in valset 0): not counted. v1, v2 sign.
	b.round([]*bridge.Extension{{Valsets: []bridge.NonceSig{vsig(bridgeKey("v1"))}}, {Valsets: []bridge.NonceSig{vsig(bridgeKey("v2"))}}, nil, {Valsets: []bridge.NonceSig{vsig(newKey)}}})
	if b.view().Adopted(1) || len(b.view().ValsetSigs(1)) != 2 {
		t.Fatalf("valset 1 adopted with %d signatures of valset 0", len(b.view().ValsetSigs(1)))
	}
	res2 := b.round([]*bridge.Extension{nil, nil, {Valsets: []bridge.NonceSig{vsig(bridgeKey("v3"))}}})
	if !b.view().Adopted(1) || !hasEvent(res2[0].Events, "bridge_valset_signed") {
		t.Fatal("valset 1 not adopted with 3 of 4")
	}
	if v0.Total() == 0 || v1.Total() > 1<<32-1 {
		t.Fatalf("normalized totals %d, %d", v0.Total(), v1.Total())
	}
}

// TestBridgeOffRefusesEverything: with params.bridge absent a chain takes
// no bridge message, no extension and no injected commit.
func TestBridgeOffRefusesEverything(t *testing.T) {
	h := newHarness(t, store.NewMemTree(), testGenesis())
	if r := h.checkTx(h.tx("alice", (&bridge.MsgBridgeWithdraw{To: common.HexToAddress("0x01"), Amount: types.OGPU(5)}).Raw())); r.Code == 0 || !strings.Contains(r.Log, "bridge is off") {
		t.Fatalf("withdrawal admitted with the bridge off: %s", r.Log)
	}
	v, _ := h.app.VerifyVoteExtension(context.Background(), &abci.VerifyVoteExtensionRequest{VoteExtension: deposits(deposit(1, "alice", 1)).Encode()})
	if v.Status != abci.VERIFY_VOTE_EXTENSION_STATUS_REJECT {
		t.Fatal("extension accepted with the bridge off")
	}
	inj := append(append([]byte(nil), InjectedPrefix...), 0x0a, 0x00)
	res, _ := h.app.ProcessProposal(context.Background(), &abci.ProcessProposalRequest{Height: 1, Txs: [][]byte{inj}})
	if res.Status != abci.PROCESS_PROPOSAL_STATUS_REJECT {
		t.Fatal("injected commit accepted with the bridge off")
	}
}

// TestBridgeVerifyVoteExtension: malformed, oversized or over-full
// extensions are refused on receipt; empty ones always pass.
func TestBridgeVerifyVoteExtension(t *testing.T) {
	b := newBridgeHarness(t, 10, 10, 10, 10)
	many := &bridge.Extension{}
	for i := range bridge.MaxSigs + 1 {
		many.Withdrawals = append(many.Withdrawals, bridge.NonceSig{Nonce: uint64(i + 1)})
	}
	for name, ext := range map[string][]byte{
		"garbage":      []byte{1, 2, 3},
		"version":      append([]byte{9}, deposits(deposit(1, "alice", 1)).Encode()[1:]...),
		"gap":          deposits(deposit(1, "alice", 1), deposit(3, "alice", 1)).Encode(),
		"too many":     many.Encode(),
		"zero deposit": deposits(bridge.Deposit{Nonce: 1, Recipient: addrOf("alice"), Amount: new(uint256.Int)}).Encode(),
		"oversized":    append([]byte{1}, make([]byte, bridge.MaxExtensionBytes)...),
	} {
		v, _ := b.app.VerifyVoteExtension(context.Background(), &abci.VerifyVoteExtensionRequest{VoteExtension: ext})
		if v.Status != abci.VERIFY_VOTE_EXTENSION_STATUS_REJECT {
			t.Errorf("%s: accepted", name)
		}
	}
	for _, ext := range [][]byte{nil, deposits(deposit(1, "alice", 1)).Encode()} {
		v, _ := b.app.VerifyVoteExtension(context.Background(), &abci.VerifyVoteExtensionRequest{VoteExtension: ext})
		if v.Status != abci.VERIFY_VOTE_EXTENSION_STATUS_ACCEPT {
			t.Errorf("%x refused", ext)
		}
	}
}

type extenderFunc func() []byte

func (f extenderFunc) Extension(context.Context, int64, store.Reader) []byte { return f() }

// TestBridgeExtenderFailureCostsOnlyTheExtension: the sidecar talks to an
// Ethereum node; whether it panics or returns garbage, the validator still
// precommits, with an empty extension.
func TestBridgeExtenderFailureCostsOnlyTheExtension(t *testing.T) {
	b := newBridgeHarness(t, 10, 10, 10, 10)
	for name, f := range map[string]extenderFunc{
		"panic":   func() []byte { panic("ethereum node said something odd") },
		"garbage": func() []byte { return []byte{1, 0xff, 0xff} },
	} {
		b.app.extender = f
		res, err := b.app.ExtendVote(context.Background(), &abci.ExtendVoteRequest{Height: b.height + 1})
		if err != nil || len(res.VoteExtension) != 0 {
			t.Errorf("%s: extension %x, error %v; want an empty extension", name, res.VoteExtension, err)
		}
	}
	ok := deposits(deposit(1, "alice", 1)).Encode()
	b.app.extender = extenderFunc(func() []byte { return ok })
	res, _ := b.app.ExtendVote(context.Background(), &abci.ExtendVoteRequest{Height: b.height + 1})
	if _, ext, err := decodeVoteExtension(res.VoteExtension, true); err != nil || ext == nil || string(ext.Encode()) != string(ok) {
		t.Errorf("a good extension was not sent: %x (%v)", res.VoteExtension, err)
	}
}

// TestBridgeExportKeepsNonces: a chain exported and restarted keeps its
// last deposit nonce, keys and valset, so that the validators' reports of
// old deposits credit nothing twice; export is refused while a withdrawal
// waits in the outbound escrow (a genesis cannot carry it).
func TestBridgeExportKeepsNonces(t *testing.T) {
	b := newBridgeHarness(t, 10, 10, 10, 10)
	d1 := deposit(1, "alice", 5)
	all := []*bridge.Extension{deposits(d1), deposits(d1), deposits(d1), deposits(d1)}
	b.round(all)
	eth := common.HexToAddress("0x00000000000000000000000000000000000e7e7a")
	b.block(b.tx("bob", (&bridge.MsgBridgeWithdraw{To: eth, Amount: types.OGPU(2)}).Raw()))
	if _, _, err := ExportGenesis(b.kv()); err == nil || !strings.Contains(err.Error(), "outbound escrow") {
		t.Fatalf("export with a pending withdrawal: %v", err)
	}
	x := bridge.Executed{Nonce: 1, To: eth, Amount: types.OGPU(2)}
	b.round([]*bridge.Extension{{Executed: []bridge.Executed{x}}, {Executed: []bridge.Executed{x}}, {Executed: []bridge.Executed{x}}})
	_, doc, err := ExportGenesis(b.kv())
	if err != nil {
		t.Fatal(err)
	}
	if doc.Bridge == nil || doc.Bridge.LastDeposit != 1 || doc.Bridge.LastWithdrawal != 1 || len(doc.Bridge.Keys) != 4 || len(doc.Bridge.Valset) != 4 {
		t.Fatalf("exported bridge state %+v", doc.Bridge)
	}
	bz, _ := json.Marshal(doc)
	if _, err := genesis.Parse(bz); err != nil {
		t.Fatalf("the export does not parse back: %v", err)
	}
	// Restart from it: the same reports credit nothing.
	r := &bridgeHarness{harness: newHarness(t, store.NewMemTree(), doc), vals: b.vals, privs: b.privs, powers: b.powers}
	r.block()
	alice := r.balance("alice")
	if alice.IsZero() {
		t.Fatal("alice's balance was not exported")
	}
	r.round(all)
	if !r.balance("alice").Eq(alice) || r.view().LastDeposit() != 1 {
		t.Fatalf("a deposit credited before the export was credited again: alice %s -> %s", types.FormatAmount(alice), types.FormatAmount(r.balance("alice")))
	}
	if vs, ok := r.view().LatestValset(); !ok || !r.view().Adopted(vs.Nonce) {
		t.Fatal("the carried-over valset is not adopted")
	}
	d2 := deposit(2, "alice", 7)
	r.round([]*bridge.Extension{deposits(d1, d2), deposits(d1, d2), deposits(d2), deposits(d1, d2)})
	if r.view().LastDeposit() != 2 || !r.balance("alice").Eq(new(uint256.Int).Add(alice, types.OGPU(7))) {
		t.Fatal("the next deposit after the export was not credited")
	}
}

// paramsExtender reads the committed params, as the bridge sidecar does
// (ReadParams panics on a state without them), and reports a deposit.
type paramsExtender struct {
	calls int
	panic bool
}

func (e *paramsExtender) Extension(_ context.Context, _ int64, committed store.Reader) []byte {
	e.calls++
	if e.panic {
		panic("sidecar bug")
	}
	if ReadParams(committed).Bridge == nil {
		return nil
	}
	return deposits(deposit(1, "alice", 1)).Encode()
}

// TestBridgeExtendVoteFirstHeight: at height 1 nothing is committed yet
// (the genesis state is only in the working tree), so the extender is not
// asked and the extension is empty; a 4-validator testnet's first
// precommits once panicked here (CONSENSUS FAILURE on every validator).
// From the first commit on the extender is asked; a panic in it sends an
// empty extension instead of stopping the validator.
func TestBridgeExtendVoteFirstHeight(t *testing.T) {
	d := testGenesis()
	bp := genesis.DefaultBridgeParams()
	bp.EthChainID, bp.Contract = 1337, testBridgeContract
	d.Params.Bridge = &bp
	ext := &paramsExtender{}
	h := newHarness(t, store.NewMemTree(), d, WithExtender(ext))
	vote := func(height int64) []byte {
		t.Helper()
		res, err := h.app.ExtendVote(context.Background(), &abci.ExtendVoteRequest{Height: height})
		if err != nil {
			t.Fatal(err)
		}
		return res.VoteExtension
	}
	if got := vote(1); len(got) != 0 || ext.calls != 0 {
		t.Fatalf("before the first commit: extension %x, extender asked %d times", got, ext.calls)
	}
	h.block()
	if got := vote(2); ext.calls != 1 || len(got) == 0 {
		t.Fatalf("after the first commit: extension %x, extender asked %d times", got, ext.calls)
	}
	ext.panic = true
	if got := vote(3); len(got) != 0 || ext.calls != 2 {
		t.Fatalf("a panicking extender: extension %x, asked %d times", got, ext.calls)
	}
}

// TestBridgeWithdrawalSpamIsBounded: a spammer paying the minimum fee can
// queue at most max_pending_withdrawals for the validators to sign (each at
// least min_withdrawal, its own money); the next is refused with what to do,
// nothing debited, and a slot frees once one is paid on Ethereum.
func TestBridgeWithdrawalSpamIsBounded(t *testing.T) {
	b := newBridgeHarnessWith(t, func(p *genesis.BridgeParams) { p.MaxPendingWithdrawals = 2 }, 10, 10, 10, 10)
	eth := common.HexToAddress("0x00000000000000000000000000000000000e7e7a")
	w := func() []byte { return b.tx("bob", (&bridge.MsgBridgeWithdraw{To: eth, Amount: types.OGPU(1)}).Raw()) }
	b.block(w(), w())
	before := b.balance("bob")
	res := b.block(w())
	if res[0].Code == 0 || !strings.Contains(res[0].Log, "max_pending_withdrawals") {
		t.Fatalf("third pending withdrawal: %+v", res[0])
	}
	if paid := new(uint256.Int).Sub(before, b.balance("bob")); !paid.Eq(types.OGPU(1)) { // the fee only
		t.Fatalf("the refused withdrawal cost bob %s, want the 1ogpu fee only", types.FormatAmount(paid))
	}
	x := bridge.Executed{Nonce: 1, To: eth, Amount: types.OGPU(1)}
	b.round([]*bridge.Extension{{Executed: []bridge.Executed{x}}, {Executed: []bridge.Executed{x}}, {Executed: []bridge.Executed{x}}})
	if res := b.block(w()); res[0].Code != 0 {
		t.Fatalf("a freed slot was not taken: %s", res[0].Log)
	}
}
