package train

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ogpu-network/ogpu/internal/workerlog"
	"github.com/ogpu-network/ogpu/runtime/llm"
)

// Env is the variable that makes this executable a training worker.
const Env = "OGPU_TRAIN_WORKER"

// crashEnv is a test hook: "abort" makes the worker abort() after loading,
// "label" feeds llama.cpp a label outside the vocabulary at step 1, which
// its GGML_ASSERT turns into an abort.
const crashEnv = "OGPU_TRAIN_CRASH"

// ModelFile is the name of the fine-tuned model Run writes in its folder;
// CheckpointFile(k) of a checkpoint after step k.
const ModelFile = "model.gguf"

// CheckpointFile is the file name of the checkpoint after step k.
func CheckpointFile(k int) string { return "step-" + strconv.Itoa(k) + ".gguf" }

// Options are how a run is carried out; none changes its result.
type Options struct {
	// Checkpoints are steps after which the trained tensors are saved in
	// the output folder as CheckpointFile(k) (WriteCheckpoint; 0 saves the
	// base model's).
	Checkpoints []int
	// Progress, if not nil, sees every step and every epoch as it ends.
	Progress func(Progress)
	// Exe is the executable to start (default os.Executable()); it must
	// call MaybeWorker first.
	Exe string
	// Env is added to the worker's environment (tests).
	Env []string
	// Save, if set, is where RunStep and RunStepTokens write the trained
	// tensors after the step (a checkpoint file, WriteCheckpoint): what a
	// provider that keeps every k-th checkpoint recomputes the others
	// with. Run ignores it.
	Save string
}

// Progress is one step's or one epoch's end.
type Progress struct {
	Step, Steps int     // 1..Steps for a step; 0 for an epoch's end
	Epoch       int     // 1-based
	Loss        float64 // the step's training loss (before its update), or the epoch's mean
	ValLoss     float64 // at an epoch's end, the validation loss (0 without validation)
	Hash        Hash    // after the step
}

// Result is a finished run.
type Result struct {
	Plan
	Class  string
	Hashes []Hash // Hashes[k] after step k; Hashes[0] is the base model's
	Final  Hash   // Hashes[Steps]
	Model  string // the fine-tuned GGUF
	// EpochLoss is the mean training loss of each epoch; ValLoss the
	// validation loss before training and after each epoch (empty
	// without validation).
	EpochLoss []float64
	ValLoss   []float64
	Sample    string // a short greedy generation from the saved model (runtime/llm)
}

// StepResult is one step re-executed from a checkpoint.
type StepResult struct {
	Before Hash // the checkpoint's (step k−1)
	After  Hash // after step k
	Loss   float64
}

// request is what the parent sends the worker on stdin.
type request struct {
	Op          string  `json:"op"` // "run" or "step"
	Params      Params  `json:"params"`
	Dir         string  `json:"dir,omitempty"`
	Checkpoints []int   `json:"checkpoints,omitempty"`
	Checkpoint  string  `json:"checkpoint,omitempty"`
	K           int     `json:"k,omitempty"`
	Tokens      []int32 `json:"tokens,omitempty"` // step k's datapoint, instead of the dataset
	Save        string  `json:"save,omitempty"`   // "step": write the checkpoint after the step here
}

// message is one line the worker writes on its protocol pipe.
type message struct {
	Type   string      `json:"type"` // "plan", "step", "epoch", "result", "error"
	Plan   *Plan       `json:"plan,omitempty"`
	Step   int         `json:"step,omitempty"`
	Epoch  int         `json:"epoch,omitempty"`
	Loss   float64     `json:"loss,omitempty"`
	Val    float64     `json:"val,omitempty"`
	Hash   *Hash       `json:"hash,omitempty"`
	Before *Hash       `json:"before,omitempty"`
	Result *runSummary `json:"result,omitempty"`
	Error  string      `json:"error,omitempty"`
	Input  bool        `json:"input,omitempty"` // the error is ErrBadInput
}

type runSummary struct {
	Model     string    `json:"model"`
	ValLoss   []float64 `json:"val_loss,omitempty"`
	EpochLoss []float64 `json:"epoch_loss"`
	Sample    string    `json:"sample"`
}

