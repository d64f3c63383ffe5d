// Package train fine-tunes a GGUF model on a text dataset with the pinned
// llama.cpp (ollama v0.9.6) through its public llama_opt_* API, so that
// every provider of a fine-tune job, and a validator re-running one step,
// compute the same bytes (shared/research/training.md).
//
// What is trained, and why only that: the pinned llama.cpp computes wrong
// gradients below the final norm (an in-place RMS_NORM_BACK, fixed upstream
// in llama.cpp #24305) and never zeroes its gradient accumulators. The LM
// head (output.weight, output_norm.weight) is above both defects, so the
// only trainable set is "head", on models whose output matrix is not tied to
// the embeddings (token_embd is never trained). Any other set is refused
// with an error naming the upstream fix; full fine-tuning is a parameter
// change once a maintained binding carries it.
//
// The step scheme ("fresh-context-1dp"): step k (1-based) creates a fresh
// llama_context on the current weights (model loaded without mmap, KV cache
// F32, flash attention off, CPU only), decodes one token (so that training uses the
// configured threads), runs llama_opt_init with a C param_filter selecting
// the trained tensors and one llama_opt_epoch over a one-datapoint dataset,
// and frees the context. The first AdamW step of a fresh optimizer is the
// stateless sign-descent step w -= lr·g/(|g|+eps): the weights alone are the
// checkpoint, and the accumulator defect cannot bite.
//
// Data: the dataset is tokenized with the model's tokenizer (one BOS at the
// start, special-token text not parsed). With T tokens, datapoint i (0-based)
// is tokens [i·stride, i·stride+n_ctx] (inputs the first n_ctx, labels the
// last n_ctx), for i < D = (T−n_ctx−1)/stride + 1 (every window that
// fits; llama.cpp's common_opt_dataset_init leaves out the last one). The
// last Validation datapoints are held out (evaluated, never trained); the
// first D−Validation are trained. Epoch e (0-based) orders them by a Fisher–Yates shuffle,
// i = n−1 down to 1: j = next() mod (i+1), swap(perm[i], perm[j]), where
// next is SplitMix64 (s += 0x9E3779B97F4A7C15; z = s; z = (z^(z>>30))·
// 0xBF58476D1CE4E5B9; z = (z^(z>>27))·0x94D049BB133111EB; z^(z>>31))
// started from s = seed ^ ((e+1)·0x9E3779B97F4A7C15), all mod 2^64. Step
// k = e·(D−Validation) + i + 1 trains datapoint perm_e[i]. This is the
// data-order algorithm "splitmix64-fy-v1" of the determinism class.
//
// Checkpoint hashes: h_k is the sha256 of the canonical bytes of the trained
// tensors after step k (see HashTensors), h_0 the base model's. They are
// computed from the tensors in memory, not from a file (llama.cpp's saver
// rewrites metadata); HashCheckpoint computes the same value from a GGUF.
//
// The fine-tuned model is the base file with the trained tensors' bytes
// replaced (WriteModel): llama.cpp's saver would write the training n_ctx
// as its context_length. A checkpoint file holds the trained tensors only
// (WriteCheckpoint).
//
// Training runs in a supervised child process: every GGML_ASSERT is an
// abort() that would take the node down. Run and RunStep start this
// executable again with OGPU_TRAIN_WORKER=1; mains (and TestMain of
// packages that train) call MaybeWorker first.
package train

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/ogpu-network/ogpu/runtime/llm"
)

// Bounds on a job's parameters (policy limits, not consensus rules: the
// chain keeps its own). They bound one step's work (n_ctx tokens through the
// model) and the number of steps.
const (
	MaxDataBytes = 16 << 20  // dataset text
	MaxSteps     = 1 << 20   // epochs × trained datapoints
	MaxEpochs    = 1000      //
	MaxLRMicro   = 1_000_000 // learning rate 1.0
	MinNCtx      = 64        // llama.cpp raises n_batch to at least 64 (GGML_KQ_MASK_PAD)
	MaxNCtx      = 4096      //
	MaxThreads   = 256       //
)

// Trainable sets.
const (
	SetHead = "head" // output.weight + output_norm.weight
	SetAll  = "all"  // refused until llama.cpp #24305 is in the binding
)

// Version names the training scheme of this package; it changes when
// anything that reaches the checkpoint hashes changes.
const Version = "ogpu-train-v1"

// DataOrder and StepScheme are the ids of the data-order algorithm and of
// the step scheme documented in the package comment.
const (
	DataOrder  = "splitmix64-fy-v1"
	StepScheme = "fresh-context-1dp"
)

