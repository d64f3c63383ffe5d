package agent

import (
	"sync"
	"testing"

	cmttypes "github.com/cometbft/cometbft/types"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/pricing"
	"github.com/ogpu-network/ogpu/types"
)

// TestReportMarginScalesWithWindow: a provider that cannot fetch its
// input reports it a quarter of the job's commit window before the
// deadline (at least 3 blocks), not a fixed 3. The soak's job 39 (commit
// window 40) shows why: p1 stopped fetching 3 blocks before its deadline,
// its report did not land in those 3 blocks (full of spam, a validator
// down), and it was slashed as a no-show although it had tried all along.
// With the window's quarter it stops 10 blocks before.
func TestReportMarginScalesWithWindow(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		deadline, window, want uint64
		checked                bool
	}{
		{name: "soak pipeline job: window 40", deadline: 476, window: 40, want: 466},
		{name: "window 30 (the tests' jobs)", deadline: 100, window: 30, want: 93},
		{name: "short window keeps 3 blocks", deadline: 100, window: 8, want: 97},
		{name: "long window", deadline: 1000, window: 400, want: 900},
		{name: "after an input check: until the deadline", deadline: 476, window: 40, checked: true, want: 476},
		{name: "deadline within the margin", deadline: 9, window: 40, want: 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := reportBy(tc.deadline, tc.window, tc.checked); got != tc.want {
				t.Errorf("reportBy(%d, window %d, checked %v) = %d, want %d", tc.deadline, tc.window, tc.checked, got, tc.want)
			}
		})
	}
}

// TestInputReportLandsWhileNodeDown is the soak's job 39 stage 0 on the
// real path: the client withholds the input, the winners try to fetch it
// and report it unavailable, and their node stops answering at the first
// report for 5 blocks (blocks full of spam, a validator down). Before,
// the report was sent 3 blocks before the commit deadline and landed
// after it: both winners were slashed as no-shows. Now it is sent a
// quarter of the 40-block window (10 blocks) before, and lands in time.
func TestInputReportLandsWhileNodeDown(t *testing.T) {
	n := newTestNet(t)
	rpc := &downRPC{Client: n.c.RPC}
	viaDown := &node.Client{RPC: rpc}
	onDownNode := func(cfg *ProviderConfig) { cfg.Chain = viaDown }
	var once sync.Once
	hook := func(tx cmttypes.Tx) {
		t0, err := types.DecodeTx(tx)
		if err != nil || len(t0.Body.Msgs) == 0 || t0.Body.Msgs[0].Type != types.MsgTypeReportInput {
			return
		}
		once.Do(func() {
			h, err := n.c.CommittedHeight(n.ctx)
			if err != nil {
				return
			}
			rpc.down.Store(true)
			go func() {
				_ = n.c.WaitHeight(n.ctx, h+5)
				rpc.down.Store(false)
			}()
		})
	}
	rpc.onBroadcast.Store(&hook)
	n.providerWith("prov1", pricing.PerToken{Base: types.OGPU(1), PerToken: new(uint256.Int)}, false, onDownNode)
	n.providerWith("prov2", pricing.PerToken{Base: types.OGPU(2), PerToken: new(uint256.Int)}, false, onDownNode)
	cl := n.client()

	in := &LLMInput{Version: 1, Prompt: "Once upon a time"} // never served
	lj := n.job(24)
	lj.Windows.Execute = 40
	posted := n.postWithheld(cl, lj, in.Hash(), in.Prompt)
	j := h1Wait(n, posted.Job, "past the commit deadline", func(j *chain.JobView) bool {
		h, err := n.c.CommittedHeight(n.ctx)
		return err == nil && len(j.Tasks) == 1 && j.Tasks[0].CommitDeadline > 0 && uint64(h) > j.Tasks[0].CommitDeadline+1
	})
	if rpc.refused.Load() == 0 {
		t.Fatal("the providers' node was never down at a report: the test tested nothing")
	}
	if len(j.Tasks[0].Slots) != 2 {
		t.Fatalf("job %d has %d slots, want 2 winners", j.ID, len(j.Tasks[0].Slots))
	}
	for _, s := range j.Tasks[0].Slots {
		if s.NoShow || s.InputReport == "" {
			t.Errorf("winner %s: no-show %v, input report %q: its report of a withheld input must land before the commit deadline %d",
				s.Provider.Hex(), s.NoShow, s.InputReport, j.Tasks[0].CommitDeadline)
		}
	}
}
