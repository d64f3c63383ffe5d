package agent

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/he"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/types"
)

// PipelineJob is an encrypted pipeline job to post: a model, the
// client's keys and an input, encrypted here unless given encrypted.
type PipelineJob struct {
	Model *he.Model
	// Key is the client's secret key; it never leaves this process.
	Key *he.SecretKey
	// EvalKeys is the encoded evaluation key set of Key (the blob
	// providers fetch once and cache by its hash).
	EvalKeys []byte
	// Input is encrypted under Key; Ciphertext, if set, is used instead.
	Input      []float64
	Ciphertext []byte
	Redundancy uint16
	MaxPrice   *uint256.Int // per stage replica
	Req        market.Requirements
	Windows    market.Windows
	// Short: as LLMJob.Short (a pipeline with a stage refunded at the
	// close expires).
	Short string
}

// StageResult is how one stage settled.
type StageResult struct {
	Stage   uint16
	Outcome string
	Result  types.Hash
}

// PipelineResult is how a pipeline job ended.
type PipelineResult struct {
	Job uint64
	// Outcome is "verified" when every stage settled on a verified
	// result, else the first stage's failure or "expired".
	Outcome string
	Stages  []StageResult
	// Output is the decrypted result (the model's outputs), Ciphertext
	// the final stage's output as fetched.
	Output     []float64
	Ciphertext []byte
	// Sizes of what the client published.
	ModelBytes, KeyBytes, InputBytes int
	Paid, Refunded, Compensated      *uint256.Int
	ValidatorFee                     *uint256.Int
	Posted, Completed                int64
	Elapsed                          time.Duration
}

// RunPipeline publishes the model, the evaluation keys and the encrypted
// input as blobs only the job's parties may fetch, posts the job, serves
// them to the providers that win it, follows every stage, and at the end
// fetches the final ciphertext and decrypts it.
func (c *Client) RunPipeline(ctx context.Context, j PipelineJob, progress Progress) (*PipelineResult, error) {
	if progress == nil {
		progress = func(string, ...any) {}
	}
	start := time.Now()
	m := j.Model
	if err := m.Validate(); err != nil {
		return nil, err
	}
	if j.Key.Params.Name != m.Preset || j.Key.LogSlots != m.LogSlots {
		return nil, fmt.Errorf("the key is for preset %s width 2^%d, the model needs %s width 2^%d: generate keys with ogpu he keygen --preset %s --log-slots %d",
			j.Key.Params.Name, j.Key.LogSlots, m.Preset, m.LogSlots, m.Preset, m.LogSlots)
	}
	keys, err := he.UnmarshalEvalKeys(j.EvalKeys)
	if err != nil {
		return nil, err
	}
	if keys.ID != j.Key.ID {
		return nil, fmt.Errorf("the evaluation keys are for key %s, the secret key is %s: use the pair ogpu he keygen wrote", keys.ID, j.Key.ID)
	}
	ct := j.Ciphertext
	if ct == nil {
		if len(j.Input) != m.Inputs {
			return nil, fmt.Errorf("model %s takes %d inputs, got %d", m.Name, m.Inputs, len(j.Input))
		}
		enc, err := j.Key.Encrypt(j.Input)
		if err != nil {
			return nil, err
		}
		if ct, err = enc.Marshal(); err != nil {
			return nil, err
		}
	} else {
		parsed, err := he.UnmarshalCiphertext(ct)
		if err != nil {
			return nil, fmt.Errorf("input: %w", err)
		}
		if parsed.Key != j.Key.ID {
			return nil, fmt.Errorf("the input is encrypted under key %s, not %s", parsed.Key, j.Key.ID)
		}
	}
	modelBytes, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	var in PipelineInput
	in.Version = 1
	for _, b := range []struct {
		data []byte
		h    *types.Hash
	}{{modelBytes, &in.Model}, {j.EvalKeys, &in.Keys}, {ct, &in.Ciphertext}} {
		if *b.h, err = c.Store.Put(b.data); err != nil {
			return nil, err
		}
	}
	inHash, err := c.Store.Put(in.Encode())
	if err != nil {
		return nil, err
	}
	msg := &market.MsgPostJob{
		Kind: market.KindPipeline, Mode: market.ModeAuction, Model: in.Model, ModelSize: uint64(len(modelBytes)),
		Stages: uint16(len(m.Stages)), Redundancy: j.Redundancy, MaxPrice: j.MaxPrice, Req: j.Req, Input: inHash, Short: j.Short,
		Windows: j.Windows,
	}
	height, posted, err := c.postJob(ctx, msg, RuntimeCKKS, inHash, in.Model, in.Keys, in.Ciphertext)
	if err != nil {
		return nil, err
	}
	id := posted.Job
	progress("posted pipeline job %d at height %d: %d stages × %d replicas, model %x, evaluation keys %x (%.1f MB), input ciphertext %x (%.2f MB); %s locked",
		id, height, len(m.Stages), j.Redundancy, in.Model[:8], in.Keys[:8], float64(len(j.EvalKeys))/1e6, in.Ciphertext[:8],
		float64(len(ct))/1e6, types.FormatAmount(posted.Locked))
	out, err := c.followPipeline(ctx, id, height, progress)
	if out != nil {
		out.Posted, out.Elapsed = height, time.Since(start)
		out.ModelBytes, out.KeyBytes, out.InputBytes = len(modelBytes), len(j.EvalKeys), len(ct)
	}
	if err != nil || out.Outcome != "verified" {
		return out, err
	}
	if _, out.Ciphertext, err = c.FetchPipelineOutput(ctx, id); err != nil {
		return out, err
	}
	out.Output, err = DecryptOutput(j.Key, m, out.Ciphertext)
	return out, err
}