// AdamW's constants for the one step each context makes (weight decay off).
const (
	adamBeta1 = 0.9
	adamBeta2 = 0.999
	adamEps   = 1e-8
)

// ErrUnsupportedSet is returned for a trainable set the pinned llama.cpp
// cannot train correctly.
var ErrUnsupportedSet = errors.New("trainable set not supported by the pinned llama.cpp")

// ErrBadInput marks an error caused by the job's input (the dataset or
// the base model), not by the provider: threats §3 rule 8 makes such input
// a validator-checkable flag, never a provider slash. Test with errors.Is;
// it survives the worker boundary.
var ErrBadInput = errors.New("invalid training input")

// inputError is an error for which errors.Is(err, ErrBadInput) holds.
type inputError struct{ msg string }

func (e *inputError) Error() string        { return e.msg }
func (e *inputError) Is(target error) bool { return target == ErrBadInput }

// badInput formats an inputError.
func badInput(format string, args ...any) error {
	return &inputError{msg: fmt.Sprintf(format, args...)}
}

// Params are a fine-tune job's parameters. All are fixed by the job; those
// that reach the hashes are in Class.
type Params struct {
	Model      string `json:"model"`      // base GGUF file
	Data       []byte `json:"data"`       // UTF-8 text
	Epochs     int    `json:"epochs"`     // passes over the trained datapoints
	LRMicro    uint32 `json:"lr_micro"`   // learning rate in millionths (3000 = 3e-3)
	NCtx       int    `json:"n_ctx"`      // tokens per datapoint = n_batch = n_ubatch; a multiple of 32
	Stride     int    `json:"stride"`     // tokens between datapoint starts, 1..n_ctx
	Seed       uint64 `json:"seed"`       // data order
	Trainable  string `json:"trainable"`  // "head"
	Threads    int    `json:"threads"`    // CPU threads (results do not depend on it)
	Validation int    `json:"validation"` // datapoints held out at the end and evaluated; 0 = none
}

// Validate checks p without touching llama.cpp or the model file; each
// error says what is wrong and what to do.
func (p Params) Validate() error {
	switch {
	case len(p.Data) == 0:
		return badInput("params: the dataset is empty: give the text to train on")
	case len(p.Data) > MaxDataBytes:
		return badInput("params: the dataset has %d bytes, more than %d: shorten it", len(p.Data), MaxDataBytes)
	case !utf8.Valid(p.Data):
		return badInput("params: the dataset is not valid UTF-8 text: convert it to UTF-8")
	}
	return p.validateStep()
}

// validateStep checks all of p but the dataset: what re-executing one
// step from its datapoint's tokens needs.
func (p Params) validateStep() error {
	switch {
	case p.Model == "":
		return errors.New("params: no base model file")
	case len(p.Data) > MaxDataBytes:
		return badInput("params: the dataset has %d bytes, more than %d: shorten it", len(p.Data), MaxDataBytes)
	case p.Epochs < 1 || p.Epochs > MaxEpochs:
		return fmt.Errorf("params: epochs %d: want 1..%d", p.Epochs, MaxEpochs)
	case p.LRMicro < 1 || p.LRMicro > MaxLRMicro:
		return fmt.Errorf("params: lr_micro %d: want 1..%d (the learning rate in millionths: 3000 is 3e-3)", p.LRMicro, MaxLRMicro)
	case p.NCtx < MinNCtx || p.NCtx > MaxNCtx || p.NCtx%32 != 0:
		return fmt.Errorf("params: n_ctx %d: want a multiple of 32 in %d..%d (llama.cpp pads the context to 32 tokens and raises n_batch to at least 64, and training needs n_ctx = n_batch = n_ubatch exactly)", p.NCtx, MinNCtx, MaxNCtx)
	case p.Stride < 1 || p.Stride > p.NCtx:
		return fmt.Errorf("params: stride %d: want 1..n_ctx (%d)", p.Stride, p.NCtx)
	case p.Threads < 1 || p.Threads > MaxThreads:
		return fmt.Errorf("params: threads %d: want 1..%d", p.Threads, MaxThreads)
	case p.Validation < 0:
		return fmt.Errorf("params: validation %d: want >= 0 datapoints", p.Validation)
	}
	_, err := TrainedTensors(p.Trainable)
	return err
}

