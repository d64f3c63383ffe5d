// Package ftwork is the off-chain half of a fine-tune job: a provider's run
// and its checkpoints, its reveal and game openings, a validator's one-step
// re-execution.
//
// The chain side is market (FinetuneTerms, FinetuneSeed, FinetuneResult,
// MsgRevealFinetune) and finetune (the checkpoint tree and the
// step-bisection game); the training is runtime/llm/train. This package
// joins them (protocol-threats §3):
//
//   - Params turns a job's terms, seed, base model and dataset into the
//     train.Params every slot and validator runs; Check refuses input that
//     is the client's fault (the dataset's size or encoding, the base
//     model's hash, the step count) with an error wrapping ErrBadInput:
//     the provider reports the input and is never slashed (T11).
//   - Run trains in the supervised worker, keeps the checkpoint after
//     every k-th step (and steps 0 and N) and persists the N+1 hashes, so
//     a restarted provider reopens its Work (Open) without training again.
//   - A Work commits (Commitment), reveals (Reveal, with the proofs of
//     leaves 0 and N, T2) and answers each game round by itself from its
//     hash list (Openings, OpenMsg); Checkpoint serves the weights after
//     any step, recomputing those it did not keep from the nearest kept
//     one below, each step checked against its own list (T8).
//   - CheckStep is the validator's side: the agreed checkpoint must hash
//     to h_lo (else ErrWrongCheckpoint: fetch it from another party), then
//     one step; Withheld is the h* it votes when nobody served θ_lo in
//     time (T8: it matches no claim, so both groups lose).
//   - RunPerturbed is a liar for tests and the devnet: it perturbs the
//     weights after one step and trains on honestly from there.
//
// Files in a Work's folder: work.json (the parameters but the dataset, the
// hashes, the root), dataset (the dataset's bytes), model.gguf (the
// fine-tuned model) and step-k.gguf (the kept checkpoints,
// train.CheckpointFile).
package ftwork

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"unicode/utf8"

	"github.com/ogpu-network/ogpu/finetune"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/runtime/llm/train"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// ErrBadInput marks a job's input that is the client's fault: the dataset
// or the base model does not match the job's terms, or cannot be trained.
// The provider reports it (T11, threats rule 8) and is never slashed for
// it. It is train.ErrBadInput, so the runtime's own input errors (also
// across its worker boundary) satisfy errors.Is(err, ErrBadInput) too.
var ErrBadInput = train.ErrBadInput

// ErrWrongCheckpoint: a checkpoint offered to a validator does not hash to
// the agreed h_lo (or cannot be read as one). The party that served it is
// not trusted for it; the validator fetches θ_lo from another party.
var ErrWrongCheckpoint = errors.New("wrong checkpoint")

// Withheld is the h* a validator votes when no party served the agreed
// checkpoint θ_lo within the window (T8): sha256("ogpu/ftwithheld/v1").
// It is no checkpoint hash (those are sha256 over a domain-tagged tensor
// encoding, train.HashTensors), so it matches neither claim and both
// groups, which both claimed h_lo and so both had to serve it, lose.
var Withheld = types.Hash(sha256.Sum256([]byte("ogpu/ftwithheld/v1")))

// workFile is the name of a Work's persisted state in its folder;
// dataFile the dataset's bytes.
const (
	workFile = "work.json"
	dataFile = "dataset"
)

// workVersion versions work.json.
const workVersion = 1

