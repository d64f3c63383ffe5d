package chain

import (
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// TestRevealPaysItsRanking: since AppVersion 7 a reveal ranks its bid
// (market's leaders list): an eligibility check, the insertion and at most
// one eviction with its refund. Every reveal pays that at its bound,
// computed from the message alone: a bid's matching (MaxWorkMatches ×
// match_gas) plus one slot_gas. A reveal paying the old plain-message fee
// is refused before anything runs.
func TestRevealPaysItsRanking(t *testing.T) {
	reveal := (&market.MsgRevealBid{Job: 1, Stage: 0, Price: types.OGPU(1), Salt: types.Hash{4}}).Raw()
	if w := MsgWorks([]types.RawMsg{reveal}); w[0] != revealWork || w[0].Matches != genesis.MaxWorkMatches || w[0].Slots != 1 {
		t.Fatalf("a reveal's work %+v, want a bid's matching and one slot", w[0])
	}
	doc := testGenesis()
	p := doc.Params
	extra := genesis.MaxWorkMatches*p.WorkGas.MatchGas + p.WorkGas.SlotGas
	if got := p.Gas(100, MsgWorks([]types.RawMsg{reveal})) - p.Gas(100, []genesis.MsgWork{{}}); got != extra {
		t.Fatalf("a reveal costs %d gas more than a plain message, want %d", got, extra)
	}
	t.Logf("reveal gas at 100 bytes: %d (a plain message: %d)", p.Gas(100, MsgWorks([]types.RawMsg{reveal})), p.Gas(100, []genesis.MsgWork{{}}))

	h := newHarness(t, store.NewMemTree(), doc)
	size := len(signTxFee(t, "bob", 0, new(uint256.Int).SetAllOne(), reveal))
	plainFee := p.RequiredFee(size, []genesis.MsgWork{{}})
	if res := h.checkTx(signTxFee(t, "bob", 0, plainFee, reveal)); res.Code != types.CodeOf(types.ErrFeeTooLow) {
		t.Errorf("a reveal paying a plain message's fee: code %d (%s), want fee too low", res.Code, res.Log)
	}
	fee := p.RequiredFee(size, MsgWorks([]types.RawMsg{reveal}))
	if res := h.checkTx(signTxFee(t, "bob", 0, fee, reveal)); res.Code != types.CodeOf(types.ErrUnknownJob) {
		t.Errorf("a reveal paying its fee, on no job: code %d (%s), want the fee accepted and the job unknown", res.Code, res.Log)
	}
}