// TrainedTensors are the tensor names of a trainable set, sorted by name
// (the order of the canonical hash).
func TrainedTensors(set string) ([]string, error) {
	switch set {
	case SetHead:
		return []string{"output.weight", "output_norm.weight"}, nil
	case SetAll, "full":
		return nil, fmt.Errorf("%w: %q: the pinned llama.cpp (ollama v0.9.6) computes wrong gradients below the final norm (in-place RMS_NORM_BACK, fixed upstream in llama.cpp #24305) and never trains attn_k, attn_v or token_embd; train %q until a binding carries #24305", ErrUnsupportedSet, set, SetHead)
	case "":
		return nil, fmt.Errorf("%w: no trainable set given: use %q", ErrUnsupportedSet, SetHead)
	}
	return nil, fmt.Errorf("%w: %q: the only set is %q (output.weight, output_norm.weight); others wait for llama.cpp #24305", ErrUnsupportedSet, set, SetHead)
}

// CheckModel checks that the base model at path can be trained with set:
// the trained tensors exist and are F32 (llama.cpp silently skips other
// types), and the output matrix is not tied to the embeddings.
func CheckModel(path, set string) error {
	names, err := TrainedTensors(set)
	if err != nil {
		return err
	}
	ts, err := llm.ListTensors(path)
	if err != nil {
		return fmt.Errorf("cannot read the base model: %w", err)
	}
	return checkTensors(ts, names)
}

// checkTensors is CheckModel on a tensor list.
func checkTensors(ts []llm.TensorInfo, names []string) error {
	have := map[string]llm.TensorInfo{}
	for _, t := range ts {
		have[t.Name] = t
	}
	if _, ok := have["output.weight"]; !ok && slices.Contains(names, "output.weight") {
		return badInput("the base model ties its output matrix to the token embeddings (no output.weight): the pinned llama.cpp never trains token_embd, so its head cannot be trained; use a model with an untied output.weight")
	}
	for _, n := range names {
		t, ok := have[n]
		if !ok {
			return badInput("the base model has no tensor %s to train", n)
		}
		if t.Type != 0 {
			return badInput("the base model's %s is of ggml type %d, not F32: llama.cpp trains F32 tensors only; convert the model to F32", n, t.Type)
		}
	}
	return nil
}

// LR is the learning rate as the float32 llama.cpp uses:
// float32(float64(LRMicro) / 1e6).
func (p Params) LR() float32 { return float32(float64(p.LRMicro) / 1e6) }

// Class is the training determinism class of p on this build: providers
// and validators of a job must share it. Threads are not in it: results
// are identical for any thread count (TestThreadsDoNotMatter).
func (p Params) Class() string {
	return fmt.Sprintf("%s/%s/%s/train:%s/adamw-step1(lr_micro=%d,b1=%g,b2=%g,eps=%g,wd=0)/n_ctx=%d/stride=%d/val=%d/order=%s/seed=%d/%s",
		llm.Version, llm.Backend(), Version, p.Trainable, p.LRMicro, adamBeta1, adamBeta2, adamEps,
		p.NCtx, p.Stride, p.Validation, DataOrder, p.Seed, StepScheme)
}

// BuildClass is the training determinism class of this build, without a
// job's hyper-parameters (they are in the job's terms): llama.cpp build
// and backend, this runtime's version, the optimizer's constants, the
// data order and the step scheme. A provider publishes it
// (ProviderInfo.TrainClass) and a fine-tune job requires it
// (Requirements.Class): replicas and validators of one class produce
// bit-identical checkpoints.
func BuildClass() string {
	return fmt.Sprintf("%s/%s/%s/adamw-step1(b1=%g,b2=%g,eps=%g,wd=0)/order=%s/%s",
		llm.Version, llm.Backend(), Version, adamBeta1, adamBeta2, adamEps, DataOrder, StepScheme)
}

// Datapoints is the number of datapoints in T tokens at n_ctx and stride.
func Datapoints(tokens, nCtx, stride int) int {
	if tokens < nCtx+1 || stride < 1 {
		return 0
	}
	return (tokens-nCtx-1)/stride + 1
}

// Plan is what a dataset becomes under p.
type Plan struct {
	Tokens     int `json:"tokens"`     // with the BOS token
	Datapoints int `json:"datapoints"` // all, validation included
	Trained    int `json:"trained"`    // datapoints trained each epoch
	Steps      int `json:"steps"`      // Epochs × Trained
}