// DecryptOutput decrypts a pipeline's final ciphertext: model m's outputs.
func DecryptOutput(key *he.SecretKey, m *he.Model, ciphertext []byte) ([]float64, error) {
	ct, err := he.UnmarshalCiphertext(ciphertext)
	if err != nil {
		return nil, fmt.Errorf("the final output: %w", err)
	}
	return key.Decrypt(ct, m.Outputs())
}

// followPipeline watches pipeline job id until it completes or expires.
func (c *Client) followPipeline(ctx context.Context, id uint64, from int64, progress Progress) (*PipelineResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	blocks, err := c.Chain.Subscribe(ctx, from)
	if err != nil {
		cancel()
		return nil, err
	}
	var dials sync.WaitGroup
	defer func() {
		cancel()
		for range blocks {
		}
		dials.Wait()
		c.Access.Forget(id)
	}()
	out := &PipelineResult{Job: id}
	for b := range blocks {
		for _, ev := range b.Events {
			reportEvent(ev, id, true, progress)
			switch ev.Type {
			case market.EventJobAwarded{}.EventType():
				var e market.EventJobAwarded
				if types.DecodeEvent(ev, &e) != nil || e.Job != id {
					continue
				}
				when := fmt.Sprintf("results due by %d", e.CommitDeadline)
				if e.CommitDeadline == 0 {
					when = fmt.Sprintf("opens when stage %d settles", e.Stage-1)
				}
				progress("stage %d awarded at height %d: %s at %s each (uniform price); %s",
					e.Stage, b.Height, strings.Join(e.Providers, ", "), types.FormatAmount(e.Price), when)
				if e.Stage == 0 {
					providers := e.Providers
					dials.Add(1)
					go func() { // serve the input to the first stage
						defer dials.Done()
						c.keepDialing(ctx, providers, progress)
					}()
				}
			case market.EventStageOpened{}.EventType():
				var e market.EventStageOpened
				if types.DecodeEvent(ev, &e) == nil && e.Job == id {
					progress("stage %d opens at height %d on input %x; results due by %d", e.Stage, b.Height, e.Input[:8], e.CommitDeadline)
				}
			case market.EventTaskSettled{}.EventType():
				var e market.EventTaskSettled
				if types.DecodeEvent(ev, &e) != nil || e.Job != id {
					continue
				}
				out.Stages = append(out.Stages, StageResult{Stage: e.Stage, Outcome: e.Outcome, Result: e.Result})
				progress("stage %d settled (%s) at height %d on %x: %s paid to providers, %s refunded", e.Stage, e.Outcome, b.Height,
					e.Result[:8], types.FormatAmount(e.Paid), types.FormatAmount(e.Refund))
			case market.EventJobExpired{}.EventType():
				var e market.EventJobExpired
				if types.DecodeEvent(ev, &e) == nil && e.Job == id {
					out.Outcome, out.Refunded, out.Completed = "expired", e.Refund, b.Height
					return out, fmt.Errorf("job %d expired: %s; %s refunded", id, e.Reason, types.FormatAmount(e.Refund))
				}
			case market.EventJobCompleted{}.EventType():
				var e market.EventJobCompleted
				if types.DecodeEvent(ev, &e) != nil || e.Job != id {
					continue
				}
				out.Paid, out.Refunded, out.Compensated, out.ValidatorFee, out.Completed = e.Paid, e.Refunded, e.Compensated, e.ValidatorFee, b.Height
				out.Outcome = "verified"
				for _, s := range out.Stages {
					if !market.VerifiedOutcome(s.Outcome) {
						out.Outcome = s.Outcome
						return out, fmt.Errorf("job %d: stage %d settled without a verified result (%s): %s refunded", id, s.Stage, s.Outcome, types.FormatAmount(e.Refunded))
					}
				}
				return out, nil
			}
		}
	}
	return out, ctx.Err()
}

// FetchPipelineOutput fetches the settled output of pipeline job id (the
// final stage's ciphertext) and its model, from the client's own store or
// the providers that produced them.
func (c *Client) FetchPipelineOutput(ctx context.Context, id uint64) (*he.Model, []byte, error) {
	j, err := c.Chain.Job(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if j.Kind != market.KindPipeline {
		return nil, nil, fmt.Errorf("job %d is a %s job, not a pipeline", id, j.Kind)
	}
	last := len(j.Tasks) - 1
	if last < 0 || j.Tasks[last].Status != "settled" || j.Tasks[last].Verdict == (types.Hash{}) {
		return nil, nil, fmt.Errorf("job %d has no verified final output (%s)", id, j.Phase)
	}
	want := j.Tasks[last].Verdict
	if err := fetchVerdict(ctx, c.Host, c.Chain, c.Store, j, last, want); err != nil {
		return nil, nil, err
	}
	if err := fetchFromParties(ctx, c.Host, c.Chain, c.Store, j, j.Model); err != nil {
		return nil, nil, err
	}
	mb, err := c.Store.Get(j.Model)
	if err != nil {
		return nil, nil, err
	}
	m, err := he.ParseModel(mb)
	if err != nil {
		return nil, nil, err
	}
	ct, err := c.Store.Get(want)
	return m, ct, err
}
