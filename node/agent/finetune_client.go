package agent

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/holiman/uint256"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/finetune"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/runtime/llm/train"
	"github.com/ogpu-network/ogpu/types"
)

// The client of a fine-tune job (issue 16).
//
// RunFinetune plans the job here (the base model's tokenizer counts the
// steps, as every provider will), refuses bad input before anything is
// posted, stores the base model and the dataset in the client's blob
// store, posts a MsgPostJob of kind finetune with the dataset as its input
// (served to the winners only, like a prompt), follows the job, shows the
// first winner's progress lines, and once the task settled with a paid
// outcome makes the fine-tuned model from what the paid providers serve,
// keeping it only if its trained tensors hash to the paid slots' final
// hash; every other byte is the base model's (the fine-tuned file is a
// function of the base file and the trained tensors: train.WriteModel).
//
// The contract with the provider agent (finetune_provider.go):
//   - progress comes over StreamProtocol as pieces, one line of text each:
//     FinetuneEpochLine at each epoch's end and FinetuneStepLine now and
//     then (at most about 100 a run), then Done with Result = the sha256 of
//     the fine-tuned GGUF file, a blob the provider serves to the client;
//   - the provider serves its checkpoints over CheckpointProtocol to the
//     client, step N being the fine-tuned head: the client's first choice;
//   - every honest provider's file is byte-identical (WriteModel of the
//     base and leaf N), so one hash serves from all paid providers; the
//     client still asks each paid provider for its own hash when it did
//     not stream from it.

// Default hyper-parameters and window sizing of a fine-tune job.
const (
	DefaultFinetuneEpochs  = 3
	DefaultFinetuneLRMicro = 3000
	DefaultFinetuneCtx     = 64
	DefaultFinetuneStride  = 32
	// FinetuneStepTime is one training step of stories260K's head on the
	// project's reference machine (about 40 ms; docs/benchmarks.md), and
	// finetuneTimeMargin the factor the execute window leaves for slower
	// providers, the worker's start and the fetch of the model and data.
	FinetuneStepTime   = 40 * time.Millisecond
	finetuneTimeMargin = 3
	// DevnetBlockTime is the devnet's block interval (its timeout_commit):
	// the shortest in use, so a window sized with it is long enough on
	// every chain of this project.
	DevnetBlockTime = 200 * time.Millisecond
	// MinFinetuneExecute is the shortest default execute window, in
	// blocks (fetching the base model and the dataset, starting the
	// worker).
	MinFinetuneExecute = 20
	// Default bid, reveal and verify windows of a fine-tune job, in blocks.
	DefaultFinetuneBid    = 5
	DefaultFinetuneReveal = 5
	DefaultFinetuneVerify = 20
)

// FinetuneJob is a fine-tune job to post.
type FinetuneJob struct {
	// Base is the base GGUF file (F32, untied output.weight).
	Base string
	// Data is the dataset: UTF-8 text.
	Data []byte
	// Epochs, LRMicro (learning rate in millionths), Ctx (tokens per
	// datapoint, a multiple of 32), Stride and Validation (datapoints
	// held out): the training terms; zero values take the defaults
	// (Validation stays 0).
	Epochs     int
	LRMicro    uint32
	Ctx        int
	Stride     int
	Validation int
	// Trainable is the trained set: "" is train.SetHead, the only one the
	// pinned llama.cpp trains correctly.
	Trainable  string
	Redundancy uint16 // 0: 2
	MaxPrice   *uint256.Int
	// Windows: zero fields take FinetuneWindows' defaults.
	Windows market.Windows
	// Class is the training determinism class the providers must share:
	// "" is train.BuildClass(), this build's.
	Class      string
	Attributes []string
	// BlockTime sizes the default execute window: 0 is the chain's, as
	// Client.BlockTime measures it (DevnetBlockTime if it cannot tell).
	BlockTime time.Duration
	// OutDir is where the fine-tuned model is written, as
	// finetune-JOB.gguf ("" is the current directory).
	OutDir string
	// OnPosted, if set, is called once the job is on chain.
	OnPosted func(job uint64, height int64)
	// OnStep, if set, is called with the streamed step progress (a bar).
	OnStep func(step, steps int)
}

// FinetunePlan is a fine-tune job planned here, before anything is posted.
type FinetunePlan struct {
	Msg  *market.MsgPostJob
	Plan train.Plan
	// Data is the dataset blob's hash (the job's input), Base the base
	// model file's hash (the job's model).
	Data types.Hash
	Base types.Hash
}

