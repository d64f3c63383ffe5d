package agent

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	ethcrypto "github.com/ethereum/go-ethereum/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// Validator is the validator agent: on a dispute over an inference job it
// fetches the prompt and every disputed output, checks each with one
// teacher-forced pass of the model, and votes for the output that is the
// model's greedy answer. On a dispute over a pipeline stage it re-executes
// the stage on its agreed input ciphertext and votes for the output whose
// hash it reproduces.
type Validator struct {
	Chain  *node.Client
	Key    *ecdsa.PrivateKey // the validator's operator account
	Host   *p2p.Host         // identity: the operator key
	Store  *blobstore.Store
	LLM    llm.Options
	Logger *slog.Logger

	sender *node.Sender
	work   sync.WaitGroup
	mu     sync.Mutex
	models map[types.Hash]*llm.Model
}

// NewValidator wires a validator agent.
func NewValidator(c *node.Client, key *ecdsa.PrivateKey, host *p2p.Host, store *blobstore.Store, o llm.Options) *Validator {
	return &Validator{Chain: c, Key: key, Host: host, Store: store, LLM: o, Logger: slog.Default(),
		sender: node.NewSender(c, key), models: make(map[types.Hash]*llm.Model)}
}

// Address is the operator account.
func (v *Validator) Address() types.Address { return ethcrypto.PubkeyToAddress(v.Key.PublicKey) }

// Close frees the loaded models.
func (v *Validator) Close() {
	v.mu.Lock()
	defer v.mu.Unlock()
	for h, m := range v.models {
		m.Close()
		delete(v.models, h)
	}
}

// Run follows the chain until ctx ends and votes on inference disputes.
func (v *Validator) Run(ctx context.Context) error {
	st, err := v.Chain.RPC.Status(ctx)
	if err != nil {
		return v.Chain.Unreachable(err)
	}
	blocks, err := v.Chain.Subscribe(ctx, st.SyncInfo.LatestBlockHeight+1)
	if err != nil {
		return err
	}
	for b := range blocks {
		for _, ev := range b.Events {
			if ev.Type != (market.EventDisputeOpened{}).EventType() {
				continue
			}
			var e market.EventDisputeOpened
			if types.DecodeEvent(ev, &e) != nil {
				continue
			}
			v.work.Add(1)
			go func() {
				defer v.work.Done()
				if err := v.Check(ctx, e.Job, e.Stage); err != nil {
					v.Logger.Error("dispute check failed", "job", e.Job, "stage", e.Stage, "err", err)
				}
			}()
		}
	}
	v.work.Wait()
	return ctx.Err()
}

// Verdict is the outcome of checking one disputed output.
type Verdict struct {
	Result   types.Hash
	Provider types.Address
	Mismatch *llm.Mismatch // nil: the output is the model's greedy answer
	Err      error         // the output could not be fetched or parsed
}

// Check re-checks disputed stage of job and votes for the verified output.
func (v *Validator) Check(ctx context.Context, job uint64, stage uint16) error {
	verdicts, err := v.Verify(ctx, job, stage)
	if err != nil {
		return err
	}
	for _, vd := range verdicts {
		if vd.Err == nil && vd.Mismatch == nil {
			msg := &verifier.MsgVoteDispute{Job: job, Stage: stage, Result: vd.Result}
			if _, err := v.sender.Send(ctx, msg.Raw()); err != nil {
				return fmt.Errorf("vote: %w", err)
			}
			v.Logger.Info("voted", "job", job, "stage", stage, "result", fmt.Sprintf("%x", vd.Result[:8]))
			return nil
		}
	}
	return fmt.Errorf("job %d stage %d: no disputed output is the model's answer; not voting", job, stage)
}

