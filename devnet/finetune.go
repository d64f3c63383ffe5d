package devnet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/ogpu-network/ogpu/finetune"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/node/pricing"
	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/types"
)

// FinetuneReport is round 10: alice fine-tunes the providers' model on a
// text she wrote, then again with a provider that perturbs one step.
type FinetuneReport struct {
	// Agreed is the job the two providers agreed on; Before and After the
	// base and the fine-tuned model's greedy continuation of FinetunePrompt.
	Agreed        *agent.FinetuneResult
	Before, After string
	// Liar is the job with prov9 perturbing step LieAt; Game its
	// step-bisection game as the chain ended it.
	Liar        *agent.FinetuneResult
	LieAt       uint64
	Game        *finetune.Game
	LiarSlashed bool
}

// finetuneBidBlocks is the fine-tune jobs' bid window (the default is 5).
const finetuneBidBlocks = 10

// FinetunePrompt is the prompt alice tries the fine-tuned model with.
const FinetunePrompt = "Once upon a time, there was a"

// finetuneLieBack is how many steps before the last one prov9 perturbs
// in the second job: the liar trains on from its perturbed weights one
// step per worker (ftwork.RunPerturbed), so a late step keeps it within
// the commit window; the game finds any step alike.
const finetuneLieBack = 6

// finetuneText is alice's dataset: short stories with a phrase the model
// has never seen.
func finetuneText() []byte {
	names := []string{"Lily", "Tom", "Sue", "Ben"}
	var b strings.Builder
	for i := range 8 {
		n := names[i%len(names)]
		b.WriteString("Once upon a time, there was a purple dragon named Ziggy. " + n + " met Ziggy in the park. Ziggy smiled and said, \"I love blue pancakes!\" " + n + " laughed and they were happy.\n")
	}
	return []byte(b.String())
}

// finetuneRound fine-tunes the model twice: prov8 and prov9 agree and
// alice generates with the model; then prov9, restarted as a liar, loses
// the step-bisection game, the validator re-executing one step.
func (d *devnet) finetuneRound(report *Report) error {
	w := d.w
	d.beginRound("fine-tuning: two providers train alice's text, then one lies about a step")
	fmt.Fprintln(w, "prov8 and prov9 start offering fine-tune jobs on the model (the LM head, in this build's training class), 200ogpu bonded each")
	var trainers [2]*provider
	for i := range trainers {
		p, err := d.trainingProvider(d.accts[10+i])
		if err != nil {
			return err
		}
		trainers[i] = p
	}
	data := finetuneText()
	fmt.Fprintf(w, "alice writes %d bytes of stories about \"a purple dragon named Ziggy\"\n", len(data))
	fmt.Fprintf(w, "alice: ogpu job run --kind finetune --model %s --data stories.txt --epochs 3 --stride 16 --redundancy 2 --max-price 5ogpu --bid-blocks %d\n", "stories260K.gguf", finetuneBidBlocks)
	fmt.Fprintf(w, "(a fine-tune stage with fewer than 2 trainers is refunded, not paid as agreed: fine-tune audits are not built; both trainers' agents follow the chain before alice posts, and she gives them %d blocks to bid)\n", finetuneBidBlocks)
	rep := &FinetuneReport{}
	report.Finetune = rep
	var err error
	if rep.Agreed, err = d.finetuneJob(data); err != nil {
		return err
	}
	if rep.Agreed.Outcome != "agreed" {
		return fmt.Errorf("the honest fine-tune job settled %s, want agreed", rep.Agreed.Outcome)
	}
	if rep.Before, err = greedy(d.ctx, d.modelPath, d.llm); err != nil {
		return err
	}
	if rep.After, err = greedy(d.ctx, rep.Agreed.Model, d.llm); err != nil {
		return err
	}
	fmt.Fprintf(w, "the base model:       %s%s\n", FinetunePrompt, rep.Before)
	fmt.Fprintf(w, "the fine-tuned model: %s%s\n", FinetunePrompt, rep.After)
	if !strings.Contains(rep.After, "Ziggy") {
		return errors.New("the fine-tuned model did not learn alice's phrase")
	}

	liar := trainers[1]
	rep.LieAt = uint64(rep.Agreed.Plan.Steps) - finetuneLieBack
	fmt.Fprintf(w, "\nprov9 restarts with the devnet-only --devnet-finetune-lie %d: it perturbs the weights after that step (of %d) and trains on\n", rep.LieAt, rep.Agreed.Plan.Steps)
	d.stopProvider(liar)
	if err := d.startProvider(liar, func(c *agent.ProviderConfig) { c.Pipeline, c.FinetuneLieAt = false, rep.LieAt }); err != nil {
		return err
	}
	fmt.Fprintf(w, "alice posts the same job again\n")
	if rep.Liar, err = d.finetuneJob(data); err != nil {
		return err
	}
	v, err := d.c.Job(d.ctx, rep.Liar.Job)
	if err != nil {
		return err
	}
	if len(v.Tasks) == 0 || len(v.Tasks[0].Games) != 1 {
		return fmt.Errorf("job %d settled %s without one game", rep.Liar.Job, rep.Liar.Outcome)
	}
	g := v.Tasks[0].Games[0]
	rep.Game = g
	fmt.Fprintf(w, "the game of job %d: %d rounds of bisection over %d steps located step %d (from the agreed checkpoint after step %d); outcome %s\n",
		rep.Liar.Job, g.Round, g.Steps, g.Hi, g.Lo, g.Outcome)
	pv, err := d.c.Provider(d.ctx, liar.acct.addr)
	if err != nil {
		return err
	}
	rep.LiarSlashed = pv.Tombstoned
	if !pv.Tombstoned || g.Hi != rep.LieAt {
		return fmt.Errorf("prov9 lied at step %d: the game ended at step %d, prov9 tombstoned %v", rep.LieAt, g.Hi, pv.Tombstoned)
	}
	fmt.Fprintf(w, "prov9 is tombstoned for fraud: bonded %s; prov8 was paid and alice got a model that hashes to the honest final %x...\n",
		types.FormatAmount(pv.Bonded), rep.Liar.Final[:6])
	return d.printBalances(fmt.Sprintf("after round %d", d.round))
}