// FinetuneResult is how a fine-tune job ended.
type FinetuneResult struct {
	Job   uint64     `json:"job"`
	Plan  train.Plan `json:"plan"`
	Class string     `json:"class"`
	// BlockTime is the block interval the windows were sized with.
	BlockTime time.Duration `json:"block_time"`
	// Outcome is how the task settled: agreed, agreed_final, game (paid),
	// class_failure, unresolved, no_results (refunded) or "expired".
	Outcome string     `json:"outcome"`
	Result  types.Hash `json:"result"`
	// Final is the paid slots' final hash (the trained tensors after the
	// last step), Model the verified fine-tuned GGUF, ModelHash its sha256,
	// From the provider it was fetched from.
	Final     types.Hash    `json:"final"`
	Model     string        `json:"model,omitempty"`
	ModelHash types.Hash    `json:"model_hash"`
	From      types.Address `json:"from"`
	// StreamedFrom is the provider whose progress was shown; EpochLoss
	// and ValLoss are the losses it reported (not verified: the chain
	// checks the weights, not the losses).
	StreamedFrom types.Address `json:"streamed_from"`
	EpochLoss    []float64     `json:"epoch_loss"`
	ValLoss      []float64     `json:"val_loss"`
	Paid         *uint256.Int  `json:"paid"`
	Refunded     *uint256.Int  `json:"refunded"`
	Compensated  *uint256.Int  `json:"compensated"`
	ValidatorFee *uint256.Int  `json:"validator_fee"`
	Posted       int64         `json:"posted"`
	Awarded      int64         `json:"awarded"`
	Completed    int64         `json:"completed"`
	Elapsed      time.Duration `json:"elapsed"`
}

// FinetuneWindows fills the zero windows of w for a fine-tune job of
// steps steps on r providers: bid 5, reveal 5, verify 20 blocks and an
// execute window of max(20, ⌈steps × FinetuneStepTime × 3 / blockTime⌉)
// blocks (blockTime 0: DevnetBlockTime). It checks the job's life against
// max_job_blocks and, with the longest bracket of step-bisection games
// its slots can play, against unbonding_blocks, as the chain will.
func FinetuneWindows(steps uint64, r uint16, blockTime time.Duration, p *genesis.Params, w market.Windows) (market.Windows, error) {
	if blockTime <= 0 {
		blockTime = DevnetBlockTime
	}
	if w.Bid == 0 {
		w.Bid = DefaultFinetuneBid
	}
	if w.Reveal == 0 {
		w.Reveal = DefaultFinetuneReveal
	}
	if w.Verify == 0 {
		w.Verify = DefaultFinetuneVerify
	}
	if w.Execute == 0 {
		need := time.Duration(steps) * FinetuneStepTime * finetuneTimeMargin
		w.Execute = max(MinFinetuneExecute, uint64((need+blockTime-1)/blockTime))
	}
	mp := p.Market
	if mp.Finetune == nil {
		return w, errors.New("this chain takes no fine-tune jobs (its params.market.finetune is not set)")
	}
	for _, win := range []struct {
		name string
		v    uint64
	}{{"bid", w.Bid}, {"reveal", w.Reveal}, {"execute", w.Execute}, {"verify", w.Verify}} {
		if win.v > mp.MaxJobBlocks {
			return w, fmt.Errorf("the %s window of %d blocks is longer than the chain's max_job_blocks (%d): fewer epochs or less data (%d steps), or shorter windows", win.name, win.v, mp.MaxJobBlocks, steps)
		}
	}
	// The market's life of a one-stage job (market.jobLife): bid + reveal
	// + 2 × (execute + verify) + dispute blocks.
	life := w.Bid + w.Reveal + 2*(w.Execute+w.Verify) + mp.DisputeBlocks
	if life > mp.MaxJobBlocks {
		return w, fmt.Errorf("the job would live %d blocks (bid %d + reveal %d + 2 × (execute %d + verify %d) + %d dispute blocks), more than the chain's max_job_blocks (%d): fewer epochs or less data (%d steps), or shorter windows",
			life, w.Bid, w.Reveal, w.Execute, w.Verify, mp.DisputeBlocks, mp.MaxJobBlocks, steps)
	}
	games := finetune.Params(*mp.Finetune).MaxBracketBlocks(uint64(r), 1, steps)
	if life+games >= p.Staking.UnbondingBlocks {
		return w, fmt.Errorf("the job's life (%d blocks) and the longest bracket of step-bisection games its %d providers can play (%d blocks) must stay below the chain's unbonding_blocks (%d): fewer epochs or less data (%d steps), fewer providers or shorter windows",
			life, r, games, p.Staking.UnbondingBlocks, steps)
	}
	return w, nil
}