// PlanJob tokenizes p's dataset with the base model's tokenizer (the
// vocabulary only, in this process) and says how many steps the job has:
// what a client declares when it posts the job, and what a provider
// checks before it accepts one.
func PlanJob(p Params) (Plan, error) {
	if err := p.Validate(); err != nil {
		return Plan{}, err
	}
	if err := CheckModel(p.Model, p.Trainable); err != nil {
		return Plan{}, err
	}
	v, err := llm.LoadVocab(p.Model)
	if err != nil {
		return Plan{}, err
	}
	defer v.Close()
	toks, err := v.Tokenize(string(p.Data))
	if err != nil {
		return Plan{}, fmt.Errorf("cannot tokenize the dataset: %w", err)
	}
	return p.plan(len(toks))
}

// StepTokens are the n_ctx+1 tokens that step k (1-based) of the job p
// trains (inputs the first n_ctx, labels the last n_ctx), from the
// tokenizer alone: what a validator is given with the checkpoint before
// step k, so that it needs one datapoint, not the dataset (RunStepTokens).
func StepTokens(p Params, k int) ([]int32, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := CheckModel(p.Model, p.Trainable); err != nil {
		return nil, err
	}
	v, err := llm.LoadVocab(p.Model)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	toks, err := v.Tokenize(string(p.Data))
	if err != nil {
		return nil, fmt.Errorf("cannot tokenize the dataset: %w", err)
	}
	pl, err := p.plan(len(toks))
	if err != nil {
		return nil, err
	}
	if k < 1 || k > pl.Steps {
		return nil, fmt.Errorf("step %d: the job has steps 1..%d", k, pl.Steps)
	}
	d, err := StepDatapoint(p.Seed, pl.Trained, k)
	if err != nil {
		return nil, err
	}
	out := make([]int32, p.NCtx+1)
	for i := range out {
		out[i] = int32(toks[d*p.Stride+i])
	}
	return out, nil
}

// plan checks the token count against p.
func (p Params) plan(tokens int) (Plan, error) {
	d := Datapoints(tokens, p.NCtx, p.Stride)
	pl := Plan{Tokens: tokens, Datapoints: d, Trained: d - p.Validation}
	if d == 0 {
		return pl, badInput("the dataset is %d tokens, shorter than one datapoint (n_ctx+1 = %d tokens): give more text or a smaller n_ctx", tokens, p.NCtx+1)
	}
	if pl.Trained < 1 {
		return pl, badInput("the dataset makes %d datapoints and %d are held out for validation: none is left to train on; lower validation or give more text", d, p.Validation)
	}
	if pl.Trained > MaxSteps/p.Epochs {
		return pl, badInput("%d epochs of %d datapoints exceed %d steps: lower epochs, raise the stride or shorten the dataset", p.Epochs, pl.Trained, MaxSteps)
	}
	pl.Steps = p.Epochs * pl.Trained
	return pl, nil
}

// splitmix64 is the generator of DataOrder.
type splitmix64 uint64

func (s *splitmix64) next() uint64 {
	*s += 0x9E3779B97F4A7C15
	z := uint64(*s)
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// Order is the order of n trained datapoints in epoch (0-based) for seed.
func Order(seed uint64, epoch, n int) []int {
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	s := splitmix64(seed ^ (uint64(epoch+1) * 0x9E3779B97F4A7C15))
	for i := n - 1; i >= 1; i-- {
		j := int(s.next() % uint64(i+1))
		perm[i], perm[j] = perm[j], perm[i]
	}
	return perm
}

// StepDatapoint is the datapoint (0-based) that step k (1-based) trains
// when each epoch trains n datapoints.
func StepDatapoint(seed uint64, n, k int) (int, error) {
	if n < 1 || k < 1 {
		return 0, fmt.Errorf("step %d of epochs of %d datapoints: want k >= 1 and n >= 1", k, n)
	}
	e, i := (k-1)/n, (k-1)%n
	return Order(seed, e, n)[i], nil
}

// Hash is a checkpoint hash.
type Hash [32]byte

func (h Hash) String() string { return fmt.Sprintf("%x", h[:]) }

// MarshalText writes h as hex.
func (h Hash) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText reads 64 hex digits.
func (h *Hash) UnmarshalText(b []byte) error {
	if len(b) != 64 {
		return fmt.Errorf("hash %q: want 64 hex digits", b)
	}
	for i := range h {
		v, err := strconv.ParseUint(string(b[2*i:2*i+2]), 16, 8)
		if err != nil {
			return fmt.Errorf("hash %q: want 64 hex digits", b)
		}
		h[i] = byte(v)
	}
	return nil
}
