package train

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/ogpu-network/ogpu/runtime/llm"
)

// BenchmarkTrainStep measures one training step in process (fresh context,
// warm-up decode, llama_opt_init, one forward+backward+AdamW step, free),
// the checkpoint hash of the trained tensors, and as the anchor one
// inference decode of the same n_ctx tokens with runtime/llm, in the same
// run on the same machine:
//
//	go test -run '^$' -bench 'TrainStep' -benchtime 100x ./runtime/llm/train/
func BenchmarkTrainStep(b *testing.B) {
	p := params(b, 12, 1)
	e, err := open(p)
	if err != nil {
		b.Fatal(err)
	}
	defer e.close()
	toks, err := e.tokenize()
	if err != nil {
		b.Fatal(err)
	}
	dp := e.datapoints(toks, []int{0})
	if err := e.capture(dp); err != nil {
		b.Fatal(err)
	}
	b.Run("step", func(b *testing.B) {
		for b.Loop() {
			if _, err := e.step(dp); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(p.NCtx), "tokens/step")
	})
	b.Run("hash", func(b *testing.B) {
		for b.Loop() {
			if _, err := e.hash(); err != nil {
				b.Fatal(err)
			}
		}
		ts, _ := e.tensors()
		n := 0
		for _, t := range ts {
			n += len(t.Data)
		}
		b.ReportMetric(float64(n), "trained-bytes")
	})
	b.Run("anchor-decode", func(b *testing.B) {
		m, err := llm.Load(p.Model, llm.Options{Threads: p.Threads, ContextSize: 2 * p.NCtx, BatchSize: p.NCtx})
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		in := make([]int, p.NCtx)
		for i := range in {
			in[i] = int(toks[i])
		}
		for b.Loop() {
			if _, err := m.NextLogits(context.Background(), in); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkValidatorVsRun compares what a validator runs (a worker
// process: start, load, one step from a checkpoint, hash) with the whole
// job it settles (3 epochs of the 12-story dataset):
//
//	go test -run '^$' -bench 'ValidatorVsRun' -benchtime 3x ./runtime/llm/train/
func BenchmarkValidatorVsRun(b *testing.B) {
	p := params(b, 12, 3)
	dir := b.TempDir()
	res, err := Run(context.Background(), p, dir, &Options{Checkpoints: []int{20}})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("one-step", func(b *testing.B) {
		for b.Loop() {
			if _, err := RunStep(context.Background(), p, filepath.Join(dir, CheckpointFile(20)), 21, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("whole-run", func(b *testing.B) {
		for b.Loop() {
			if _, err := Run(context.Background(), p, b.TempDir(), nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(res.Steps), "steps")
	})
}