// PlanFinetune checks j and plans it against the chain's parameters p,
// without posting: the runtime's own checks (the dataset UTF-8 and within
// bounds, the hyper-parameters, the trainable set, the base model F32 and
// untied), the step count with the base model's tokenizer, the chain's
// bounds and the windows. Each refusal says what to change.
func PlanFinetune(j FinetuneJob, p *genesis.Params) (*FinetunePlan, error) {
	j = j.withDefaults()
	tp := j.params()
	if err := tp.Validate(); err != nil {
		return nil, fmt.Errorf("cannot post the fine-tune job: %w", err)
	}
	mp := p.Market
	switch {
	case mp.Finetune == nil:
		return nil, errors.New("cannot post the fine-tune job: this chain takes no fine-tune jobs (its params.market.finetune is not set)")
	case uint64(len(j.Data)) > mp.Finetune.MaxDatasetBytes:
		return nil, fmt.Errorf("cannot post the fine-tune job: the dataset has %d bytes, the chain takes at most %d (params.market.finetune.max_dataset_bytes): shorten it", len(j.Data), mp.Finetune.MaxDatasetBytes)
	case j.Redundancy < 2 || uint64(j.Redundancy) > mp.MaxRedundancy:
		return nil, fmt.Errorf("cannot post the fine-tune job: redundancy %d: want 2..%d providers (3 beats a cartel of two)", j.Redundancy, mp.MaxRedundancy)
	case j.MaxPrice == nil || j.MaxPrice.IsZero():
		return nil, errors.New("cannot post the fine-tune job: give a positive price cap per provider")
	}
	pl, err := CheckFinetune(j)
	if err != nil {
		return nil, err
	}
	if uint64(pl.Steps) > mp.Finetune.MaxSteps {
		return nil, fmt.Errorf("cannot post the fine-tune job: %d steps, the chain takes at most %d (params.market.finetune.max_steps): fewer epochs, a larger stride or less data", pl.Steps, mp.Finetune.MaxSteps)
	}
	w, err := FinetuneWindows(uint64(pl.Steps), j.Redundancy, j.BlockTime, p, j.Windows)
	if err != nil {
		return nil, fmt.Errorf("cannot post the fine-tune job: %w", err)
	}
	base, size, err := blobstore.HashFile(j.Base)
	if err != nil {
		return nil, fmt.Errorf("cannot post the fine-tune job: %w", err)
	}
	h0, err := train.HashCheckpoint(j.Base, j.Trainable)
	if err != nil {
		return nil, fmt.Errorf("cannot post the fine-tune job: the base model's trained tensors: %w", err)
	}
	data := types.Hash(sha256.Sum256(j.Data))
	msg := &market.MsgPostJob{
		Kind: market.KindFinetune, Mode: market.ModeAuction, Model: base, ModelSize: size, Stages: 1,
		Redundancy: j.Redundancy, MaxPrice: j.MaxPrice, Input: data, Windows: w,
		Req: market.Requirements{MinStake: new(uint256.Int), Runtime: RuntimeTrain, Class: j.Class, Attributes: j.Attributes},
		Finetune: &market.FinetuneTerms{
			Base: types.Hash(h0), DatasetSize: uint64(len(j.Data)), Epochs: uint64(j.Epochs), LRMicro: uint64(j.LRMicro),
			Ctx: uint64(j.Ctx), Stride: uint64(j.Stride), Validation: uint64(j.Validation), Steps: uint64(pl.Steps), Trainable: j.Trainable,
		},
	}
	// Every job carries a random seal (postJob's reason); the fine-tune
	// seed derives from it and the award block (market.FinetuneSeed).
	if _, err := rand.Read(msg.Seal[:]); err != nil {
		return nil, err
	}
	// The chain's stateless checks, here, so that a bad post costs no fee.
	if _, err := market.DecodeMsgPostJob(msg.Raw().Data); err != nil {
		return nil, fmt.Errorf("cannot post the fine-tune job: %w", err)
	}
	return &FinetunePlan{Msg: msg, Plan: pl, Data: data, Base: base}, nil
}

// CheckFinetune is the part of PlanFinetune that needs no chain: the
// runtime's checks of j (defaults applied) and its step count with the
// base model's tokenizer. A command calls it before it dials a node, so
// that bad input fails at once.
func CheckFinetune(j FinetuneJob) (train.Plan, error) {
	j = j.withDefaults()
	tp := j.params()
	if err := tp.Validate(); err != nil {
		return train.Plan{}, fmt.Errorf("cannot post the fine-tune job: %w", err)
	}
	if err := train.CheckModel(j.Base, j.Trainable); err != nil {
		return train.Plan{}, fmt.Errorf("cannot post the fine-tune job: %w", err)
	}
	pl, err := train.PlanJob(tp)
	if err != nil {
		return train.Plan{}, fmt.Errorf("cannot post the fine-tune job: %w", err)
	}
	return pl, nil
}

func (j FinetuneJob) withDefaults() FinetuneJob {
	if j.Epochs == 0 {
		j.Epochs = DefaultFinetuneEpochs
	}
	if j.LRMicro == 0 {
		j.LRMicro = DefaultFinetuneLRMicro
	}
	if j.Ctx == 0 {
		j.Ctx = DefaultFinetuneCtx
	}
	if j.Stride == 0 {
		j.Stride = min(DefaultFinetuneStride, j.Ctx)
	}
	if j.Trainable == "" {
		j.Trainable = train.SetHead
	}
	if j.Redundancy == 0 {
		j.Redundancy = 2
	}
	if j.Class == "" {
		j.Class = train.BuildClass()
	}
	return j
}

// params are the runtime's parameters of j (the seed is fixed at the
// award and does not change the step count).
func (j FinetuneJob) params() train.Params {
	return train.Params{Model: j.Base, Data: j.Data, Epochs: j.Epochs, LRMicro: j.LRMicro, NCtx: j.Ctx, Stride: j.Stride,
		Trainable: j.Trainable, Threads: 1, Validation: j.Validation}
}

// Progress lines of a fine-tune job's stream (the provider's side writes
// them with these functions, the client parses them).

