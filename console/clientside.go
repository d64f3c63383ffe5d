package console

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/gateway"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/session"
	"github.com/ogpu-network/ogpu/types"
)

// DefaultWindows are the windows of a job posted from the page: those of
// `ogpu job run`.
var DefaultWindows = market.Windows{Bid: 5, Reveal: 5, Execute: 40, Verify: 20}

// DefaultMaxRunning bounds the jobs one console follows at once (each
// serves its prompt and holds a chain subscription until it settles).
const DefaultMaxRunning = 16

// AgentClient is a ClientSide over a client agent: the process holds the
// key, posts the job, serves its prompt to the winners, follows it until
// it settles, and relays its generated text to the console.
type AgentClient struct {
	// Windows are the auction and execution windows of the jobs it posts
	// (DefaultWindows).
	Windows market.Windows
	// MaxRunning bounds the jobs it follows at once (DefaultMaxRunning).
	MaxRunning int

	c      *agent.Client
	models []ModelChoice
	// ctx outlives the HTTP request that posted a job: the job runs on.
	ctx context.Context
	log *slog.Logger

	mu      sync.Mutex
	running map[uint64]*runningJob
	onText  func(job uint64, text string)
}

// runningJob is a job this process posted and follows.
type runningJob struct {
	text string
	done bool
	err  error
}

// ClientOf makes a ClientSide of client agent c offering models; jobs run
// until ctx ends.
func ClientOf(ctx context.Context, c *agent.Client, models []ModelChoice, log *slog.Logger) *AgentClient {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &AgentClient{c: c, models: models, ctx: ctx, log: log, running: map[uint64]*runningJob{}, MaxRunning: DefaultMaxRunning, Windows: DefaultWindows}
}

// Address is the client's account.
func (a *AgentClient) Address() types.Address { return a.c.Address() }

// Models are the models the client posts jobs for.
func (a *AgentClient) Models() []ModelChoice { return append([]ModelChoice(nil), a.models...) }

// setTextSink is where generated text goes (the console's event hub).
func (a *AgentClient) setTextSink(f func(job uint64, text string)) {
	a.mu.Lock()
	a.onText = f
	a.mu.Unlock()
}

// Output is what job has generated so far in this process, whether it has
// ended, and whether this process runs it at all.
func (a *AgentClient) Output(job uint64) (text string, done, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.running[job]
	if !ok {
		return "", false, false
	}
	return r.text, r.done, true
}

func (a *AgentClient) model(h types.Hash) (ModelChoice, bool) {
	for _, m := range a.models {
		if m.Hash == h {
			return m, true
		}
	}
	return ModelChoice{}, false
}

func (a *AgentClient) live() int {
	n := 0
	for _, r := range a.running {
		if !r.done {
			n++
		}
	}
	return n
}

// PostLLM posts p and returns once the job is on chain; the job then runs
// in the background until it settles.
func (a *AgentClient) PostLLM(ctx context.Context, p PostLLM) (uint64, int64, error) {
	m, ok := a.model(p.Model)
	if !ok {
		return 0, 0, fmt.Errorf("model %s is not one this console posts jobs for: pick one of the list", p.Model.Hex())
	}
	a.mu.Lock()
	busy := a.live() >= a.MaxRunning
	a.mu.Unlock()
	if busy {
		return 0, 0, fmt.Errorf("%d jobs of this console are still running: wait for one to settle", a.MaxRunning)
	}
	type posted struct {
		job    uint64
		height int64
	}
	got := make(chan posted, 1)
	failed := make(chan error, 1)
	var job uint64
	j := agent.LLMJob{
		Model: m.Hash, ModelSize: m.Size, Prompt: p.Prompt, MaxTokens: p.MaxTokens,
		Redundancy: p.Redundancy, MaxPrice: new(uint256.Int).Set(p.MaxPrice), Mode: p.Mode, Windows: a.Windows,
		OnPosted: func(id uint64, h int64) {
			a.mu.Lock()
			job = id
			a.running[id] = &runningJob{}
			a.mu.Unlock()
			got <- posted{id, h}
		},
	}
	onText := func(s string) {
		a.mu.Lock()
		r := a.running[job]
		if r != nil {
			r.text += s
		}
		sink := a.onText
		a.mu.Unlock()
		if sink != nil && r != nil {
			sink(job, s)
		}
	}
	go func() {
		res, err := a.c.RunLLM(a.ctx, j, func(format string, args ...any) {
			a.log.Info(fmt.Sprintf(format, args...))
		}, onText)
		a.mu.Lock()
		if r := a.running[job]; r != nil {
			r.done, r.err = true, err
			if err == nil && res != nil && res.Text != "" {
				r.text = res.Text
			}
		}
		a.mu.Unlock()
		if err != nil {
			a.log.Error("console job failed", "job", job, "err", err)
			failed <- err
		}
	}()
	select {
	case p := <-got:
		return p.job, p.height, nil
	case err := <-failed:
		return 0, 0, err
	case <-ctx.Done():
		return 0, 0, errors.Join(errors.New("the job may still be posted: look at your jobs before posting again"), ctx.Err())
	}
}

// Cancel cancels job (only in its bidding window; the chain says why not).
func (a *AgentClient) Cancel(ctx context.Context, job uint64) error {
	res, err := a.c.Sender().Send(ctx, (&market.MsgCancelJob{Job: job}).Raw())
	if err != nil {
		return err
	}
	var ev market.EventJobCancelled
	if err := node.FindEvent(res, &ev); err != nil {
		return fmt.Errorf("job %d: the cancel was accepted but no cancellation event was found: %w", job, err)
	}
	return nil
}

// ClientModels are the models a client's console offers: specs as
// ModelChoices reads them, or, with none, the model most registered
// providers serve (named by its hash's first bytes).
func ClientModels(ctx context.Context, c *node.Client, specs []string) ([]ModelChoice, error) {
	if len(specs) == 0 {
		h, err := c.PopularModel(ctx)
		if err != nil {
			return nil, err
		}
		specs = []string{fmt.Sprintf("%x=sha256:%x", h[:4], h[:])}
	}
	return ModelChoices(specs)
}

// ModelChoices reads the models a console posts jobs for, written as the
// gateway's --model flags: NAME=sha256:HEX, NAME=FILE.gguf or FILE.gguf.
// A file's hash and size are computed; a bare hash's size is unknown (0).
func ModelChoices(specs []string) ([]ModelChoice, error) {
	mcs, err := gateway.ParseModelSpecs(specs, nil)
	if err != nil {
		return nil, err
	}
	out := make([]ModelChoice, 0, len(mcs))
	for _, mc := range mcs {
		m := ModelChoice{Name: mc.Name}
		if mc.File == "" {
			if m.Hash, err = gateway.ParseModelHash(mc.Model); err != nil {
				return nil, err
			}
		} else if m.Hash, m.Size, err = blobstore.HashFile(mc.File); err != nil {
			return nil, fmt.Errorf("--model %s: %w", mc.File, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// CloseSession closes session id early (only its client may; the chain
// says why not).
func (a *AgentClient) CloseSession(ctx context.Context, id uint64) error {
	res, err := a.c.Sender().Send(ctx, (&session.MsgCloseSession{Session: id}).Raw())
	if err != nil {
		return err
	}
	var ev session.EventClosed
	if err := node.FindEvent(res, &ev); err != nil {
		return fmt.Errorf("session %d: the close was accepted but no close event was found: %w", id, err)
	}
	return nil
}
