package devnet

import (
	"fmt"
	"time"

	"github.com/ogpu-network/ogpu/he"
	"github.com/ogpu-network/ogpu/he/example"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/types"
)

// pipelineRound trains the example classifier, encrypts one test example
// under a fresh CKKS key, runs the 3-stage model as an encrypted pipeline
// job on prov1 and prov3 and prints the decrypted result next to the
// plaintext model's.
func (d *devnet) pipelineRound(report *Report) error {
	ctx, w, names := d.ctx, d.w, d.names()
	n := d.beginRound("an encrypted pipeline job (CKKS): 3 stages, each on 2 providers that never see the data")
	fmt.Fprintln(w, "alice: ogpu model train-example --out model.json")
	t0 := time.Now()
	m, tr, err := example.Train(example.Options{Seed: 1})
	if err != nil {
		return err
	}
	mh, err := m.Hash()
	if err != nil {
		return err
	}
	p, err := he.NewParams(m.Preset)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "-> trained %q in %s: %d stages on preset %s (uses %d of its %d levels), sha256 %x...; plaintext accuracy %.1f%% (train) %.1f%% (test), a linear model gets %.1f%%\n",
		m.Name, time.Since(t0).Round(time.Millisecond), len(m.Stages), m.Preset, p.Depth()-m.InputLevel(p, len(m.Stages)),
		p.Depth(), mh[:6], 100*tr.TrainAccuracy, 100*tr.TestAccuracy, 100*tr.LinearBaseline)
	fmt.Fprintf(w, "alice: ogpu he keygen --preset %s --log-slots %d\n", m.Preset, m.LogSlots)
	t0 = time.Now()
	sk, ek, err := he.GenerateKeys(m.Preset, m.LogSlots)
	if err != nil {
		return err
	}
	ekb, err := ek.Marshal()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "-> key %s in %s; the secret key stays with alice, the evaluation keys (%.1f MB: relinearization + %d rotations) go to the providers\n",
		sk.ID, time.Since(t0).Round(time.Millisecond), float64(len(ekb))/1e6, len(he.Rotations(ek.Params, m.LogSlots)))
	// The first test example the model gets right (the demo shows the
	// encrypted run agreeing with the plaintext one, not the model's
	// mistakes; the test accuracy above says how often it errs).
	k := 0
	for i := range tr.Test.X {
		if out, err := m.Forward(tr.Test.X[i]); err == nil && example.Argmax(out) == tr.Test.Y[i] {
			k = i
			break
		}
	}
	x, label := tr.Test.X[k], tr.Test.Y[k]
	fmt.Fprintf(w, "alice: ogpu job run --kind pipeline --model model.json --input x.json   (x = test example %d, true class %d %s)\n", k, label, example.Labels[label])
	job := agent.PipelineJob{Model: m, Key: sk, EvalKeys: ekb, Input: x, Redundancy: 2, MaxPrice: types.OGPU(1),
		Req:     market.Requirements{MinStake: types.OGPU(100)},
		Windows: market.Windows{Bid: 4, Reveal: 3, Execute: 120, Verify: 10}}
	res, err := d.client.RunPipeline(ctx, job, func(f string, a ...any) {
		fmt.Fprintln(w, "-> "+names.Replace(fmt.Sprintf(f, a...)))
	})
	if err != nil {
		return err
	}
	plain, err := m.Forward(x)
	if err != nil {
		return err
	}
	report.Pipeline, report.Plaintext = res, plain
	got, want := example.Argmax(res.Output), example.Argmax(plain)
	maxErr := example.MaxAbsDiff(plain, res.Output)
	fmt.Fprintf(w, "decrypted by alice: %s → class %d (%s)\n", example.FormatVector(res.Output), got, example.Labels[got])
	fmt.Fprintf(w, "plaintext model:    %s → class %d (%s); max difference %.2g; true class %d\n", example.FormatVector(plain), want, example.Labels[want], maxErr, label)
	fmt.Fprintf(w, "job %d: providers paid %s, alice refunded %s, validator fee %s; %d blocks from post to payment, %s\n",
		res.Job, types.FormatAmount(res.Paid), types.FormatAmount(res.Refunded), types.FormatAmount(res.ValidatorFee),
		res.Completed-res.Posted, res.Elapsed.Round(time.Millisecond))
	if got != want {
		return fmt.Errorf("the decrypted prediction %d differs from the plaintext one %d", got, want)
	}
	// Let the providers' last transactions land before the agents stop.
	if err := d.c.WaitHeight(ctx, res.Completed+2); err != nil {
		return err
	}
	return d.printBalances(fmt.Sprintf("after round %d", n))
}