// FinetuneEpochLine is the progress line at the end of epoch e of n.
func FinetuneEpochLine(e, n int, loss, val float64) string {
	return fmt.Sprintf("epoch %d/%d loss %.4f val %.4f", e, n, loss, val)
}

// FinetuneStepLine is the progress line after step s of n.
func FinetuneStepLine(s, n int) string { return fmt.Sprintf("step %d/%d", s, n) }

// MaxFinetuneStepLines bounds the step lines a provider streams in a run.
const MaxFinetuneStepLines = 100

// FinetuneStepReported says whether the provider streams a step line
// after step s of n: every ⌈n/100⌉-th step and the last, at most
// MaxFinetuneStepLines (+1) lines.
func FinetuneStepReported(s, n int) bool {
	every := max(1, (n+MaxFinetuneStepLines-1)/MaxFinetuneStepLines)
	return s == n || s%every == 0
}

// FinetuneProgress is a parsed progress line: an epoch's end (Epoch > 0)
// or a step (Step > 0).
type FinetuneProgress struct {
	Epoch, Epochs int
	Loss, Val     float64
	Step, Steps   int
}

// maxProgressLine bounds a progress line (a provider's text is untrusted).
const maxProgressLine = 200

// ParseFinetuneProgress parses a line of FinetuneEpochLine or
// FinetuneStepLine; false for anything else.
func ParseFinetuneProgress(line string) (FinetuneProgress, bool) {
	line = strings.TrimSpace(line)
	if len(line) > maxProgressLine {
		return FinetuneProgress{}, false
	}
	f := strings.Fields(line)
	frac := func(s string) (int, int, bool) {
		a, b, ok := strings.Cut(s, "/")
		x, err1 := strconv.Atoi(a)
		y, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || x < 1 || y < x {
			return 0, 0, false
		}
		return x, y, true
	}
	num := func(s string) (float64, bool) {
		v, err := strconv.ParseFloat(s, 64)
		return v, err == nil && !math.IsInf(v, 0)
	}
	switch {
	case len(f) == 2 && f[0] == "step":
		s, n, ok := frac(f[1])
		return FinetuneProgress{Step: s, Steps: n}, ok
	case len(f) == 6 && f[0] == "epoch" && f[2] == "loss" && f[4] == "val":
		e, n, ok := frac(f[1])
		loss, ok1 := num(f[3])
		val, ok2 := num(f[5])
		return FinetuneProgress{Epoch: e, Epochs: n, Loss: loss, Val: val}, ok && ok1 && ok2
	}
	return FinetuneProgress{}, false
}

// RunFinetune plans j (refusing bad input before anything is posted),
// stores the base model and the dataset in the client's store, posts the
// job, serves the dataset to the winners, shows the first winner's
// progress (epoch lines to onEpoch, steps to j.OnStep), and once the task
// settled with a paid outcome fetches the fine-tuned model from the paid
// providers, verifies it (FetchFinetuneModel) and writes it to
// j.OutDir/finetune-JOB.gguf.
func (c *Client) RunFinetune(ctx context.Context, j FinetuneJob, progress Progress, onEpoch func(string)) (*FinetuneResult, error) {
	if progress == nil {
		progress = func(string, ...any) {}
	}
	start := time.Now()
	j = j.withDefaults()
	params, err := c.Chain.Params(ctx)
	if err != nil {
		return nil, err
	}
	if j.BlockTime == 0 {
		j.BlockTime = c.BlockTime(ctx)
	}
	if j.BlockTime == 0 {
		j.BlockTime = DevnetBlockTime
	}
	plan, err := PlanFinetune(j, params)
	if err != nil {
		return nil, err
	}
	progress("planned %d steps: %d tokens, %d datapoints (%d trained, %d held out), %d epochs; execute window %d blocks of about %s",
		plan.Plan.Steps, plan.Plan.Tokens, plan.Plan.Datapoints, plan.Plan.Trained, j.Validation, j.Epochs, plan.Msg.Windows.Execute, j.BlockTime.Round(time.Millisecond))
	if !c.Store.Has(plan.Base) {
		// Kept so that the fine-tuned model can be rebuilt and checked
		// against it, now and by a later FetchFinetuneModel.
		if _, err := c.Store.PutFile(j.Base); err != nil {
			return nil, fmt.Errorf("cannot keep the base model in the client's store: %w", err)
		}
	}
	if h, err := c.Store.Put(j.Data); err != nil {
		return nil, fmt.Errorf("cannot store the dataset: %w", err)
	} else if h != plan.Data {
		return nil, fmt.Errorf("the store hashed the dataset to %x, not %x", h, plan.Data)
	}
	height, posted, err := c.postJob(ctx, plan.Msg, RuntimeTrain, plan.Data)
	if err != nil {
		return nil, err
	}
	id := posted.Job
	if j.OnPosted != nil {
		j.OnPosted(id, height)
	}
	progress("posted fine-tune job %d at height %d: %s locked, sealed bids until %d, reveals until %d", id, height,
		types.FormatAmount(posted.Locked), posted.BidEnd, posted.RevealEnd)
	out := &FinetuneResult{Job: id, Plan: plan.Plan, Class: j.Class, BlockTime: j.BlockTime, Posted: height}
	err = c.followFinetune(ctx, id, height, j, out, progress, onEpoch)
	out.Elapsed = time.Since(start)
	return out, err
}