// Params is the train.Params of a fine-tune job with the given terms, the
// data-order seed fixed at the award (market.FinetuneSeed), the base model
// file, the dataset's bytes and the threads to use (threads do not change
// the result). It only translates; Check checks the input against the
// terms.
func Params(terms *market.FinetuneTerms, seed uint64, model string, data []byte, threads int) (train.Params, error) {
	if terms == nil {
		return train.Params{}, errors.New("ftwork: the job has no fine-tune terms: it is not a fine-tune job")
	}
	for _, f := range []struct {
		name string
		v    uint64
		max  uint64
	}{
		{"epochs", terms.Epochs, train.MaxEpochs},
		{"learning rate (millionths)", terms.LRMicro, train.MaxLRMicro},
		{"context", terms.Ctx, train.MaxNCtx},
		{"stride", terms.Stride, train.MaxNCtx},
		{"validation", terms.Validation, market.MaxFinetuneValidation},
	} {
		if f.v > f.max {
			return train.Params{}, fmt.Errorf("%w: the job's %s is %d, above the runtime's bound %d", ErrBadInput, f.name, f.v, f.max)
		}
	}
	if terms.Ctx < train.MinNCtx {
		// The chain takes contexts from 32 (market.MinFinetuneCtx); the
		// pinned llama.cpp trains from 64.
		return train.Params{}, fmt.Errorf("%w: the job's context is %d tokens, below the runtime's minimum %d (llama.cpp raises n_batch to 64, and training needs n_ctx = n_batch)", ErrBadInput, terms.Ctx, train.MinNCtx)
	}
	return train.Params{
		Model:      model,
		Data:       data,
		Epochs:     int(terms.Epochs),
		LRMicro:    uint32(terms.LRMicro),
		NCtx:       int(terms.Ctx),
		Stride:     int(terms.Stride),
		Seed:       seed,
		Trainable:  terms.Trainable,
		Threads:    threads,
		Validation: int(terms.Validation),
	}, nil
}

// Check checks a job's input against its terms before a provider trains:
// the dataset is exactly DatasetSize bytes of UTF-8 text, the base model's
// trained tensors hash to terms.Base, and train.PlanJob counts terms.Steps
// steps. Each failure wraps ErrBadInput and says what differs (the
// provider reports the input; T11). A base model file that cannot be read
// is not marked: it may be the provider's download.
func Check(terms *market.FinetuneTerms, p train.Params) error {
	if terms == nil {
		return errors.New("ftwork: the job has no fine-tune terms: it is not a fine-tune job")
	}
	if uint64(len(p.Data)) != terms.DatasetSize {
		return fmt.Errorf("%w: the dataset is %d bytes, the job declares %d", ErrBadInput, len(p.Data), terms.DatasetSize)
	}
	if !utf8.Valid(p.Data) {
		i := firstInvalid(p.Data)
		return fmt.Errorf("%w: the dataset is not UTF-8 text (invalid byte 0x%02x at offset %d)", ErrBadInput, p.Data[i], i)
	}
	if p.Trainable != terms.Trainable {
		return fmt.Errorf("ftwork: params train %q, the job %q", p.Trainable, terms.Trainable)
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("the job's parameters: %w", err)
	}
	if err := train.CheckModel(p.Model, p.Trainable); err != nil {
		return fmt.Errorf("the base model: %w", err)
	}
	h0, err := train.HashCheckpoint(p.Model, p.Trainable)
	if err != nil {
		return fmt.Errorf("cannot hash the base model's trained tensors: %w", err)
	}
	if types.Hash(h0) != terms.Base {
		return fmt.Errorf("%w: the base model's trained tensors hash %x, the job declares base %x", ErrBadInput, h0[:], terms.Base[:])
	}
	pl, err := train.PlanJob(p)
	if err != nil {
		return fmt.Errorf("cannot plan the job: %w", err)
	}
	if uint64(pl.Steps) != terms.Steps {
		return fmt.Errorf("%w: the dataset makes %d steps (%d epochs × %d trained datapoints of %d tokens) with the base model's tokenizer, the job declares %d",
			ErrBadInput, pl.Steps, p.Epochs, pl.Trained, pl.Tokens, terms.Steps)
	}
	return nil
}

// firstInvalid is the offset of the first byte of b that is not valid
// UTF-8.
func firstInvalid(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return 0
}

// Work is a provider's finished fine-tune run: the hash of the trained
// tensors after every step, the tree's root, the fine-tuned model, and the
// kept checkpoints in Dir.
type Work struct {
	Dir    string
	Hashes []types.Hash // Hashes[k] after step k; Hashes[0] the base's; N+1 of them
	Root   types.Hash   // finetune.RootOf(Hashes)
	Final  types.Hash   // Hashes[N]
	Model  string       // the fine-tuned GGUF (Dir/train.ModelFile)
	Every  int          // a checkpoint is kept after every Every-th step (and steps 0 and N)

	p train.Params
}

// Steps is N.
func (w *Work) Steps() uint64 { return uint64(len(w.Hashes) - 1) }

// Params are the job's training parameters.
func (w *Work) Params() train.Params { return w.p }