// Verify fetches the job's prompt, its model and each revealed output of
// stage, and checks every output with a teacher-forced pass.
func (v *Validator) Verify(ctx context.Context, job uint64, stage uint16) ([]Verdict, error) {
	j, err := v.Chain.Job(ctx, job)
	if err != nil {
		return nil, err
	}
	if int(stage) >= len(j.Tasks) {
		return nil, fmt.Errorf("job %d stage %d has no task", job, stage)
	}
	switch j.Kind {
	case market.KindPipeline:
		return v.verifyPipeline(ctx, j, int(stage))
	case market.KindInference:
	default:
		return nil, fmt.Errorf("job %d is a %s job: this agent checks inference and pipeline jobs", job, j.Kind)
	}
	t := j.Tasks[stage]
	// Who revealed what: outputs are fetched from the providers that
	// revealed them, the model from any of them.
	byResult := map[types.Hash][]peer.ID{}
	var order []types.Hash
	var allPeers []peer.ID
	results := map[types.Hash]types.Address{}
	for _, s := range t.Slots {
		if s.Result == nil {
			continue
		}
		pid, err := connectProvider(ctx, v.Host, v.Chain, s.Provider)
		if err != nil {
			v.Logger.Warn("provider unreachable", "provider", s.Provider.Hex(), "err", err)
			continue
		}
		if _, seen := byResult[*s.Result]; !seen {
			order = append(order, *s.Result)
			results[*s.Result] = s.Provider
		}
		byResult[*s.Result] = append(byResult[*s.Result], pid)
		allPeers = append(allPeers, pid)
	}
	in, err := v.fetchInput(ctx, j, allPeers)
	if err != nil {
		return nil, err
	}
	m, err := v.model(ctx, j.Model, allPeers)
	if err != nil {
		return nil, err
	}
	prompt, err := m.Tokenize(in.Prompt)
	if err != nil {
		return nil, err
	}
	var out []Verdict
	for _, h := range order {
		vd := Verdict{Result: h, Provider: results[h]}
		vd.Mismatch, vd.Err = v.checkOutput(ctx, m, j, h, byResult[h], prompt)
		out = append(out, vd)
		switch {
		case vd.Err != nil:
			v.Logger.Info("output rejected", "job", job, "provider", vd.Provider.Hex(), "err", vd.Err)
		case vd.Mismatch != nil:
			v.Logger.Info("output is not the model's answer", "job", job, "provider", vd.Provider.Hex(),
				"index", vd.Mismatch.Index, "claimed", vd.Mismatch.ClaimedPiece, "expected", vd.Mismatch.ExpectedPiece)
		default:
			v.Logger.Info("output verified", "job", job, "provider", vd.Provider.Hex())
		}
	}
	return out, nil
}

func (v *Validator) checkOutput(ctx context.Context, m *llm.Model, j *chain.JobView, h types.Hash, peers []peer.ID, prompt []int) (*llm.Mismatch, error) {
	if !v.Store.Has(h) {
		if _, err := v.Host.Fetch(ctx, h, p2p.FetchOptions{Peers: peers}); err != nil {
			return nil, err
		}
	}
	bz, err := v.Store.Get(h)
	if err != nil {
		return nil, err
	}
	o, err := DecodeLLMOutput(bz)
	if err != nil {
		return nil, err
	}
	if o.Job != j.ID {
		return nil, fmt.Errorf("the output names job %d, not %d", o.Job, j.ID)
	}
	mm, err := m.Verify(ctx, prompt, o.Tokens, int(j.MaxTokens))
	if err != nil || mm != nil {
		return mm, err
	}
	if want := m.Detokenize(withoutEOG(m, o.Tokens)); o.Text != want {
		return nil, errors.New("the output's text is not its tokens' text")
	}
	return nil, nil
}

// fetchInput gets the prompt from the client or from a provider that ran
// the job (both serve it to validators).
func (v *Validator) fetchInput(ctx context.Context, j *chain.JobView, providers []peer.ID) (*LLMInput, error) {
	if !v.Store.Has(j.Input) {
		if _, err := v.Host.Fetch(ctx, j.Input, p2p.FetchOptions{Peers: append(peersOf(v.Host, j.Client), providers...)}); err != nil {
			return nil, fmt.Errorf("cannot fetch the prompt of job %d: %w", j.ID, err)
		}
	}
	bz, err := v.Store.Get(j.Input)
	if err != nil {
		return nil, err
	}
	return DecodeLLMInput(bz)
}

func (v *Validator) model(ctx context.Context, h types.Hash, peers []peer.ID) (*llm.Model, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if m, ok := v.models[h]; ok {
		return m, nil
	}
	if !v.Store.Has(h) {
		if _, err := v.Host.Fetch(ctx, h, p2p.FetchOptions{Peers: peers}); err != nil {
			return nil, fmt.Errorf("fetch model %x: %w", h, err)
		}
	}
	path, err := v.Store.Path(h)
	if err != nil {
		return nil, err
	}
	m, err := llm.Load(path, v.LLM)
	if err != nil {
		return nil, err
	}
	v.models[h] = m
	return m, nil
}
