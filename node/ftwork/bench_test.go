package ftwork

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ogpu-network/ogpu/runtime/llm/train"
	"github.com/ogpu-network/ogpu/types"
)

// BenchmarkCheckStepVsRun compares, on one job (the 12-story text of
// runtime/llm/train's benchmark: n_ctx 64, stride 32, 3 epochs, 93
// steps), a provider's whole Run (worker, 93 steps, checkpoints every 8th
// step, model written and checked, hash list persisted), a validator's
// CheckStep (the checkpoint's hash checked, one step in a worker), and a
// provider's worst-case recomputation of a checkpoint it did not keep
// (Checkpoint of step 8m+7: 7 chained one-step workers):
//
//	go test -run '^$' -bench CheckStepVsRun -benchtime 3x ./node/ftwork/
func BenchmarkCheckStepVsRun(b *testing.B) {
	p := jobParams(b, 12, 3)
	p.Stride = 32
	ctx := context.Background()
	w, err := Run(ctx, b.TempDir(), p, 8, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("run", func(b *testing.B) {
		for b.Loop() {
			if _, err := Run(ctx, b.TempDir(), p, 8, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(w.Steps()), "steps")
	})
	const lo = 40 // kept
	ckpt, err := w.Checkpoint(ctx, lo)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("checkstep", func(b *testing.B) {
		for b.Loop() {
			h, err := CheckStep(ctx, p, ckpt, lo, w.Hashes[lo])
			if err != nil || h != w.Hashes[lo+1] {
				b.Fatalf("h* %x (%v), want %x", h, err, w.Hashes[lo+1])
			}
		}
	})
	b.Run("recompute-7", func(b *testing.B) {
		const j = lo + 7
		for b.Loop() {
			os.Remove(filepath.Join(w.Dir, train.CheckpointFile(j)))
			path, err := w.Checkpoint(ctx, j)
			if err != nil {
				b.Fatal(err)
			}
			if h, _ := train.HashCheckpoint(path, p.Trainable); types.Hash(h) != w.Hashes[j] {
				b.Fatal("recomputed a wrong checkpoint")
			}
		}
	})
}