// state is work.json.
type state struct {
	Version int          `json:"version"`
	Params  train.Params `json:"params"` // Data omitted: it is the dataset file
	Dataset types.Hash   `json:"dataset"`
	Every   int          `json:"every"`
	Hashes  []types.Hash `json:"hashes"`
	Root    types.Hash   `json:"root"`
	Final   types.Hash   `json:"final"`
}

// keep is the checkpoints a run of n steps keeps: 0, every multiple of
// every, and n.
func keep(n, every int) []int {
	out := []int{0}
	for k := every; k < n; k += every {
		out = append(out, k)
	}
	return append(out, n)
}

// Run fine-tunes the job p in the supervised training worker, writing the
// model and the checkpoints after steps 0, every, 2·every, … and N to dir,
// and persists the hash list there (Open reads it back). progress, if not
// nil, sees every step and epoch. A Run that did not finish leaves no
// work.json: the provider trains again.
func Run(ctx context.Context, dir string, p train.Params, every int, progress func(train.Progress)) (*Work, error) {
	if every < 1 {
		return nil, fmt.Errorf("ftwork: keep a checkpoint every %d steps: want at least 1", every)
	}
	pl, err := train.PlanJob(p)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create the work folder: %w", err)
	}
	os.Remove(filepath.Join(dir, workFile))
	res, err := train.Run(ctx, p, dir, &train.Options{Checkpoints: keep(pl.Steps, every), Progress: progress})
	if err != nil {
		return nil, err
	}
	hs := make([]types.Hash, len(res.Hashes))
	for i, h := range res.Hashes {
		hs[i] = types.Hash(h)
	}
	return save(dir, p, every, hs)
}

// save persists a finished work in dir: the dataset, then work.json
// (written last, through a rename: its presence means the work is whole).
func save(dir string, p train.Params, every int, hs []types.Hash) (*Work, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	w := &Work{Dir: abs, Hashes: hs, Root: finetune.Root(hs), Final: hs[len(hs)-1], Model: filepath.Join(abs, train.ModelFile), Every: every, p: p}
	if err := writeAtomic(filepath.Join(abs, dataFile), p.Data); err != nil {
		return nil, fmt.Errorf("cannot keep the dataset: %w", err)
	}
	st := state{Version: workVersion, Params: p, Dataset: sha256.Sum256(p.Data), Every: every, Hashes: hs, Root: w.Root, Final: w.Final}
	st.Params.Data = nil
	b, err := json.MarshalIndent(st, "", " ")
	if err != nil {
		return nil, err
	}
	if err := writeAtomic(filepath.Join(abs, workFile), b); err != nil {
		return nil, fmt.Errorf("cannot keep the hash list: %w", err)
	}
	return w, nil
}

// writeAtomic writes b to path through a temporary file and a rename.
func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// Open reopens the work a Run (or RunPerturbed) finished in dir, without
// training: the hash list, the dataset and the model. It checks them
// against each other: the root is the list's, the dataset the one
// trained, the base model's and the fine-tuned model's trained tensors
// hash to leaves 0 and N. Without a work.json (no finished run) the error
// satisfies errors.Is(err, fs.ErrNotExist).
func Open(dir string) (*Work, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(abs, workFile))
	if err != nil {
		return nil, fmt.Errorf("no finished fine-tune in %s: %w", abs, err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(abs, workFile), err)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: "+format+": train again", append([]any{filepath.Join(abs, workFile)}, args...)...)
	}
	switch {
	case st.Version != workVersion:
		return nil, bad("version %d, this build reads %d", st.Version, workVersion)
	case len(st.Hashes) < 2:
		return nil, bad("%d checkpoint hashes: a job has at least one step", len(st.Hashes))
	case st.Every < 1:
		return nil, bad("checkpoints kept every %d steps", st.Every)
	case finetune.Root(st.Hashes) != st.Root:
		return nil, bad("the root %x is not the hash list's", st.Root[:])
	case st.Final != st.Hashes[len(st.Hashes)-1]:
		return nil, bad("the final hash is not the last in the list")
	}
	data, err := os.ReadFile(filepath.Join(abs, dataFile))
	if err != nil {
		return nil, bad("cannot read the dataset: %v", err)
	}
	if sha256.Sum256(data) != st.Dataset {
		return nil, bad("the dataset is not the one trained")
	}
	p := st.Params
	p.Data = data
	w := &Work{Dir: abs, Hashes: st.Hashes, Root: st.Root, Final: st.Final, Model: filepath.Join(abs, train.ModelFile), Every: st.Every, p: p}
	if h, err := train.HashCheckpoint(p.Model, p.Trainable); err != nil {
		return nil, fmt.Errorf("cannot read the base model: %w", err)
	} else if types.Hash(h) != w.Hashes[0] {
		return nil, bad("the base model %s hashes %s, leaf 0 is %x", p.Model, h, w.Hashes[0][:])
	}
	if h, err := train.HashCheckpoint(w.Model, p.Trainable); err != nil {
		return nil, bad("cannot read the fine-tuned model: %v", err)
	} else if types.Hash(h) != w.Final {
		return nil, bad("the fine-tuned model hashes %s, leaf N is %x", h, w.Final[:])
	}
	return w, nil
}