// BlockTime estimates the chain's block interval from the header times of
// its last blocks (at most 20, block 1 left out: it follows the genesis
// time, not a block); 0 when it cannot tell.
func (c *Client) BlockTime(ctx context.Context) time.Duration {
	h, err := c.Chain.CommittedHeight(ctx)
	if err != nil || h < 4 {
		return 0
	}
	info, err := c.Chain.RPC.BlockchainInfo(ctx, max(2, h-19), h)
	if err != nil || len(info.BlockMetas) < 2 {
		return 0
	}
	lo, hi := info.BlockMetas[0].Header, info.BlockMetas[0].Header
	for _, m := range info.BlockMetas {
		if m.Header.Height < lo.Height {
			lo = m.Header
		}
		if m.Header.Height > hi.Height {
			hi = m.Header
		}
	}
	if hi.Height <= lo.Height || !hi.Time.After(lo.Time) {
		return 0
	}
	return max(minBlockTime, hi.Time.Sub(lo.Time)/time.Duration(hi.Height-lo.Height))
}

// minBlockTime bounds a measured block interval from below (a window in
// blocks must not grow without bound on a burst of fast blocks).
const minBlockTime = 20 * time.Millisecond

// followFinetune watches fine-tune job id from height from until it
// completes or expires, then fetches and verifies its model.
func (c *Client) followFinetune(ctx context.Context, id uint64, from int64, j FinetuneJob, out *FinetuneResult, progress Progress, onEpoch func(string)) error {
	ctx, cancel := context.WithCancel(ctx)
	blocks, err := c.Chain.Subscribe(ctx, from)
	if err != nil {
		cancel()
		return err
	}
	var streams sync.WaitGroup
	defer func() {
		cancel()
		for range blocks { // until the subscription has stopped
		}
		streams.Wait()
		c.Access.Forget(id)
	}()
	var mu sync.Mutex // guards out's losses while the stream runs
	onPiece := func(piece string) {
		for _, line := range strings.Split(piece, "\n") {
			pr, ok := ParseFinetuneProgress(line)
			switch {
			case !ok:
			case pr.Step > 0 && j.OnStep != nil:
				j.OnStep(pr.Step, pr.Steps)
			case pr.Epoch > 0:
				mu.Lock()
				out.EpochLoss = append(out.EpochLoss, pr.Loss)
				out.ValLoss = append(out.ValLoss, pr.Val)
				mu.Unlock()
				if onEpoch != nil {
					onEpoch(strings.TrimSpace(line))
				}
			}
		}
	}
	for b := range blocks {
		for _, ev := range b.Events {
			reportEvent(ev, id, false, progress)
			switch ev.Type {
			case market.EventJobAwarded{}.EventType():
				first, ok := c.followAward(ctx, ev, b.Height, id, "checkpoint roots", progress, &out.Awarded)
				if ok && out.StreamedFrom == (types.Address{}) {
					out.StreamedFrom = first
					streams.Add(1)
					go func() {
						defer streams.Done()
						pid, err := connectProvider(ctx, c.Host, c.Chain, first)
						if err != nil {
							progress("warning: no progress stream: %v", err)
							return
						}
						h, err := StreamTokens(ctx, c.Host, pid, id, onPiece)
						if err != nil {
							if ctx.Err() == nil {
								progress("warning: progress stream: %v", err)
							}
							return
						}
						c.rememberModel(id, first, h)
						progress("%s finished training: model %x", first.Hex(), h[:8])
					}()
				}
			case market.EventSlotReassigned{}.EventType(), market.EventTaskSettled{}.EventType(), market.EventJobExpired{}.EventType():
				if err := c.followCommon(ctx, ev, b.Height, id, progress, &out.Outcome, &out.Result, &out.Refunded, &out.Completed); err != nil {
					return err
				}
			case market.EventJobCompleted{}.EventType():
				var e market.EventJobCompleted
				if types.DecodeEvent(ev, &e) != nil || e.Job != id {
					continue
				}
				out.Paid, out.Refunded, out.Compensated, out.ValidatorFee, out.Completed = e.Paid, e.Refunded, e.Compensated, e.ValidatorFee, b.Height
				if !FinetunePaidOutcome(out.Outcome) {
					return fmt.Errorf("job %d ended without a verified model (%s): %s refunded", id, out.Outcome, types.FormatAmount(e.Refunded))
				}
				// The stream's last word (the model's hash) may still be
				// on its way: give it a moment before fetching.
				waitStreams(&streams, 10*time.Second)
				path := filepath.Join(j.OutDir, fmt.Sprintf("finetune-%d.gguf", id))
				m, err := c.FetchFinetuneModel(ctx, id, path)
				if err != nil {
					return fmt.Errorf("job %d settled (%s) but its model is not fetched yet: %w (retry with ogpu job result %d --out FILE)", id, out.Outcome, err, id)
				}
				out.Final, out.Model, out.ModelHash, out.From = m.Final, m.Path, m.Hash, m.From
				return nil
			}
		}
	}
	return ctx.Err()
}

