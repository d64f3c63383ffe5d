package train

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ogpu-network/ogpu/runtime/llm"
)

// Bad parameters are refused before any worker starts, each with an error
// that says what is wrong; those due to the dataset are ErrBadInput (the
// client's fault, never the provider's).
func TestValidateRefuses(t *testing.T) {
	ok := params(t, 4, 1)
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		edit  func(*Params)
		want  string
		input bool // the job's input is at fault (ErrBadInput)
	}{
		{"all tensors", func(p *Params) { p.Trainable = SetAll }, "#24305", false},
		{"unknown set", func(p *Params) { p.Trainable = "attn" }, "#24305", false},
		{"no set", func(p *Params) { p.Trainable = "" }, "no trainable set", false},
		{"n_ctx not a multiple of 32", func(p *Params) { p.NCtx = 48 }, "multiple of 32", false},
		{"n_ctx 32 (llama.cpp makes n_batch 64)", func(p *Params) { p.NCtx = 32; p.Stride = 16 }, "64..", false},
		{"n_ctx too large", func(p *Params) { p.NCtx = MaxNCtx + 32 }, "multiple of 32", false},
		{"empty dataset", func(p *Params) { p.Data = nil }, "empty", true},
		{"dataset too large", func(p *Params) { p.Data = make([]byte, MaxDataBytes+1) }, "shorten", true},
		{"not UTF-8", func(p *Params) { p.Data = []byte("Once upon a \xff time") }, "UTF-8", true},
		{"no epochs", func(p *Params) { p.Epochs = 0 }, "epochs", false},
		{"zero learning rate", func(p *Params) { p.LRMicro = 0 }, "lr_micro", false},
		{"learning rate above 1", func(p *Params) { p.LRMicro = MaxLRMicro + 1 }, "lr_micro", false},
		{"stride 0", func(p *Params) { p.Stride = 0 }, "stride", false},
		{"stride above n_ctx", func(p *Params) { p.Stride = 65 }, "stride", false},
		{"no threads", func(p *Params) { p.Threads = 0 }, "threads", false},
		{"negative validation", func(p *Params) { p.Validation = -1 }, "validation", false},
		{"no model", func(p *Params) { p.Model = "" }, "model", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := ok
			c.edit(&p)
			err := p.Validate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error mentioning %q", err, c.want)
			}
			if errors.Is(err, ErrBadInput) != c.input {
				t.Fatalf("%v: ErrBadInput %v, want %v", err, !c.input, c.input)
			}
			dir := t.TempDir()
			if _, err := Run(context.Background(), p, dir, nil); err == nil || err.Error() != p.Validate().Error() {
				t.Fatalf("Run: %v", err)
			}
		})
	}
	if err := (Params{Trainable: SetAll}).Validate(); err == nil {
		t.Fatal("empty params accepted")
	}
	p := ok
	p.Trainable = SetAll
	if !errors.Is(p.Validate(), ErrUnsupportedSet) {
		t.Fatal("the all set is not ErrUnsupportedSet")
	}
}

// A model whose head is tied to the embeddings, or whose head is not F32,
// is refused by the tensor check (stories260K is untied F32: accepted).
func TestCheckModelRefuses(t *testing.T) {
	path := modelPath(t)
	if err := CheckModel(path, SetHead); err != nil {
		t.Fatal(err)
	}
	ts, err := llm.ListTensors(path)
	if err != nil {
		t.Fatal(err)
	}
	names, _ := TrainedTensors(SetHead)
	var tied, quant []llm.TensorInfo
	for _, ti := range ts {
		if ti.Name != "output.weight" {
			tied = append(tied, ti)
		}
		if ti.Name == "output_norm.weight" {
			ti.Type = 1 // F16
		}
		quant = append(quant, ti)
	}
	if err := checkTensors(tied, names); err == nil || !strings.Contains(err.Error(), "ties its output") || !errors.Is(err, ErrBadInput) {
		t.Fatalf("tied model: %v", err)
	}
	if err := checkTensors(quant, names); err == nil || !strings.Contains(err.Error(), "not F32") {
		t.Fatalf("F16 head: %v", err)
	}
	if err := CheckModel(t.TempDir()+"/missing.gguf", SetHead); err == nil {
		t.Fatal("a missing model passed")
	}
}

// A dataset that tokenizes to less than one datapoint, or that leaves
// nothing to train after validation, is refused by the worker with a clear
// error, not a crash, and the error is still ErrBadInput in the parent.
func TestShortDatasetRefused(t *testing.T) {
	p := params(t, 1, 1)
	p.Data = []byte("Once upon a time there was a dragon.")
	_, err := Run(context.Background(), p, t.TempDir(), nil)
	if err == nil || !strings.Contains(err.Error(), "shorter than one datapoint") || !errors.Is(err, ErrBadInput) {
		t.Fatalf("short dataset: %v", err)
	}
	p = params(t, 2, 1)
	p.Validation = 100
	_, err = Run(context.Background(), p, t.TempDir(), nil)
	if err == nil || !strings.Contains(err.Error(), "none is left to train") || !errors.Is(err, ErrBadInput) {
		t.Fatalf("all validation: %v", err)
	}
}

// A worker that aborts (as every GGML_ASSERT does), or that hits a real
// GGML_ASSERT on a label outside the vocabulary, is reported as an error
// naming its exit and its log; the test process survives.
func TestWorkerCrashIsAnError(t *testing.T) {
	p := params(t, 2, 1)
	for _, c := range []struct{ mode, want string }{
		{"abort", "SIGABRT"},
		{"label", "GGML_ASSERT"},
	} {
		_, err := Run(context.Background(), p, t.TempDir(), &Options{Env: []string{crashEnv + "=" + c.mode}})
		if err == nil || !strings.Contains(err.Error(), "training worker died") || !strings.Contains(err.Error(), c.want) || errors.Is(err, ErrBadInput) {
			t.Fatalf("crash %s: %v", c.mode, err)
		}
		t.Logf("%s: %v", c.mode, err)
	}
}

// Cancelling the context kills the worker and Run returns at once.
func TestCancelKillsWorker(t *testing.T) {
	p := params(t, 8, 50)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	steps := 0
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, p, t.TempDir(), &Options{Progress: func(pr Progress) {
			if steps++; steps == 2 {
				cancel()
			}
		}})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled run: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}