// Result is what the work commits to: market.FinetuneResult(root, final).
func (w *Work) Result() types.Hash { return market.FinetuneResult(w.Root, w.Final) }

// Commitment is the result commitment a slot sends before any reveal:
// verifier.ResultCommitment(Result, salt, provider) (it binds the
// provider, T13).
func (w *Work) Commitment(salt types.Hash, provider types.Address) types.Hash {
	return verifier.ResultCommitment(w.Result(), salt, provider)
}

// Reveal opens the commitment of slot (job, stage): the root, the final
// hash and the proofs of leaves 0 and N (T2: the tree binds the base and
// the final).
func (w *Work) Reveal(job uint64, stage uint16, salt types.Hash) *market.MsgRevealFinetune {
	return &market.MsgRevealFinetune{
		Job: job, Stage: stage, Salt: salt, Root: w.Root, Final: w.Final,
		ProofBase:  finetune.Prove(w.Hashes, 0),
		ProofFinal: finetune.Prove(w.Hashes, w.Steps()),
	}
}

// Openings are the checkpoint hashes at points (steps 0..N), each with its
// proof against Root: a game round's answer (finetune.Game.Points).
func (w *Work) Openings(points []uint64) ([]finetune.Opening, error) {
	out := make([]finetune.Opening, 0, len(points))
	for _, k := range points {
		if k > w.Steps() {
			return nil, fmt.Errorf("ftwork: step %d asked for, the work has steps 0..%d: another job's game?", k, w.Steps())
		}
		out = append(out, finetune.Opening{Step: k, Hash: w.Hashes[k], Proof: finetune.Prove(w.Hashes, k)})
	}
	return out, nil
}

// OpenMsg is this work's answer to the current round of game g: its
// group's openings of g.Points(). It refuses a game that is not playing a
// round, is over another number of steps, or has no group under Root.
func (w *Work) OpenMsg(g *finetune.Game) (*finetune.MsgOpenCheckpoints, error) {
	switch {
	case g.Status != finetune.StatusOpen:
		return nil, fmt.Errorf("ftwork: game %d/%d/%d is %s: no round to answer", g.Job, g.Stage, g.Match, g.Status)
	case g.Steps != w.Steps():
		return nil, fmt.Errorf("ftwork: game %d/%d/%d is over %d steps, the work has %d", g.Job, g.Stage, g.Match, g.Steps, w.Steps())
	case !slices.ContainsFunc(g.Groups, func(gr finetune.Group) bool { return gr.Root == w.Root }):
		return nil, fmt.Errorf("ftwork: game %d/%d/%d has no group under root %x", g.Job, g.Stage, g.Match, w.Root[:])
	}
	ops, err := w.Openings(g.Points())
	if err != nil {
		return nil, err
	}
	return &finetune.MsgOpenCheckpoints{Job: g.Job, Stage: g.Stage, Match: g.Match, Root: w.Root, Round: g.Round, Openings: ops}, nil
}

