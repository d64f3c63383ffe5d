package agent

import (
	"strings"
	"testing"
	"time"

	ethcrypto "github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/types"
)

// TestPoolJobClaimedByAgents (issue 14): a client posts a pool LLM job
// (a fixed reward of 2 oGPU per replica, r = 2, claims open for 10
// blocks); two provider agents, whose pricing strategies ask less than the
// reward, claim it on sight; after the claim window the close draws the
// two winners from the beacon (AppVersion 8, market/pool.go), and they run
// it like an awarded auction task: the client gets the agreed greedy
// answer and pays exactly two rewards. Nothing but the client's post and
// the agents' own transactions is sent. The test logs blocks and time from
// the post to the award.
func TestPoolJobClaimedByAgents(t *testing.T) {
	n := newTestNet(t)
	prov1 := n.provider("prov1", 40, false) // asks 0.1 + 24 × 0.04 = 1.06 oGPU
	n.provider("prov2", 50, false)          // asks 1.3 oGPU
	cl := n.client()
	reward := types.OGPU(2)
	job := n.job(24)
	job.Mode, job.MaxPrice = market.ModePool, reward
	job.Windows.Bid, job.Windows.Reveal = 4, 0
	var postedAt, awardedAt time.Time
	res, err := cl.RunLLM(n.ctx, job, func(f string, a ...any) {
		line := f
		switch {
		case strings.HasPrefix(line, "posted"):
			postedAt = time.Now()
		case strings.HasPrefix(line, "awarded") && awardedAt.IsZero():
			awardedAt = time.Now()
		}
		t.Logf("[client] "+f, a...)
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != "agreed" || !strings.Contains(res.Text, "Lily") {
		t.Fatalf("outcome %s text %q: want the agreed greedy answer", res.Outcome, res.Text)
	}
	j, err := n.c.Job(n.ctx, res.Job)
	if err != nil {
		t.Fatal(err)
	}
	if j.Mode != market.ModePool || len(j.Tasks) != 1 {
		t.Fatalf("job %d: mode %s, %d tasks", res.Job, j.Mode, len(j.Tasks))
	}
	want := map[types.Address]bool{ethcrypto.PubkeyToAddress(n.keys["prov1"].PublicKey): true, ethcrypto.PubkeyToAddress(n.keys["prov2"].PublicKey): true}
	for _, s := range j.Tasks[0].Slots {
		if !want[s.Provider] || !s.Revealed {
			t.Fatalf("slots %+v: want prov1 and prov2, both revealed", j.Tasks[0].Slots)
		}
		delete(want, s.Provider)
	}
	if paid := new(uint256.Int).Mul(reward, uint256.NewInt(2)); !res.Paid.Eq(paid) || !j.Prices[0].Eq(reward) {
		t.Errorf("paid %s at %s, want 2 × the fixed reward %s", res.Paid, j.Prices[0], reward)
	}
	if res.Awarded == 0 || uint64(res.Awarded) <= j.RevealEnd {
		t.Fatalf("awarded at height %d, claim window ending at %d: want the draw after the window", res.Awarded, j.RevealEnd)
	}
	// The console shows the claim: at the reward, with the agent's price.
	if d := decisionOf(t, prov1.agent, res.Job); !d.Bid || !d.Price.Eq(reward) || !strings.Contains(d.Reason, "pool claim") || !strings.Contains(d.Reason, "1.06") {
		t.Errorf("prov1's decision on pool job %d: %+v, want a claim at the 2 oGPU reward naming its 1.06 oGPU price", res.Job, d)
	}
	t.Logf("pool job %d: posted at height %d, claims until %d, drawn and awarded at %d: %v from post to award; settled agreed at %d",
		res.Job, res.Posted, j.RevealEnd, res.Awarded, awardedAt.Sub(postedAt).Round(time.Millisecond), res.Completed)
	n.supplyIsCap()
}