// waitStreams waits for wg at most d.
func waitStreams(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// FinetunePaidOutcome says whether a fine-tune task that settled with
// outcome paid providers for a model: "agreed" (equal results),
// "agreed_final" (trees differ, finals agree) and "game" (the bisection
// games' survivors).
func FinetunePaidOutcome(outcome string) bool {
	return outcome == "agreed" || outcome == "agreed_final" || outcome == "game"
}

// PaidFinal is the final hash a settled fine-tune job paid for, and the
// providers paid for it, the settled result's first: the live revealed
// slots with that final that lost no game. (Every paid slot has it: equal
// results, one final over several trees, or a bracket's survivors, who
// share one final.)
func PaidFinal(j *chain.JobView) (types.Hash, []types.Address, error) {
	if j.Kind != market.KindFinetune {
		return types.Hash{}, nil, fmt.Errorf("job %d is a %s job, not finetune", j.ID, j.Kind)
	}
	if len(j.Tasks) == 0 || j.Tasks[0].Status != "settled" {
		return types.Hash{}, nil, fmt.Errorf("job %d has not settled yet (%s)", j.ID, j.Phase)
	}
	t := j.Tasks[0]
	if t.Verdict == (types.Hash{}) {
		return types.Hash{}, nil, fmt.Errorf("job %d settled without paying for a model (a class failure, unresolved, or no results): the client was refunded, there is no model to fetch", j.ID)
	}
	var final *types.Hash
	for _, s := range t.Slots {
		if s.Result != nil && *s.Result == t.Verdict && s.Final != nil {
			final = s.Final
			break
		}
	}
	if final == nil {
		return types.Hash{}, nil, fmt.Errorf("job %d: no slot revealed the settled result %x with its final hash", j.ID, t.Verdict[:8])
	}
	var lost []types.Address
	for _, g := range t.Games {
		for _, gr := range g.Groups {
			if gr.Lost {
				lost = append(lost, gr.Slots...)
			}
		}
	}
	var first, rest []types.Address
	for _, s := range t.Slots {
		if !s.Revealed || s.NoShow || s.Final == nil || *s.Final != *final || slices.Contains(lost, s.Provider) {
			continue
		}
		if slices.Contains(first, s.Provider) || slices.Contains(rest, s.Provider) {
			continue
		}
		if *s.Result == t.Verdict {
			first = append(first, s.Provider)
		} else {
			rest = append(rest, s.Provider)
		}
	}
	return *final, append(first, rest...), nil
}

// FetchedModel is a fine-tuned model fetched and verified.
type FetchedModel struct {
	Job   uint64        `json:"job"`
	Path  string        `json:"path"`
	Hash  types.Hash    `json:"hash"`  // the GGUF file's sha256
	Final types.Hash    `json:"final"` // its trained tensors' hash, the paid final
	From  types.Address `json:"from"`
}

// ErrModelRefused marks a fine-tuned model a provider served that does not
// match what the chain paid for.
var ErrModelRefused = errors.New("fine-tuned model refused")

// FetchFinetuneModel fetches the model of settled fine-tune job id from
// the providers that were paid for it and writes it to out once verified
// against the paid final hash and the base model (which the client's
// store keeps since RunFinetune, else fetched from the network by its
// hash). In order: a model file a paid provider announced that the store
// already holds (VerifyFinetuneModel); then from each paid provider its
// final checkpoint (CheckpointProtocol, VerifyFinetuneCheckpoint), else
// its whole model file by the hash it announced on the stream
// (VerifyFinetuneModel). A provider's model that does not verify is
// refused and the next provider is tried.
func (c *Client) FetchFinetuneModel(ctx context.Context, id uint64, out string) (*FetchedModel, error) {
	j, err := c.Chain.Job(ctx, id)
	if err != nil {
		return nil, err
	}
	if j.Client != c.Address() {
		return nil, fmt.Errorf("job %d belongs to %s: providers serve a fine-tuned model to its client only", id, j.Client.Hex())
	}
	final, paid, err := PaidFinal(j)
	if err != nil {
		return nil, err
	}
	if len(paid) == 0 {
		return nil, fmt.Errorf("job %d: no paid provider to fetch the model from", id)
	}
	base, err := c.baseModel(ctx, j)
	if err != nil {
		return nil, err
	}
	known := c.knownModels(id)
	var errs []error
	// A model a paid provider announced and this store already holds (a
	// run fetched it) needs no network.
	for _, prov := range paid {
		h, ok := known[prov]
		if !ok || !c.Store.Has(h) {
			continue
		}
		path, err := c.Store.Path(h)
		if err == nil {
			err = VerifyFinetuneModel(base, path, final, out)
		}
		if err == nil {
			return &FetchedModel{Job: id, Path: out, Hash: h, Final: final, From: prov}, nil
		}
		errs = append(errs, fmt.Errorf("provider %s: %w", prov.Hex(), err))
		if errors.Is(err, ErrModelRefused) {
			_ = c.Store.Delete(h)
		}
	}
	for _, prov := range paid {
		pid, err := connectProvider(ctx, c.Host, c.Chain, prov)
		if err != nil {
			errs = append(errs, fmt.Errorf("provider %s: %w", prov.Hex(), err))
			continue
		}
		// The final checkpoint (the trained head alone, CheckpointProtocol)
		// is the least to fetch: the model is the base with it applied.
		m, err := c.fetchFinalCheckpoint(ctx, pid, j, base, final, out)
		if err == nil {
			m.From = prov
			return m, nil
		}
		errs = append(errs, fmt.Errorf("provider %s: %w", prov.Hex(), err))
		if errors.Is(err, ErrModelRefused) {
			continue // it served a head other than the one it was paid for
		}
		// Else the whole model file, by the hash it announced.
		hashes := modelCandidates(known, prov)
		if _, ok := known[prov]; !ok {
			// Ask the provider which file it made (the stream replays its
			// last word while it still holds the job).
			sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			h, err := StreamTokens(sctx, c.Host, pid, id, nil)
			cancel()
			if err == nil {
				c.rememberModel(id, prov, h)
				hashes = append([]types.Hash{h}, hashes...)
			} else if len(hashes) == 0 {
				errs = append(errs, fmt.Errorf("provider %s did not say which model it made: %w", prov.Hex(), err))
				continue
			}
		}
		for _, h := range hashes {
			if c.Store.Has(h) {
				continue // tried above, or not this provider's to vouch for
			}
			fctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			_, err := c.Host.Fetch(fctx, h, p2p.FetchOptions{Peers: []peer.ID{pid}, MaxSize: int64(j.ModelSize)})
			cancel()
			if err != nil {
				errs = append(errs, fmt.Errorf("provider %s: fetch model %x: %w", prov.Hex(), h[:8], err))
				continue
			}
			path, err := c.Store.Path(h)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if err := VerifyFinetuneModel(base, path, final, out); err != nil {
				errs = append(errs, fmt.Errorf("provider %s: %w", prov.Hex(), err))
				if errors.Is(err, ErrModelRefused) {
					_ = c.Store.Delete(h)
				}
				continue
			}
			return &FetchedModel{Job: id, Path: out, Hash: h, Final: final, From: prov}, nil
		}
	}
	return nil, fmt.Errorf("job %d: no paid provider served a model whose trained tensors hash to the paid final %x: %w", id, final[:8], errors.Join(errs...))
}

// fetchFinalCheckpoint fetches the checkpoint after the last step of job
// j from provider pid and writes the model it makes with the base to out
// (VerifyFinetuneCheckpoint).
func (c *Client) fetchFinalCheckpoint(ctx context.Context, pid peer.ID, j *chain.JobView, base string, final types.Hash, out string) (*FetchedModel, error) {
	if dir := filepath.Dir(out); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	tmp := out + ".head"
	defer os.Remove(tmp)
	fctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	err := FetchCheckpoint(fctx, c.Host, pid, j.ID, 0, j.Finetune.Steps, tmp)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("final checkpoint: %w", err)
	}
	if err := VerifyFinetuneCheckpoint(base, tmp, final, out); err != nil {
		return nil, err
	}
	h, _, err := fileHash(out)
	if err != nil {
		return nil, err
	}
	return &FetchedModel{Job: j.ID, Path: out, Hash: h, Final: final}, nil
}