// Checkpoint is the checkpoint file after step j (0..N): the kept one, or
// one recomputed from the nearest kept checkpoint below j, step by step
// (train.RunStep), each step's hash checked against the work's list (T8:
// a provider keeps every k-th checkpoint and recomputes the rest within
// the data window). A recomputed checkpoint is kept in Dir. A kept file
// whose tensors do not hash to its leaf is not used.
func (w *Work) Checkpoint(ctx context.Context, j int) (string, error) {
	if j < 0 || uint64(j) > w.Steps() {
		return "", fmt.Errorf("ftwork: checkpoint after step %d: the work has steps 0..%d", j, w.Steps())
	}
	from := -1
	for i := j; i >= 0 && from < 0; i-- {
		path := filepath.Join(w.Dir, train.CheckpointFile(i))
		if _, err := os.Stat(path); err == nil && train.VerifyCheckpoint(path, w.p.Trainable, train.Hash(w.Hashes[i])) == nil {
			from = i
		}
	}
	if from < 0 {
		// No kept checkpoint below j: leaf 0 is the base model's tensors.
		ts, err := train.ReadCheckpoint(w.p.Model, w.p.Trainable)
		if err != nil {
			return "", fmt.Errorf("ftwork: cannot read the base model: %w", err)
		}
		if h, err := train.HashTensors(ts); err != nil || types.Hash(h) != w.Hashes[0] {
			return "", fmt.Errorf("ftwork: no checkpoint at or below step %d, and the base model's trained tensors do not hash to leaf 0 (%v)", j, err)
		}
		b, err := train.EncodeCheckpoint(ts)
		if err != nil {
			return "", err
		}
		if err := writeAtomic(filepath.Join(w.Dir, train.CheckpointFile(0)), b); err != nil {
			return "", err
		}
		from = 0
	}
	prev := filepath.Join(w.Dir, train.CheckpointFile(from))
	if from == j {
		return prev, nil
	}
	tmp, err := os.MkdirTemp(w.Dir, "recompute-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	for k := from + 1; k <= j; k++ {
		out := filepath.Join(tmp, train.CheckpointFile(k))
		res, err := train.RunStep(ctx, w.p, prev, k, &train.Options{Save: out})
		if err != nil {
			return "", fmt.Errorf("ftwork: recomputing step %d: %w", k, err)
		}
		if types.Hash(res.After) != w.Hashes[k] {
			return "", fmt.Errorf("ftwork: step %d recomputed from the checkpoint after step %d hashes %s, the work's list says %x: the list is not this run's (class mismatch or a damaged folder)", k, from, res.After, w.Hashes[k][:])
		}
		prev = out
	}
	dst := filepath.Join(w.Dir, train.CheckpointFile(j))
	if err := os.Rename(prev, dst); err != nil {
		return "", err
	}
	return dst, nil
}

// CheckStep is the validator's re-execution of the disputed step lo+1 of
// job p from the agreed checkpoint θ_lo: the checkpoint's trained tensors
// must hash to hLo (else an error wrapping ErrWrongCheckpoint: fetch θ_lo
// from another party), then one step in the job's class; hStar is the hash
// after it, the validator's vote. p carries the dataset; with only the
// step's datapoint, use CheckStepTokens.
func CheckStep(ctx context.Context, p train.Params, checkpoint string, lo uint64, hLo types.Hash) (types.Hash, error) {
	return checkStep(ctx, p, checkpoint, lo, hLo, nil)
}

// CheckStepTokens is CheckStep given step lo+1's datapoint (its n_ctx+1
// tokens, train.StepTokens) instead of the dataset: p.Data may be empty.
func CheckStepTokens(ctx context.Context, p train.Params, checkpoint string, lo uint64, hLo types.Hash, tokens []int32) (types.Hash, error) {
	if tokens == nil {
		return types.Hash{}, errors.New("ftwork: no datapoint given: use CheckStep with the dataset")
	}
	return checkStep(ctx, p, checkpoint, lo, hLo, tokens)
}

func checkStep(ctx context.Context, p train.Params, checkpoint string, lo uint64, hLo types.Hash, tokens []int32) (types.Hash, error) {
	if lo >= train.MaxSteps {
		return types.Hash{}, fmt.Errorf("ftwork: step %d: a job has at most %d steps", lo+1, train.MaxSteps)
	}
	if err := train.VerifyCheckpoint(checkpoint, p.Trainable, train.Hash(hLo)); err != nil {
		return types.Hash{}, fmt.Errorf("%w for step %d: %w", ErrWrongCheckpoint, lo, err)
	}
	k := int(lo) + 1
	var res *train.StepResult
	var err error
	if tokens != nil {
		res, err = train.RunStepTokens(ctx, p, checkpoint, k, tokens, nil)
	} else {
		res, err = train.RunStep(ctx, p, checkpoint, k, nil)
	}
	if err != nil {
		return types.Hash{}, fmt.Errorf("ftwork: re-executing step %d: %w", k, err)
	}
	if types.Hash(res.Before) != hLo { // the file changed under us
		return types.Hash{}, fmt.Errorf("%w for step %d: the worker loaded tensors hashing %s, the agreed h_lo is %x", ErrWrongCheckpoint, lo, res.Before, hLo[:])
	}
	return types.Hash(res.After), nil
}