// trainingProvider starts a provider for acct that serves the model and
// offers fine-tune jobs, priced below prov1 so that it wins them.
func (d *devnet) trainingProvider(acct account) (*provider, error) {
	p, err := d.newProvider(acct, pricing.PerToken{Base: milliOGPU(50)}, true)
	if err != nil {
		return nil, err
	}
	return p, d.startProvider(p, func(c *agent.ProviderConfig) { c.Pipeline = false })
}

// finetuneJob runs alice's fine-tune job on data, printing its events and
// the providers' progress.
func (d *devnet) finetuneJob(data []byte) (*agent.FinetuneResult, error) {
	w, names := d.w, d.names()
	var bar atomic.Bool
	res, err := d.client.RunFinetune(d.ctx, agent.FinetuneJob{
		Base: d.modelPath, Data: data, Epochs: 3, Stride: 16, Redundancy: 2, MaxPrice: types.OGPU(5), OutDir: d.home,
		// Twice the default bid window: a fine-tune stage with one trainer
		// is refunded (fine-tune audits are not built), so both trainers
		// must get their sealed bids in, on a busy machine too.
		Windows: market.Windows{Bid: finetuneBidBlocks},
	}, func(f string, a ...any) {
		line := "-> " + names.Replace(fmt.Sprintf(f, a...))
		if bar.Swap(false) {
			line = "\n" + line
		}
		fmt.Fprintln(w, line)
	}, func(line string) {
		bar.Store(false)
		fmt.Fprintln(w, "   "+strings.TrimSpace(line))
	})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "job %d (%s, %d steps in class %s): providers paid %s, alice refunded %s, compensated %s; model %s verified against final %x...; %d blocks from post to payment\n",
		res.Job, res.Outcome, res.Plan.Steps, res.Class, types.FormatAmount(res.Paid), types.FormatAmount(res.Refunded),
		types.FormatAmount(res.Compensated), res.Model, res.Final[:6], res.Completed-res.Posted)
	return res, nil
}

// greedy is the model at path's greedy continuation of FinetunePrompt.
func greedy(ctx context.Context, path string, o llm.Options) (string, error) {
	m, err := llm.Load(path, o)
	if err != nil {
		return "", err
	}
	defer m.Close()
	out, err := m.Generate(ctx, llm.Request{Prompt: FinetunePrompt, MaxTokens: 16}, nil)
	if err != nil {
		return "", err
	}
	return out.Text, nil
}
