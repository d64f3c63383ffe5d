package devnet

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/types"
)

// storyJob is the LLM job alice posts in rounds 1 and 2: a greedy story
// from the providers' model, on two replicas.
func (d *devnet) storyJob() agent.LLMJob {
	return agent.LLMJob{
		Model: d.model, ModelSize: d.modelSize, Prompt: "Once upon a time", MaxTokens: 48,
		Redundancy: 2, MaxPrice: types.OGPU(5),
		Req:     market.Requirements{MinStake: types.OGPU(100), Attributes: []string{"ram>=1Gi"}},
		Windows: market.Windows{Bid: 4, Reveal: 3, Execute: 25, Verify: 15},
	}
}

// agreedRound is an LLM job the two winners agree on, with a canary the
// validator agent posts beside it (canary.go). Both are drawn for a
// random audit (the devnet audits every agreed task) and upheld:
// "audited".
func (d *devnet) agreedRound(report *Report) error {
	canary := d.canaryDuringNextJob(d.accts[0].addr)
	if _, err := d.llmRound(report, "an LLM job the two winners agree on, then audited (as every agreed task here)"); err != nil {
		return err
	}
	var err error
	report.Canary, err = d.canarySettled(canary)
	return err
}

// liarRound restarts prov2 as a liar and runs the LLM job again: the
// validator's re-generation settles it, and prov2 must be slashed.
func (d *devnet) liarRound(report *Report) error {
	liar := d.provs[1]
	fmt.Fprintf(d.w, "\nprov2 restarts with the devnet-only --devnet-lie flag: it will change one token of its output\n")
	d.stopProvider(liar)
	if err := d.startProvider(liar, func(c *agent.ProviderConfig) { c.Lie = true }); err != nil {
		return err
	}
	if _, err := d.llmRound(report, "prov2 lies"); err != nil {
		return err
	}
	report.Liar = liar.acct.addr
	pv, err := d.c.Provider(d.ctx, liar.acct.addr)
	if err != nil {
		return err
	}
	report.LiarSlashed = pv.Tombstoned
	if !pv.Tombstoned {
		return errors.New("the lying provider was not slashed")
	}
	fmt.Fprintf(d.w, "prov2 is tombstoned for fraud: reputation %d/1000, bonded %s\n", pv.Score, types.FormatAmount(pv.Bonded))
	return nil
}

// llmRound runs alice's storyJob as a round called title: the chain's
// events and the streamed text as they come, then the verified text, the
// money and the balances. The result is appended to report.Rounds.
func (d *devnet) llmRound(report *Report, title string) (*agent.LLMResult, error) {
	w, job := d.w, d.storyJob()
	n := d.beginRound(title)
	fmt.Fprintf(w, "alice: ogpu job run --prompt %q --max-tokens %d --redundancy 2 --max-price 5ogpu\n", job.Prompt, job.MaxTokens)
	watch, err := d.watchAudit(d.accts[0].addr)
	if err != nil {
		return nil, err
	}
	res, err := d.runLLM(job)
	watch.wait(res)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "verified text (%s, result %x...): %q\n", res.Outcome, res.Result[:6], res.Text)
	if res.Overruled {
		fmt.Fprintf(w, "(the streamed text came from %s, whose result was overruled)\n", d.name(res.StreamedFrom))
	}
	fmt.Fprintf(w, "job %d: providers paid %s, alice refunded %s, compensated %s, validator fee %s; %d blocks from post to payment, %s\n",
		res.Job, types.FormatAmount(res.Paid), types.FormatAmount(res.Refunded), types.FormatAmount(res.Compensated),
		types.FormatAmount(res.ValidatorFee), res.Completed-res.Posted, res.Elapsed.Round(time.Millisecond))
	report.Rounds = append(report.Rounds, res)
	return res, d.printBalances(fmt.Sprintf("after round %d", n))
}

// runLLM runs alice's job, printing the chain's events and the streamed
// text as they come. The result is RunLLM's, also with an error (a job
// that ended without a verified result still says how it ended).
func (d *devnet) runLLM(job agent.LLMJob) (*agent.LLMResult, error) {
	w, names := d.w, d.names()
	var streaming atomic.Bool // the stream and the chain events come from different goroutines
	return d.client.RunLLM(d.ctx, job, func(f string, a ...any) {
		line := "-> " + names.Replace(fmt.Sprintf(f, a...))
		if streaming.Swap(false) {
			line = "\n" + line
		}
		fmt.Fprintln(w, line)
	}, func(piece string) {
		if !streaming.Swap(true) {
			piece = "-> streamed from the first winner: " + job.Prompt + piece
		}
		fmt.Fprint(w, piece)
	})
}