// Perturbation is what RunPerturbed changes after its step: Delta added to
// float Index of the trained tensor Tensor.
type Perturbation struct {
	Tensor string
	Index  int
	Delta  float32
}

// DefaultPerturbation adds 1e-3 to the first float of output_norm.weight.
var DefaultPerturbation = Perturbation{Tensor: "output_norm.weight", Index: 0, Delta: 1e-3}

// RunPerturbed is a liar for tests and the devnet: a provider that
// "perturbs one step". It trains honestly, takes the weights after step k
// (1..N), adds pert to one float of them, and trains on honestly from the
// perturbed weights to step N (a chain of train.RunStep), so that its
// hashes equal an honest run's up to step k−1 and differ from step k on.
// It keeps the checkpoints an honest run of every keeps, and every
// checkpoint from k on, so that Checkpoint serves its own story.
func RunPerturbed(ctx context.Context, dir string, p train.Params, every, k int, pert Perturbation, progress func(train.Progress)) (*Work, error) {
	if every < 1 {
		return nil, fmt.Errorf("ftwork: keep a checkpoint every %d steps: want at least 1", every)
	}
	pl, err := train.PlanJob(p)
	if err != nil {
		return nil, err
	}
	n := pl.Steps
	if k < 1 || k > n {
		return nil, fmt.Errorf("ftwork: perturb step %d: the job has steps 1..%d", k, n)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create the work folder: %w", err)
	}
	os.Remove(filepath.Join(dir, workFile))
	honest := func(pr train.Progress) {
		if progress != nil && pr.Step > 0 && pr.Step < k {
			progress(pr)
		}
	}
	res, err := train.Run(ctx, p, dir, &train.Options{Checkpoints: append(keep(n, every), k), Progress: honest})
	if err != nil {
		return nil, err
	}
	hs := make([]types.Hash, n+1)
	for i := range k {
		hs[i] = types.Hash(res.Hashes[i])
	}
	path := filepath.Join(dir, train.CheckpointFile(k))
	ts, err := train.ReadCheckpoint(path, p.Trainable)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(ts, func(t train.Tensor) bool { return t.Name == pert.Tensor })
	if i < 0 || pert.Index < 0 || 4*pert.Index+4 > len(ts[i].Data) {
		return nil, fmt.Errorf("ftwork: cannot perturb float %d of %q", pert.Index, pert.Tensor)
	}
	b := ts[i].Data[4*pert.Index:]
	binary.LittleEndian.PutUint32(b, math.Float32bits(math.Float32frombits(binary.LittleEndian.Uint32(b))+pert.Delta))
	if err := train.WriteCheckpoint(path, ts); err != nil {
		return nil, err
	}
	h, err := train.HashTensors(ts)
	if err != nil {
		return nil, err
	}
	if h == res.Hashes[k] {
		return nil, fmt.Errorf("ftwork: the perturbation %+v does not change the weights", pert)
	}
	hs[k] = types.Hash(h)
	if progress != nil {
		progress(train.Progress{Step: k, Steps: n, Hash: h})
	}
	for j := k + 1; j <= n; j++ {
		out := filepath.Join(dir, train.CheckpointFile(j))
		r, err := train.RunStep(ctx, p, path, j, &train.Options{Save: out})
		if err != nil {
			return nil, fmt.Errorf("ftwork: step %d after the perturbation: %w", j, err)
		}
		if types.Hash(r.Before) != hs[j-1] {
			return nil, fmt.Errorf("ftwork: step %d started from %s, not %x", j, r.Before, hs[j-1][:])
		}
		hs[j] = types.Hash(r.After)
		if progress != nil {
			progress(train.Progress{Step: j, Steps: n, Loss: r.Loss, Hash: r.After})
		}
		path = out
	}
	final, err := train.ReadCheckpoint(path, p.Trainable)
	if err != nil {
		return nil, err
	}
	if err := train.WriteModel(p.Model, filepath.Join(dir, train.ModelFile), final); err != nil {
		return nil, err
	}
	return save(dir, p, every, hs)
}