// Run fine-tunes p.Model on p.Data in a worker process and writes the
// fine-tuned model to dir/ModelFile. A crash of llama.cpp in the worker
// becomes an error naming the exit status and the worker's last log lines;
// cancelling ctx kills the worker.
func Run(ctx context.Context, p Params, dir string, o *Options) (*Result, error) {
	if o == nil {
		o = &Options{}
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := CheckModel(p.Model, p.Trainable); err != nil {
		return nil, err
	}
	for _, k := range o.Checkpoints {
		if k < 0 {
			return nil, fmt.Errorf("checkpoint step %d: want >= 0", k)
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create the output folder: %w", err)
	}
	res := &Result{Class: p.Class()}
	err = supervise(ctx, o, request{Op: "run", Params: p, Dir: abs, Checkpoints: o.Checkpoints}, func(m message) error {
		switch m.Type {
		case "plan":
			if m.Plan == nil || m.Hash == nil || m.Plan.Steps < 1 || m.Plan.Steps > MaxSteps || res.Hashes != nil {
				return errors.New("the training worker sent a malformed plan")
			}
			res.Plan = *m.Plan
			res.Hashes = make([]Hash, 0, res.Steps+1)
			res.Hashes = append(res.Hashes, *m.Hash)
		case "step":
			if m.Step != len(res.Hashes) || m.Hash == nil {
				return fmt.Errorf("the worker reported step %d after %d", m.Step, len(res.Hashes)-1)
			}
			res.Hashes = append(res.Hashes, *m.Hash)
			if o.Progress != nil {
				o.Progress(Progress{Step: m.Step, Steps: res.Steps, Epoch: m.Epoch, Loss: m.Loss, Hash: *m.Hash})
			}
		case "epoch":
			if o.Progress != nil {
				o.Progress(Progress{Steps: res.Steps, Epoch: m.Epoch, Loss: m.Loss, ValLoss: m.Val})
			}
		case "result":
			if m.Result == nil {
				return errors.New("the training worker sent an empty result")
			}
			res.Model, res.EpochLoss, res.ValLoss, res.Sample = m.Result.Model, m.Result.EpochLoss, m.Result.ValLoss, m.Result.Sample
			return errDone
		default:
			return fmt.Errorf("the worker sent an unexpected %q", m.Type)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(res.Hashes) != res.Steps+1 {
		return nil, fmt.Errorf("the worker reported %d checkpoint hashes for %d steps", len(res.Hashes), res.Steps)
	}
	res.Final = res.Hashes[res.Steps]
	return res, nil
}

// writeFileAtomic writes the checkpoint ts to path through a temporary
// file, so that a killed worker leaves no half-written checkpoint.
func writeFileAtomic(path string, ts []Tensor) error {
	tmp := path + ".tmp"
	if err := WriteCheckpoint(tmp, ts); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// RunStep re-executes step k (1-based) of the job p from checkpoint, a
// GGUF holding the trained tensors after step k−1 (a checkpoint file, a
// saved fine-tune, or the base model for k = 1); the other tensors come
// from p.Model. It is what a validator runs to settle a dispute over step k.
// With o.Save set, the trained tensors after the step are written there.
func RunStep(ctx context.Context, p Params, checkpoint string, k int, o *Options) (*StepResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return runStep(ctx, p, request{Op: "step", Params: p, Checkpoint: checkpoint, K: k}, o)
}

// RunStepTokens is RunStep given step k's datapoint (its n_ctx+1 tokens,
// StepTokens) instead of the dataset: p.Data may be empty. k only labels
// the step.
func RunStepTokens(ctx context.Context, p Params, checkpoint string, k int, tokens []int32, o *Options) (*StepResult, error) {
	if err := p.validateStep(); err != nil {
		return nil, err
	}
	if len(tokens) != p.NCtx+1 {
		return nil, badInput("a datapoint is n_ctx+1 = %d tokens, got %d", p.NCtx+1, len(tokens))
	}
	p.Data = nil
	return runStep(ctx, p, request{Op: "step", Params: p, Checkpoint: checkpoint, K: k, Tokens: tokens}, o)
}

func runStep(ctx context.Context, p Params, req request, o *Options) (*StepResult, error) {
	if o == nil {
		o = &Options{}
	}
	if err := CheckModel(p.Model, p.Trainable); err != nil {
		return nil, err
	}
	k := req.K
	if k < 1 {
		return nil, fmt.Errorf("step %d: steps count from 1", k)
	}
	if o.Save != "" {
		abs, err := filepath.Abs(o.Save)
		if err != nil {
			return nil, err
		}
		req.Save = abs
	}
	if _, err := ReadCheckpoint(req.Checkpoint, p.Trainable); err != nil {
		return nil, fmt.Errorf("bad checkpoint: %w", err)
	}
	var out *StepResult
	err := supervise(ctx, o, req, func(m message) error {
		if m.Type != "step" || m.Hash == nil || m.Before == nil || m.Step != k {
			return fmt.Errorf("the worker sent an unexpected %q for step %d", m.Type, m.Step)
		}
		out = &StepResult{Before: *m.Before, After: *m.Hash, Loss: m.Loss}
		return errDone
	})
	return out, err
}

var errDone = errors.New("done")

// supervise runs a worker on req and hands each message to handle until
// it returns errDone; a worker error message, a crash or ctx ends it.
func supervise(ctx context.Context, o *Options, req request, handle func(message) error) error {
	exe := o.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return fmt.Errorf("cannot find this executable to start a training worker: %w", err)
		}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(append(os.Environ(), Env+"=1"), o.Env...)
	cmd.Stdin = bytes.NewReader(body)
	logs := &workerlog.Tail{Max: 16 << 10}
	cmd.Stderr = logs
	cmd.WaitDelay = 5 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cannot start a training worker (%s): %w", exe, err)
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var herr error
	for herr == nil && sc.Scan() {
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			herr = fmt.Errorf("the training worker sent a malformed line: %w", err)
			break
		}
		if m.Type == "error" {
			if herr = errors.New(m.Error); m.Input {
				herr = &inputError{msg: m.Error}
			}
			break
		}
		herr = handle(m)
	}
	if herr != nil && !errors.Is(herr, errDone) {
		cmd.Process.Kill()
	}
	io.Copy(io.Discard, stdout)
	werr := cmd.Wait()
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("training stopped: %w", ctx.Err())
	case errors.Is(herr, errDone):
		return nil
	case herr != nil:
		return herr
	case werr != nil:
		return fmt.Errorf("the training worker died (%v); its log says: %s", werr, logs)
	}
	return fmt.Errorf("the training worker exited without a result; its log says: %s", logs)
}

// MaybeWorker makes this process a training worker when Env is set: it
// reads one request on stdin, writes its messages on stdout and exits.
// Call it first in main (and in TestMain of packages that train).
func MaybeWorker() {
	if os.Getenv(Env) != "1" {
		return
	}
	// The protocol gets its own descriptor; whatever C code prints on
	// stdout goes to stderr.
	fd, err := unix.Dup(1)
	if err == nil {
		err = unix.Dup2(2, 1)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "training worker: cannot set up its pipes:", err)
		os.Exit(1)
	}
	out := bufio.NewWriter(os.NewFile(uintptr(fd), "protocol"))
	send := func(m message) {
		b, _ := json.Marshal(m)
		out.Write(append(b, '\n'))
		out.Flush()
	}
	var req request
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		send(message{Type: "error", Error: "training worker: bad request: " + err.Error()})
		os.Exit(1)
	}
	if err := serve(req, send); err != nil {
		send(message{Type: "error", Error: err.Error(), Input: errors.Is(err, ErrBadInput)})
		os.Exit(1)
	}
	os.Exit(0)
}

func serve(req request, send func(message)) error {
	p := req.Params
	fromTokens := req.Op == "step" && req.Tokens != nil
	if fromTokens {
		if err := p.validateStep(); err != nil {
			return err
		}
	} else if err := p.Validate(); err != nil {
		return err
	}
	e, err := open(p)
	if err != nil {
		return err
	}
	defer e.close()
	mode := os.Getenv(crashEnv)
	if mode == "abort" {
		crash()
	}
	var dp cTokens
	var toks []int32
	var pl Plan
	if fromTokens {
		if dp, err = e.checkTokens(req.Tokens); err != nil {
			return err
		}
	} else {
		if toks, err = e.tokenize(); err != nil {
			return err
		}
		if pl, err = p.plan(len(toks)); err != nil {
			return err
		}
		dp = e.datapoints(toks, []int{0})
	}
	if err := e.capture(dp); err != nil {
		return err
	}
	switch {
	case req.Op == "step" && fromTokens:
		return serveStep(e, req, dp, send)
	case req.Op == "step":
		if req.K > pl.Steps {
			return fmt.Errorf("step %d: the job has %d steps", req.K, pl.Steps)
		}
		d, err := StepDatapoint(p.Seed, pl.Trained, req.K)
		if err != nil {
			return err
		}
		return serveStep(e, req, e.datapoints(toks, []int{d}), send)
	case req.Op == "run":
		return serveRun(e, req, pl, toks, mode, send)
	}
	return fmt.Errorf("training worker: unknown op %q", req.Op)
}

func serveStep(e *engine, req request, dp cTokens, send func(message)) error {
	ts, err := ReadCheckpoint(req.Checkpoint, e.p.Trainable)
	if err != nil {
		return fmt.Errorf("bad checkpoint: %w", err)
	}
	if err := e.set(ts); err != nil {
		return err
	}
	before, err := e.hash()
	if err != nil {
		return err
	}
	loss, err := e.step(dp)
	if err != nil {
		return err
	}
	out, err := e.tensors()
	if err != nil {
		return err
	}
	after, err := HashTensors(out)
	if err != nil {
		return err
	}
	if req.Save != "" {
		if err := writeFileAtomic(req.Save, out); err != nil {
			return fmt.Errorf("cannot write the checkpoint after step %d: %w", req.K, err)
		}
	}
	send(message{Type: "step", Step: req.K, Before: &before, Hash: &after, Loss: loss})
	return nil
}

func serveRun(e *engine, req request, pl Plan, toks []int32, mode string, send func(message)) error {
	p := e.p
	h0, err := e.hash()
	if err != nil {
		return err
	}
	send(message{Type: "plan", Plan: &pl, Hash: &h0})
	save := func(k int) error {
		if !slices.Contains(req.Checkpoints, k) {
			return nil
		}
		ts, err := e.tensors()
		if err != nil {
			return err
		}
		if err := WriteCheckpoint(filepath.Join(req.Dir, CheckpointFile(k)), ts); err != nil {
			return fmt.Errorf("cannot write the checkpoint after step %d: %w", k, err)
		}
		return nil
	}
	if err := save(0); err != nil {
		return err
	}
	var valIdx []int
	for i := pl.Trained; i < pl.Datapoints; i++ {
		valIdx = append(valIdx, i)
	}
	sum := runSummary{Model: filepath.Join(req.Dir, ModelFile)}
	validate := func() (float64, error) {
		if len(valIdx) == 0 {
			return 0, nil
		}
		v, err := e.eval(e.datapoints(toks, valIdx), len(valIdx))
		if err == nil {
			sum.ValLoss = append(sum.ValLoss, v)
		}
		return v, err
	}
	if _, err := validate(); err != nil {
		return err
	}
	k := 0
	for ep := range p.Epochs {
		var total float64
		for _, d := range Order(p.Seed, ep, pl.Trained) {
			k++
			dp := e.datapoints(toks, []int{d})
			if mode == "label" {
				dp[len(dp)-1] = 1 << 30
			}
			loss, err := e.step(dp)
			if err != nil {
				return fmt.Errorf("step %d: %w", k, err)
			}
			total += loss
			h, err := e.hash()
			if err != nil {
				return err
			}
			send(message{Type: "step", Step: k, Epoch: ep + 1, Loss: loss, Hash: &h})
			if err := save(k); err != nil {
				return err
			}
		}
		mean := total / float64(pl.Trained)
		sum.EpochLoss = append(sum.EpochLoss, mean)
		v, err := validate()
		if err != nil {
			return err
		}
		send(message{Type: "epoch", Epoch: ep + 1, Loss: mean, Val: v})
	}
	ts, err := e.tensors()
	if err != nil {
		return err
	}
	final, err := HashTensors(ts)
	if err != nil {
		return err
	}
	if err := WriteModel(p.Model, sum.Model, ts); err != nil {
		return err
	}
	// The saved file must hold exactly the trained tensors, and
	// runtime/llm must load it and generate from it.
	if got, err := HashCheckpoint(sum.Model, p.Trainable); err != nil {
		return fmt.Errorf("cannot read back the saved model: %w", err)
	} else if got != final {
		return fmt.Errorf("the saved model's trained tensors hash %s, the trained ones %s", got, final)
	}
	m, err := llm.Load(sum.Model, llm.Options{Threads: p.Threads, ContextSize: 2 * p.NCtx, BatchSize: p.NCtx})
	if err != nil {
		return fmt.Errorf("runtime/llm cannot load the fine-tuned model: %w", err)
	}
	defer m.Close()
	prompt := string(p.Data[:min(len(p.Data), 24)])
	prompt = strings.ToValidUTF8(prompt, "")
	out, err := m.Generate(context.Background(), llm.Request{Prompt: prompt, MaxTokens: 16}, nil)
	if err != nil {
		return fmt.Errorf("runtime/llm cannot generate with the fine-tuned model: %w", err)
	}
	sum.Sample = out.Text
	send(message{Type: "result", Result: &sum})
	return nil
}
