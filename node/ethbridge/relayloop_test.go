package ethbridge

import (
	"context"
	"encoding/hex"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/ogpu-network/ogpu/bridge"
	"github.com/ogpu-network/ogpu/chain"
)

// appView is what the app-chain's queries would answer: the relay trusts
// none of it, so the test hands it real signatures and forged ones alike.
type appView struct {
	latest  *chain.ValsetView
	valsets map[uint64]*chain.ValsetView
	pending []chain.WithdrawalView
}

func (a *appView) Bridge(context.Context) (*chain.BridgeView, error) {
	return &chain.BridgeView{Valset: a.latest}, nil
}
func (a *appView) BridgePending(context.Context) ([]chain.WithdrawalView, error) {
	return a.pending, nil
}
func (a *appView) BridgeValset(_ context.Context, n uint64) (*chain.ValsetView, error) {
	return a.valsets[n], nil
}

func sigViews(m map[common.Address]bridge.Sig) []chain.SigView {
	var out []chain.SigView
	for a, s := range m {
		out = append(out, chain.SigView{Signer: a, Sig: hex.EncodeToString(s[:])})
	}
	return out
}

// TestRelayStep: one step carries the adopted valset update to the
// contract first, then pays the signed withdrawal under the new set (its
// signatures are the new set's), skips an unsigned one, reports a forged
// one without stopping, and a second step sends nothing.
func TestRelayStep(t *testing.T) {
	e := newEnv(t, 1000, 1000, 1000, 1000)
	e.tokenTx(e.holder, tokenABI.PackTransfer(e.bridge, ogpu(1000).ToBig())) // the genesis lock
	// Valset 1 replaces the last validator with a newcomer; the members
	// of valset 0 but the last sign it.
	newcomer := newAccount(t)
	next, set1 := sortedSet(1, append(append([]account{}, e.vals[:3]...), newcomer), 1000, 1000, 1000, 1000)
	vsigs := sigs(t, bridge.Checkpoint(e.domain(), &set1), e.vals, 0, 1, 2)
	v1 := &chain.ValsetView{Valset: set1, Adopted: true, Signatures: sigViews(vsigs)}
	// Withdrawal 1, signed by three members of valset 1 (the newcomer
	// among them: only set 1 accepts it); 2 unsigned; 3 forged.
	digest := bridge.WithdrawDigest(e.domain(), 1, e.carol.addr, ogpu(10))
	var signers []int
	for i, v := range next {
		if v.addr != e.vals[0].addr {
			signers = append(signers, i)
		}
	}
	w1 := chain.WithdrawalView{Withdrawal: bridge.Withdrawal{Nonce: 1, To: e.carol.addr, Amount: ogpu(10)}, Signed: true, Signatures: sigViews(sigs(t, digest, next, signers...))}
	w2 := chain.WithdrawalView{Withdrawal: bridge.Withdrawal{Nonce: 2, To: e.carol.addr, Amount: ogpu(5)}}
	forged := sigs(t, bridge.WithdrawDigest(e.domain(), 3, e.bob.addr, ogpu(1)), next, 0, 1, 2)
	w3 := chain.WithdrawalView{Withdrawal: bridge.Withdrawal{Nonce: 3, To: e.bob.addr, Amount: ogpu(99)}, Signed: true, Signatures: sigViews(forged)}
	app := &appView{latest: v1, valsets: map[uint64]*chain.ValsetView{1: v1}, pending: []chain.WithdrawalView{w1, w2, w3}}

	r := &Relay{App: app, Eth: e.c, Watcher: e.watcher(WatcherOptions{}), Relayer: e.relayer(), Key: e.rel.key}
	rep, err := r.Step(e.ctx)
	if err == nil {
		t.Error("the forged withdrawal 3 was not reported")
	}
	if len(rep.Valsets) != 1 || rep.Valsets[0] != 1 || len(rep.Withdrawals) != 1 || rep.Withdrawals[0] != 1 {
		t.Fatalf("step relayed %+v (err %v); want valset 1 then withdrawal 1", rep, err)
	}
	cur, err := r.Watcher.CurrentValset(e.ctx)
	if err != nil || cur.Nonce != 1 {
		t.Fatalf("the contract holds valset %d (%v), want 1", cur.Nonce, err)
	}
	if got := e.balance(e.carol.addr, nil); !got.Eq(ogpu(10)) {
		t.Fatalf("carol holds %s, want withdrawal 1's 10 oGPU only", got)
	}
	if got := e.balance(e.bob.addr, nil); !got.IsZero() {
		t.Fatalf("the forged withdrawal paid bob %s", got)
	}
	// Again: the update and withdrawal 1 are done; nothing is sent.
	head := e.head()
	app.pending = []chain.WithdrawalView{w1, w2}
	rep, err = r.Step(e.ctx)
	if err != nil || !rep.Empty() || e.head() != head {
		t.Fatalf("second step: %+v, %v, head %d -> %d; want nothing sent", rep, err, head, e.head())
	}
}
