package chain

import (
	"strings"
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/types"
)

// TestJobViewWriteText checks the text `ogpu query job` (and the devnet)
// prints: a wrong result is marked as slashed on its own slot line, never
// on the provider that agreed with the verdict; a stage that waits for the
// one before it says so instead of printing deadlines it does not have yet.
func TestJobViewWriteText(t *testing.T) {
	right, wrong := types.Hash{1}, types.Hash{2}
	honest, liar := types.Address{0xaa}, types.Address{0xbb}
	one := uint256.NewInt(1)
	j := &JobView{
		Job: &market.Job{ID: 7, Kind: market.KindPipeline, Mode: market.ModeAuction, Stages: 2, Redundancy: 2,
			MaxPrice: one, ValidatorFee: one, Posted: 10, BidEnd: 14, RevealEnd: 17, Expiry: 90,
			State: market.JobRunning, Bids: []uint32{2, 3}, Req: market.Requirements{MinStake: one},
			Paid: one, Refunded: one, Compensated: one},
		StateName: "running", Locked: one, Phase: "stage 0 settled",
		Tasks: []TaskView{
			{Stage: 0, Status: "settled", Price: one, CommitDeadline: 30, RevealDeadline: 35, DisputeDeadline: 40, Verdict: right,
				Slots: []SlotView{{Provider: honest, Committed: true, Revealed: true, Result: &right},
					{Provider: liar, Committed: true, Revealed: true, Result: &wrong}}},
			{Stage: 1, Status: "waiting", Price: one, Slots: []SlotView{{Provider: honest}}},
		},
	}
	var b strings.Builder
	j.WriteText(&b, 50)
	out := b.String()
	for _, want := range []string{
		"job 7: pipeline auction, running (at height 50)\n",
		"  bids:       5\n",
		"  stage 0: settled at 0.000000000000000001ogpu per replica; commits until 30, reveals until 35, votes until 40\n",
		"  stage 1: waiting at 0.000000000000000001ogpu per replica; opens when stage 0 settles\n",
		"    slot " + honest.Hex() + ": assigned; computes on stage 0's settled result\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.Contains(l, honest.Hex()) && strings.Contains(l, "revealed"):
			if !strings.HasSuffix(l, " (correct)") {
				t.Errorf("the provider that agreed with the verdict: %q", l)
			}
		case strings.Contains(l, liar.Hex()):
			if !strings.HasSuffix(l, " (wrong: slashed)") {
				t.Errorf("the provider that did not: %q", l)
			}
		}
	}
	if strings.Contains(out, "canary:") {
		t.Error("a job nobody revealed as a canary is printed as one")
	}
}