// VerifyFinetuneCheckpoint checks a fine-tune job's final checkpoint (the
// trained tensors alone, train.EncodeCheckpoint) against the final hash
// the chain paid for and writes the model it makes, the base with those
// tensors (train.WriteModel), to out. A refusal wraps ErrModelRefused
// (and train.ErrCheckpointMismatch for a wrong hash); nothing is written
// then.
func VerifyFinetuneCheckpoint(base, checkpoint string, final types.Hash, out string) error {
	ts, err := train.ReadCheckpoint(checkpoint, train.SetHead)
	if err != nil {
		return fmt.Errorf("%w: the final checkpoint is not a trained head: %v", ErrModelRefused, err)
	}
	got, err := train.HashTensors(ts)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrModelRefused, err)
	}
	if types.Hash(got) != final {
		return fmt.Errorf("%w: %w: the final checkpoint's tensors hash %x, the job paid for final hash %x", ErrModelRefused, train.ErrCheckpointMismatch, got[:8], final[:8])
	}
	if err := train.WriteModel(base, out, ts); err != nil {
		return fmt.Errorf("%w: the final checkpoint does not fit the base model: %v", ErrModelRefused, err)
	}
	return nil
}

// baseModel is the path of job j's base model: in the client's store, or
// fetched from the providers that advertise it.
func (c *Client) baseModel(ctx context.Context, j *chain.JobView) (string, error) {
	if !c.Store.Has(j.Model) {
		fctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		_, err := c.Host.Fetch(fctx, j.Model, p2p.FetchOptions{MaxSize: int64(j.ModelSize)})
		cancel()
		if err != nil {
			return "", fmt.Errorf("the base model %x of job %d is not in the client's store and cannot be fetched (it is needed to check the fine-tuned model): %w", j.Model[:8], j.ID, err)
		}
	}
	return c.Store.Path(j.Model)
}

