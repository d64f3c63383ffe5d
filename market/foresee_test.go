package market

import (
	"fmt"
	"math"
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/beacon"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// TestAuditsCannotBeForeseen (M-H2, M-M3): canaries were recognisable
// from their prompts (132 of 132 in the review), their clients' funding
// and their timing. Random audits are drawn from the beacon value of the
// height that confirmed a task, which does not exist until that height's
// block is decided: here, 240 jobs with the tells the review used (a
// fresh client funded with exactly 20 oGPU by the validator operator,
// posting right after another client's job; caps, inputs, providers,
// heights), half of them audited (audit_rate_bps 5000, for a balanced
// test). Classifiers that learn from every public fact of the first 120
// jobs before their draws (each fact alone, and the beacon value of the
// block before the reveal) predict the audits of the other 120 no better
// than chance (within 3 standard errors of 50%), and at every reveal the
// value that draws the task was not yet on chain.
func TestAuditsCannotBeForeseen(t *testing.T) {
	params := genesis.DefaultParams()
	params.Market.AuditRateBps = 5000
	val := addrOf("val")
	clients := []types.Address{addrOf("client a"), addrOf("client b"), addrOf("client c"), addrOf("fresh shell")}
	var provs []types.Address
	accts := []testAccount{{val, types.OGPU(10_000)}}
	for _, c := range clients[:3] {
		accts = append(accts, testAccount{c, types.OGPU(100_000)})
	}
	for i := range 8 {
		p := addrOf(fmt.Sprint("foresee provider ", i))
		provs = append(provs, p)
		accts = append(accts, testAccount{p, types.OGPU(1_000)})
	}
	n := newTestNet(t, params, accts, []string{"val"})
	for i, p := range provs {
		n.register(p, types.OGPU(500), gpuInfo(fmt.Sprint("f", i)))
	}
	n.endBlock()

	type jobFacts struct {
		id                       uint64
		client, cap, p1, p2      int
		input, postH, revealH    uint64
		prevBeacon, drawn, known bool
		// after is the draw read from the drawing value once final: the
		// control that shows the classifiers can learn what is learnable.
		after bool
	}
	var jobs []*jobFacts
	caps := []*uint256.Int{amt("1ogpu"), amt("2ogpu"), amt("3ogpu")}
	for batch := range 10 {
		var ids []uint64
		var batchJobs []*jobFacts
		for i := range 24 {
			k := batch*24 + i
			c := k % 4
			if c == 3 {
				// The review's tells: a shell funded with exactly 20 oGPU
				// by the validator operator, posting right after a job.
				n.must("fund the shell", func(kp *Keeper) error { return kp.esc.Send(val, clients[3], types.OGPU(20)) })
			}
			m := auctionJob(2, caps[k%3])
			m.Input = hashOf(fmt.Sprint("input ", k))
			m.Seal = hashOf(fmt.Sprint("seal ", k))
			id := n.post(clients[c], m)
			f := &jobFacts{id: id, client: c, cap: k % 3, input: uint64(m.Input[0]), postH: n.height, p1: (k * 3) % 8, p2: (k*3 + 1) % 8}
			ids, batchJobs = append(ids, id), append(batchJobs, f)
		}
		for i, id := range ids {
			f := batchJobs[i]
			for _, p := range []int{f.p1, f.p2} {
				n.bid(provs[p], id, 0, amt("0.5ogpu"))
			}
		}
		n.advanceTo(n.job(ids[0]).BidEnd + 1)
		for i, id := range ids {
			f := batchJobs[i]
			for _, p := range []int{f.p1, f.p2} {
				n.revealBid(provs[p], id, 0, amt("0.5ogpu"))
			}
		}
		n.advanceTo(n.job(ids[0]).RevealEnd + 1)
		salt := hashOf("salt")
		for i, id := range ids {
			f := batchJobs[i]
			for _, p := range []int{f.p1, f.p2} {
				res := hashOf(fmt.Sprint("answer ", id))
				n.must("commit", func(k *Keeper) error {
					return k.CommitResult(provs[p], &verifier.MsgCommitResult{Job: id, Stage: 0, Commitment: verifier.ResultCommitment(res, salt, provs[p])})
				})
			}
		}
		n.endBlock()
		for i, id := range ids {
			f := batchJobs[i]
			for _, p := range []int{f.p1, f.p2} {
				res := hashOf(fmt.Sprint("answer ", id))
				n.must("reveal", func(k *Keeper) error {
					return k.RevealResult(provs[p], &verifier.MsgRevealResult{Job: id, Stage: 0, Result: res, Salt: salt})
				})
			}
			f.revealH = n.height
			_, f.known = beacon.Value(n.tree, n.task(id, 0).DrawAt)
			if v, ok := beacon.Value(n.tree, n.height-1); ok {
				f.prevBeacon = Audited(v, id, 0, params.Market.AuditRateBps)
			}
		}
		for open := true; open; {
			open = false
			for i, id := range ids {
				if !n.job(id).State.Open() {
					continue
				}
				open = true
				if v, ok := beacon.Value(n.tree, n.task(id, 0).DrawAt); ok {
					batchJobs[i].after = Audited(v, id, 0, params.Market.AuditRateBps)
				}
				if tk := n.task(id, 0); tk.Status == verifier.TaskDisputed && len(n.ver().Votes(id, 0)) == 0 {
					batchJobs[i].drawn = true
					n.vote(id, 0, hashOf(fmt.Sprint("answer ", id)), val)
				}
			}
			if open {
				n.endBlock()
			}
		}
		jobs = append(jobs, batchJobs...)
	}

	drawn := 0
	for _, f := range jobs {
		if f.known {
			t.Fatalf("job %d: the beacon value that draws it was on chain when its providers revealed", f.id)
		}
		if f.drawn {
			drawn++
		}
	}
	half := len(jobs) / 2
	se := math.Sqrt(0.25 / float64(half))
	if got := float64(drawn) / float64(len(jobs)); math.Abs(got-0.5) > 3*math.Sqrt(0.25/float64(len(jobs))) {
		t.Fatalf("%d of %d drawn at a rate of 50%%", drawn, len(jobs))
	}
	features := map[string]func(f *jobFacts) uint64{ // looked up by name below, in this order
		"client (the shell's tells)":  func(f *jobFacts) uint64 { return uint64(f.client) },
		"cap":                         func(f *jobFacts) uint64 { return uint64(f.cap) },
		"job id parity":               func(f *jobFacts) uint64 { return f.id % 2 },
		"input's first byte":          func(f *jobFacts) uint64 { return f.input % 8 },
		"posting height":              func(f *jobFacts) uint64 { return f.postH % 8 },
		"reveal height":               func(f *jobFacts) uint64 { return f.revealH % 8 },
		"providers":                   func(f *jobFacts) uint64 { return uint64(f.p1*8 + f.p2) },
		"the last value before":       func(f *jobFacts) uint64 { return boolU(f.prevBeacon) },
		"the drawing value (control)": func(f *jobFacts) uint64 { return boolU(f.after) },
	}
	names := []string{"client (the shell's tells)", "cap", "job id parity", "input's first byte", "posting height", "reveal height", "providers", "the last value before", "the drawing value (control)"}
	for _, name := range names {
		feat := features[name]
		// Learn: the majority outcome per feature value in the first half.
		yes, all := map[uint64]int{}, map[uint64]int{} // looked up only
		for _, f := range jobs[:half] {
			all[feat(f)]++
			if f.drawn {
				yes[feat(f)]++
			}
		}
		right := 0
		for _, f := range jobs[half:] {
			guess := 2*yes[feat(f)] > all[feat(f)]
			if guess == f.drawn {
				right++
			}
		}
		acc := float64(right) / float64(len(jobs)-half)
		t.Logf("classifier on %-28s %5.1f%% right on %d unseen jobs", name+":", 100*acc, len(jobs)-half)
		if name == "the drawing value (control)" {
			if acc < 0.99 {
				t.Errorf("the control, the drawing value itself, predicts only %.1f%%: the classifier cannot learn", 100*acc)
			}
			continue
		}
		if acc > 0.5+3*se {
			t.Errorf("a classifier on %s foresaw the audits: %.1f%% right (chance 50%%, 3 s.e. %.1f%%)", name, 100*acc, 300*se)
		}
	}
}

func boolU(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