// modelCandidates are the model hashes to try from prov: its own first,
// then those other providers announced (honest files are identical).
func modelCandidates(known map[types.Address]types.Hash, prov types.Address) []types.Hash {
	var out []types.Hash
	if h, ok := known[prov]; ok {
		out = append(out, h)
	}
	keys := make([]types.Address, 0, len(known))
	for a := range known {
		keys = append(keys, a)
	}
	slices.SortFunc(keys, func(a, b types.Address) int { return strings.Compare(a.Hex(), b.Hex()) })
	for _, a := range keys {
		if h := known[a]; !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}

// modelRecord is where the client keeps the model hashes providers
// announced for a job (so that a later process can fetch them):
// STORE/finetune/JOB.json.
func (c *Client) modelRecord(id uint64) string {
	return filepath.Join(c.Store.Dir(), "finetune", strconv.FormatUint(id, 10)+".json")
}

func (c *Client) rememberModel(id uint64, prov types.Address, h types.Hash) {
	c.ftMu.Lock()
	defer c.ftMu.Unlock()
	m := c.readModels(id)
	m[prov] = h
	bz, err := json.Marshal(m)
	if err == nil {
		path := c.modelRecord(id)
		if err = os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
			err = os.WriteFile(path, bz, 0o644)
		}
	}
	if err != nil {
		c.Logger.Warn("cannot record the fine-tuned model's hash", "job", id, "err", err)
	}
}

func (c *Client) knownModels(id uint64) map[types.Address]types.Hash {
	c.ftMu.Lock()
	defer c.ftMu.Unlock()
	return c.readModels(id)
}

func (c *Client) readModels(id uint64) map[types.Address]types.Hash {
	m := map[types.Address]types.Hash{}
	if bz, err := os.ReadFile(c.modelRecord(id)); err == nil {
		_ = json.Unmarshal(bz, &m)
	}
	return m
}

// VerifyFinetuneModel checks a fine-tuned model file against the final
// hash the chain paid for and writes the verified model to out: its
// trained tensors must hash to final (train.HashCheckpoint), and the file
// must be exactly the base model with those tensors' bytes replaced
// (train.WriteModel), so that nothing the chain did not check (another
// tensor, the metadata) differs from the base. A refusal wraps
// ErrModelRefused (and train.ErrCheckpointMismatch for a wrong hash);
// nothing is written then.
func VerifyFinetuneModel(base, model string, final types.Hash, out string) error {
	ts, err := train.ReadCheckpoint(model, train.SetHead)
	if err != nil {
		return fmt.Errorf("%w: it is not a model with a trainable head: %v", ErrModelRefused, err)
	}
	got, err := train.HashTensors(ts)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrModelRefused, err)
	}
	if types.Hash(got) != final {
		return fmt.Errorf("%w: %w: its trained tensors hash %x, the job paid for final hash %x", ErrModelRefused, train.ErrCheckpointMismatch, got[:8], final[:8])
	}
	if dir := filepath.Dir(out); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	tmp := out + ".verify"
	defer os.Remove(tmp)
	if err := train.WriteModel(base, tmp, ts); err != nil {
		return fmt.Errorf("%w: its trained tensors do not fit the base model: %v", ErrModelRefused, err)
	}
	same, err := sameFile(tmp, model)
	if err != nil {
		return err
	}
	if !same {
		return fmt.Errorf("%w: its trained tensors hash to the paid final, but the file differs from the base model elsewhere (metadata or untrained tensors the chain did not check)", ErrModelRefused)
	}
	return os.Rename(tmp, out)
}

// SampleModel is a greedy generation of at most tokens tokens after prompt
// from the GGUF model at path (runtime/llm, in this process): how a client
// sees what its fine-tuned model learned.
func SampleModel(ctx context.Context, path, prompt string, tokens int) (string, error) {
	if prompt == "" || tokens < 1 {
		return "", fmt.Errorf("sample: want a prompt and at least one token")
	}
	m, err := llm.Load(path, llm.Options{Threads: 1, ContextSize: 512, BatchSize: 64})
	if err != nil {
		return "", fmt.Errorf("cannot load the fine-tuned model: %w", err)
	}
	defer m.Close()
	out, err := m.Generate(ctx, llm.Request{Prompt: prompt, MaxTokens: tokens}, nil)
	if err != nil {
		return "", fmt.Errorf("cannot generate with the fine-tuned model: %w", err)
	}
	return out.Text, nil
}

// sameFile compares two files' bytes.
func sameFile(a, b string) (bool, error) {
	ha, sa, err := fileHash(a)
	if err != nil {
		return false, err
	}
	hb, sb, err := fileHash(b)
	if err != nil {
		return false, err
	}
	return sa == sb && ha == hb, nil
}

func fileHash(path string) ([32]byte, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return [32]byte{}, 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return [32]byte{}, 0, err
	}
	return [32]byte(h.Sum(nil)), n, nil
}
