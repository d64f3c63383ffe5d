package agent

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	ethcrypto "github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/finetune"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/split"
	"github.com/ogpu-network/ogpu/types"
)

// Client posts jobs from one account and reads their results. Its libp2p
// identity is the account key, so providers recognise it as the job's
// client without anything else on chain.
type Client struct {
	Chain  *node.Client
	Key    *ecdsa.PrivateKey
	Host   *p2p.Host
	Store  *blobstore.Store
	Access *Access
	Logger *slog.Logger

	sender *node.Sender
	// splitSrv receives the last stages' tokens of split jobs (made at
	// the first one).
	splitMu  sync.Mutex
	splitSrv *split.Server
	// ftMu guards the record of fine-tuned model hashes (finetune_client.go).
	ftMu sync.Mutex
}

// NewClient wires a client. host must use key as its identity; access
// becomes its Authorize hook (Host.SetAuthorize), so that it serves the
// job blobs the client binds, to the job's parties only.
func NewClient(c *node.Client, key *ecdsa.PrivateKey, host *p2p.Host, store *blobstore.Store, access *Access) *Client {
	if access == nil {
		access = NewAccess(c)
	}
	host.SetAuthorize(access.Authorize)
	return &Client{Chain: c, Key: key, Host: host, Store: store, Access: access, Logger: slog.Default(), sender: node.NewSender(c, key)}
}

// Address is the client's account.
func (c *Client) Address() types.Address { return ethcrypto.PubkeyToAddress(c.Key.PublicKey) }

// Sender is the client's transaction sender: share it with anything else
// that sends from this account (a session client), so that nonces do not
// collide.
func (c *Client) Sender() *node.Sender { return c.sender }

// LLMJob is an inference job to post.
type LLMJob struct {
	Model     types.Hash
	ModelSize uint64
	Prompt    string
	MaxTokens uint64
	// PromptTokens is the prompt's length in the model's tokens, declared
	// on chain (providers check it with MaxTokens against their context;
	// a longer prompt is the client's fault). 0: RunLLM counts it with
	// the model if the client's store holds it, else declares
	// PromptTokenBound.
	PromptTokens uint64
	Redundancy   uint16
	MaxPrice     *uint256.Int
	Req          market.Requirements
	Windows      market.Windows
	// Mode is market.ModeAuction (sealed bids, the default when empty)
	// or market.ModePool: MaxPrice is then the fixed reward per replica,
	// provider agents claim the job on sight, and after the claim window
	// (Windows.Bid + Reveal) the close draws r of the claimants from the
	// chain's beacon (market pool.go).
	Mode string
	// Short is what a stage with fewer than Redundancy providers gets
	// (market.ShortAudit, the default when empty, or market.ShortRefund).
	Short string
	// OnPosted, if set, is called once the job is on chain (its escrow
	// locked), before RunLLM follows it: from then on the request has
	// cost money and must not be repeated blindly.
	OnPosted func(job uint64, height int64)
}

// LLMResult is how an inference job ended.
type LLMResult struct {
	Job uint64
	// Text is the verified output (empty if the job settled without one).
	Text string
	// Result is the settled result hash; Outcome how it settled (agreed,
	// verdict, audited, unverified, unresolved, no_results) or "expired";
	// market.VerifiedOutcome says which are verified.
	Result  types.Hash
	Outcome string
	// StreamedFrom is the provider whose tokens were streamed; Overruled
	// is set if its result lost a dispute.
	StreamedFrom types.Address
	Overruled    bool
	Paid         *uint256.Int
	Refunded     *uint256.Int
	Compensated  *uint256.Int
	ValidatorFee *uint256.Int
	Posted       int64
	// Awarded is the height of the award (0 if there was none): the close
	// (for a pool job, once the beacon value of its last claim height is
	// final).
	Awarded   int64
	Completed int64
	Elapsed   time.Duration
}

// Progress reports a job's steps as lines of text.
type Progress func(format string, args ...any)

// RunLLM posts j, serves its prompt to the providers that win it, streams
// the text of the first one to onText as it is generated, waits for the
// chain to settle and returns the verified output.
func (c *Client) RunLLM(ctx context.Context, j LLMJob, progress Progress, onText func(string)) (*LLMResult, error) {
	if progress == nil {
		progress = func(string, ...any) {}
	}
	start := time.Now()
	in := &LLMInput{Version: 1, Prompt: j.Prompt}
	if _, err := DecodeLLMInput(in.Encode()); err != nil {
		return nil, err
	}
	inHash, err := c.Store.Put(in.Encode())
	if err != nil {
		return nil, err
	}
	mode := j.Mode
	if mode == "" {
		mode = market.ModeAuction
	}
	msg := &market.MsgPostJob{
		Kind: market.KindInference, Mode: mode, Model: j.Model, ModelSize: j.ModelSize,
		Stages: 1, Redundancy: j.Redundancy, MaxPrice: j.MaxPrice, Req: j.Req, Input: inHash,
		Windows: j.Windows, MaxTokens: j.MaxTokens, PromptTokens: c.promptTokens(j), Short: j.Short,
	}
	height, posted, err := c.postJob(ctx, msg, Runtime, inHash)
	if err != nil {
		return nil, err
	}
	id := posted.Job
	if j.OnPosted != nil {
		j.OnPosted(id, height)
	}
	if mode == market.ModePool {
		progress("posted pool job %d at height %d: %s locked, %s per replica; awarded once %d providers claimed it, claims until %d", id, height,
			types.FormatAmount(posted.Locked), types.FormatAmount(j.MaxPrice), j.Redundancy, posted.RevealEnd)
	} else {
		progress("posted job %d at height %d: %s locked, sealed bids until %d, reveals until %d", id, height,
			types.FormatAmount(posted.Locked), posted.BidEnd, posted.RevealEnd)
	}
	out, err := c.follow(ctx, id, height, inHash, progress, onText)
	if out != nil {
		out.Posted = height
		out.Elapsed = time.Since(start)
	}
	return out, err
}

// PromptTokenBound is an upper bound on the tokens of prompt for any
// llama-style tokenizer: SentencePiece (with byte fallback) and byte-level
// BPE emit at most one token per byte, plus the beginning-of-sequence
// token, SentencePiece's dummy-prefix space and an end-of-sequence token
// for models that add one.
func PromptTokenBound(prompt string) uint64 { return uint64(len(prompt)) + 3 }

// promptTokens is the prompt length j declares: j.PromptTokens if set,
// else the count of the model's tokenizer if the client's store holds the
// model, else PromptTokenBound (a bound declares more than the prompt
// holds: providers with a context too small for the bound do not bid).
func (c *Client) promptTokens(j LLMJob) uint64 {
	if j.PromptTokens != 0 {
		return j.PromptTokens
	}
	bound := PromptTokenBound(j.Prompt)
	if !c.Store.Has(j.Model) {
		return bound
	}
	path, err := c.Store.Path(j.Model)
	if err != nil {
		return bound
	}
	m, err := llm.Load(path, llm.Options{Threads: 1, BatchSize: 8, ContextSize: 8})
	if err != nil {
		c.Logger.Info("cannot load the model to count the prompt's tokens: declaring an upper bound", "bound", bound, "err", err)
		return bound
	}
	defer m.Close()
	toks, err := m.Tokenize(j.Prompt)
	if err != nil || len(toks) == 0 {
		return bound
	}
	return uint64(len(toks))
}

// postJob posts msg (requirements defaulted: no extra stake, runtime) and
// binds blobs to the job as its inputs. Until then nobody may fetch them
// (Access refuses unbound blobs).
func (c *Client) postJob(ctx context.Context, msg *market.MsgPostJob, runtime string, blobs ...types.Hash) (height int64, _ *market.EventJobPosted, _ error) {
	if msg.Req.MinStake == nil {
		msg.Req.MinStake = new(uint256.Int)
	}
	if msg.Seal == (types.Hash{}) {
		// Every job carries a random seal, so a validator's canary (whose
		// seal commits to its known answers) looks like any other job.
		if _, err := rand.Read(msg.Seal[:]); err != nil {
			return 0, nil, err
		}
	}
	if msg.Req.Runtime == "" {
		msg.Req.Runtime = runtime
	}
	res, err := c.sender.Send(ctx, msg.Raw())
	if err != nil {
		return 0, nil, fmt.Errorf("post job: %w", err)
	}
	var posted market.EventJobPosted
	if err := node.FindEvent(res, &posted); err != nil {
		return 0, nil, err
	}
	for _, h := range blobs {
		if err := c.Access.Bind(h, Grant{Job: posted.Job, Client: c.Address(), Kind: GrantInput}); err != nil {
			return 0, nil, fmt.Errorf("job %d is posted but its input cannot be served: %w", posted.Job, err)
		}
	}
	return res.Height, &posted, nil
}

// follow watches job id from height from until it completes or expires.
func (c *Client) follow(ctx context.Context, id uint64, from int64, input types.Hash, progress Progress, onText func(string)) (*LLMResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	blocks, err := c.Chain.Subscribe(ctx, from)
	if err != nil {
		cancel()
		return nil, err
	}
	var streams sync.WaitGroup
	defer func() {
		cancel()
		for range blocks { // until the subscription has stopped
		}
		streams.Wait()
		c.Access.Forget(id)
	}()
	out := &LLMResult{Job: id}
	streamed := make(chan types.Hash, 1)
	for b := range blocks {
		for _, ev := range b.Events {
			reportEvent(ev, id, false, progress)
			switch ev.Type {
			case market.EventJobAwarded{}.EventType():
				first, ok := c.followAward(ctx, ev, b.Height, id, "results", progress, &out.Awarded)
				if ok {
					out.StreamedFrom = first
					streams.Add(1)
					go func() {
						defer streams.Done()
						c.stream(ctx, first, id, onText, streamed, progress)
					}()
				}
			case market.EventSlotReassigned{}.EventType(), market.EventTaskSettled{}.EventType(), market.EventJobExpired{}.EventType():
				if err := c.followCommon(ctx, ev, b.Height, id, progress, &out.Outcome, &out.Result, &out.Refunded, &out.Completed); err != nil {
					return out, err
				}
			case market.EventJobCompleted{}.EventType():
				var e market.EventJobCompleted
				if types.DecodeEvent(ev, &e) != nil || e.Job != id {
					continue
				}
				out.Paid, out.Refunded, out.Compensated, out.ValidatorFee, out.Completed = e.Paid, e.Refunded, e.Compensated, e.ValidatorFee, b.Height
				// A verdict that rejected every revealed result is decided,
				// but nobody delivered it: nothing was paid, nothing to fetch.
				if !market.VerifiedOutcome(out.Outcome) || e.Paid == nil || e.Paid.IsZero() {
					return out, fmt.Errorf("job %d ended without a verified result (%s): %s refunded", id, out.Outcome, types.FormatAmount(e.Refunded))
				}
				{
					text, err := c.FetchText(ctx, id)
					if err != nil {
						return out, err
					}
					out.Text = text
					select {
					case h := <-streamed:
						out.Overruled = h != out.Result
					default:
					}
				}
				return out, nil
			}
		}
	}
	return out, ctx.Err()
}

// followAward handles an award of job id (an EventJobAwarded, any job):
// it reports it (what is due by the commit deadline: due), records the
// first award's height in awarded, dials the winners for the input, and
// returns the first winner, whose stream the follower opens (ok false: not
// this job's award, or no winner).
func (c *Client) followAward(ctx context.Context, ev abci.Event, height int64, id uint64, due string, progress Progress, awarded *int64) (types.Address, bool) {
	var e market.EventJobAwarded
	if types.DecodeEvent(ev, &e) != nil || e.Job != id {
		return types.Address{}, false
	}
	progress("awarded at height %d: %s at %s each; %s due by %d",
		height, strings.Join(e.Providers, ", "), types.FormatAmount(e.Price), due, e.CommitDeadline)
	if *awarded == 0 {
		*awarded = height
	}
	c.serveInput(ctx, e.Providers, progress)
	if len(e.Providers) == 0 {
		return types.Address{}, false
	}
	first, err := types.ParseAddress(e.Providers[0])
	return first, err == nil
}

// followCommon handles the events of job id that every follower handles
// alike: a reassigned slot's provider is dialed for the input, a settled
// task sets the outcome and result, an expiry ends the job (the error).
func (c *Client) followCommon(ctx context.Context, ev abci.Event, height int64, id uint64, progress Progress,
	outcome *string, result *types.Hash, refunded **uint256.Int, completed *int64) error {
	switch ev.Type {
	case market.EventSlotReassigned{}.EventType():
		var e market.EventSlotReassigned
		if types.DecodeEvent(ev, &e) == nil && e.Job == id {
			c.serveInput(ctx, []string{e.To.Hex()}, progress)
		}
	case market.EventTaskSettled{}.EventType():
		var e market.EventTaskSettled
		if types.DecodeEvent(ev, &e) == nil && e.Job == id {
			*outcome, *result = e.Outcome, e.Result
			progress("settled (%s) at height %d: %s paid to providers, %s refunded", e.Outcome, height,
				types.FormatAmount(e.Paid), types.FormatAmount(e.Refund))
		}
	case market.EventJobExpired{}.EventType():
		var e market.EventJobExpired
		if types.DecodeEvent(ev, &e) == nil && e.Job == id {
			*outcome, *refunded, *completed = "expired", e.Refund, height
			return fmt.Errorf("job %d expired: %s; %s refunded (ogpu query why-no-bids %d explains)", id, e.Reason, types.FormatAmount(e.Refund), id)
		}
	}
	return nil
}

// reportEvent describes the events of job id common to every kind of job
// (bids, commitments, reveals, no-shows, disputes, votes, slashes); with
// stages set each line names its stage.
func reportEvent(ev abci.Event, id uint64, stages bool, progress Progress) {
	at := func(stage uint16) string {
		if stages {
			return fmt.Sprintf("stage %d: ", stage)
		}
		return ""
	}
	switch ev.Type {
	case market.EventBidCommitted{}.EventType():
		var e market.EventBidCommitted
		if types.DecodeEvent(ev, &e) == nil && e.Job == id {
			progress("%ssealed bid from %s", at(e.Stage), e.Provider.Hex())
		}
	case market.EventSlotReassigned{}.EventType():
		var e market.EventSlotReassigned
		if types.DecodeEvent(ev, &e) == nil && e.Job == id {
			progress("%s%s did not show up: its slot goes to %s", at(e.Stage), e.From.Hex(), e.To.Hex())
		}
	case market.EventResultCommitted{}.EventType():
		var e market.EventResultCommitted
		if types.DecodeEvent(ev, &e) == nil && e.Job == id {
			progress("%s%s committed its result hash", at(e.Stage), e.Provider.Hex())
		}
	case market.EventResultRevealed{}.EventType():
		var e market.EventResultRevealed
		if types.DecodeEvent(ev, &e) == nil && e.Job == id {
			progress("%s%s revealed result %x", at(e.Stage), e.Provider.Hex(), e.Result[:8])
		}
	case market.EventNoShow{}.EventType():
		var e market.EventNoShow
		if types.DecodeEvent(ev, &e) == nil && e.Job == id {
			progress("%s%s missed its %s deadline (no-show)", at(e.Stage), e.Provider.Hex(), e.Missed)
		}
	case market.EventDisputeOpened{}.EventType():
		var e market.EventDisputeOpened
		if types.DecodeEvent(ev, &e) == nil && e.Job == id && len(e.Results) > 1 {
			progress("%sthe results differ: dispute opened, validators re-check until height %d", at(e.Stage), e.Deadline)
		}
	case market.EventStageShort{}.EventType():
		var e market.EventStageShort
		if types.DecodeEvent(ev, &e) == nil && e.Job == id {
			if e.Policy == market.ShortRefund {
				progress("%sonly %d eligible provider(s) of %d: not awarded, refunded (--short refund)", at(e.Stage), e.Providers, e.Redundancy)
			} else {
				progress("%sonly %d eligible provider(s) of %d: it runs, and the validators audit its result before it is paid (--short audit)", at(e.Stage), e.Providers, e.Redundancy)
			}
		}
	case market.EventJobRebid{}.EventType():
		var e market.EventJobRebid
		if types.DecodeEvent(ev, &e) == nil && e.Job == id {
			progress("stage(s) %v had fewer eligible providers than asked: bids are taken again until height %d, reveals until %d (--short rebid)", e.Stages, e.BidEnd, e.RevealEnd)
		}
	case market.EventAuditOpened{}.EventType():
		var e market.EventAuditOpened
		if types.DecodeEvent(ev, &e) == nil && e.Job == id {
			progress("%s%d of %d providers revealed result %x: the validators re-execute it before it is paid (audit)", at(e.Stage), e.Agreeing, e.Redundancy, e.Result[:8])
		}
	case market.EventInputReported{}.EventType():
		var e market.EventInputReported
		if types.DecodeEvent(ev, &e) == nil && e.Job == id {
			progress("%s%s reported the input: %s", at(e.Stage), e.Provider.Hex(), e.Reason)
		}
	case market.EventInputCheckOpened{}.EventType():
		var e market.EventInputCheckOpened
		if types.DecodeEvent(ev, &e) == nil && e.Job == id {
			progress("%svalidators check the input until height %d (keep serving it)", at(e.Stage), e.Deadline)
		}
	case market.EventInputAvailable{}.EventType():
		var e market.EventInputAvailable
		if types.DecodeEvent(ev, &e) == nil && e.Job == id {
			progress("%sthe validators found the input available and serve it: results due by %d", at(e.Stage), e.CommitDeadline)
		}
	case market.EventDisputeVoted{}.EventType():
		var e market.EventDisputeVoted
		if types.DecodeEvent(ev, &e) == nil && e.Job == id {
			progress("%svalidator %s checked the work and voted for %x (power %d)", at(e.Stage), e.Validator.Hex(), e.Result[:8], e.Power)
		}
	case market.EventFinetuneRevealed{}.EventType():
		var e market.EventFinetuneRevealed
		if types.DecodeEvent(ev, &e) == nil && e.Job == id {
			progress("%s%s revealed checkpoint root %x, final model hash %x", at(e.Stage), e.Provider.Hex(), e.Root[:8], e.Final[:8])
		}
	case finetune.EventGameOpened{}.EventType():
		var e finetune.EventGameOpened
		if types.DecodeEvent(ev, &e) == nil && e.Job == id {
			progress("%sthe fine-tuned models differ: step-bisection game %d opened over %d steps between %d checkpoint trees; first openings due by %d",
				at(e.Stage), e.Match, e.Steps, len(e.Roots), e.Deadline)
		}
	case finetune.EventGameNarrowed{}.EventType():
		var e finetune.EventGameNarrowed
		if types.DecodeEvent(ev, &e) == nil && e.Job == id {
			progress("%sgame %d round %d: the trees first differ between steps %d and %d; next openings due by %d", at(e.Stage), e.Match, e.Round, e.Lo, e.Hi, e.Deadline)
		}
	case finetune.EventGameTimeout{}.EventType():
		var e finetune.EventGameTimeout
		if types.DecodeEvent(ev, &e) == nil && e.Job == id {
			progress("%sgame %d round %d: %d checkpoint tree(s) did not open in time and lose", at(e.Stage), e.Match, e.Round, len(e.Silent))
		}
	case finetune.EventGameEnded{}.EventType():
		var e finetune.EventGameEnded
		if types.DecodeEvent(ev, &e) == nil && e.Job == id {
			progress("%sgame %d narrowed to step %d in %d rounds: validators re-execute that one step, verdict by %d", at(e.Stage), e.Match, e.Step, e.Rounds, e.Deadline)
		}
	case finetune.EventGameDecided{}.EventType():
		var e finetune.EventGameDecided
		if types.DecodeEvent(ev, &e) == nil && e.Job == id {
			losers := "none"
			if len(e.Losers) > 0 {
				losers = strings.Join(e.Losers, ", ")
			}
			progress("%sgame %d decided (%s): lost by %s", at(e.Stage), e.Match, e.Outcome, losers)
		}
	case finetune.EventBracketDone{}.EventType():
		var e finetune.EventBracketDone
		if types.DecodeEvent(ev, &e) == nil && e.Job == id {
			if e.ClassFailure {
				progress("%sthe validators could not agree on the disputed step (class failure): nobody is paid for the model, the job is refunded", at(e.Stage))
			} else {
				progress("%sthe games are over after %d round(s): %d checkpoint tree(s) survive", at(e.Stage), e.Rounds, len(e.Survivors))
			}
		}
	case market.EventSlashed{}.EventType():
		var e market.EventSlashed
		if types.DecodeEvent(ev, &e) == nil && e.Job == id {
			progress("%s%s slashed %s (%s): %s to the client as compensation, %s burned", at(e.Stage), e.Account.Hex(),
				types.FormatAmount(e.Amount), e.Reason, types.FormatAmount(e.Compensation), types.FormatAmount(e.Burned))
		}
	}
}

// serveInput makes the prompt reachable for the awarded providers: it
// dials them at their on-chain addresses.
func (c *Client) serveInput(ctx context.Context, providers []string, progress Progress) {
	for _, s := range providers {
		addr, err := types.ParseAddress(s)
		if err != nil {
			continue
		}
		if _, err := connectProvider(ctx, c.Host, c.Chain, addr); err != nil {
			progress("warning: %v (it may still dial this client)", err)
		}
	}
}

// keepDialing is serveInput that does not give up: it dials again the
// providers it could not reach, after 1 s doubling to 8 s, reading their
// on-chain records again each time (a provider restarted since the award
// publishes new addresses), until each is reached or ctx ends. The first
// failure of each is reported.
func (c *Client) keepDialing(ctx context.Context, providers []string, progress Progress) {
	var left []types.Address
	for _, s := range providers {
		if addr, err := types.ParseAddress(s); err == nil {
			left = append(left, addr)
		}
	}
	warned := map[types.Address]bool{}
	wait := time.Second
	for len(left) > 0 {
		var next []types.Address
		for _, addr := range left {
			if _, err := connectProvider(ctx, c.Host, c.Chain, addr); err != nil {
				if !warned[addr] && ctx.Err() == nil {
					warned[addr] = true
					progress("warning: %v (dialing it again; it may also find this client)", err)
				}
				next = append(next, addr)
			}
		}
		if left = next; len(left) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 8*time.Second)
	}
}

func (c *Client) stream(ctx context.Context, provider types.Address, id uint64, onText func(string), done chan<- types.Hash, progress Progress) {
	pid, err := connectProvider(ctx, c.Host, c.Chain, provider)
	if err != nil {
		progress("warning: no token stream: %v", err)
		return
	}
	h, err := StreamTokens(ctx, c.Host, pid, id, onText)
	if err != nil {
		if ctx.Err() == nil {
			progress("warning: token stream: %v", err)
		}
		return
	}
	done <- h
}

// FetchText fetches the settled output of inference job id from a
// provider that revealed it and checks it against the hash on chain.
func (c *Client) FetchText(ctx context.Context, id uint64) (string, error) {
	j, err := c.Chain.Job(ctx, id)
	if err != nil {
		return "", err
	}
	if j.Kind != market.KindInference {
		return "", fmt.Errorf("job %d is a %s job, not inference", id, j.Kind)
	}
	if len(j.Tasks) == 0 || j.Tasks[0].Verdict == (types.Hash{}) {
		return "", fmt.Errorf("job %d has no settled result yet (%s)", id, j.Phase)
	}
	want := j.Tasks[0].Verdict
	if err := fetchVerdict(ctx, c.Host, c.Chain, c.Store, j, 0, want); err != nil {
		return "", err
	}
	bz, err := c.Store.Get(want)
	if err != nil {
		return "", err
	}
	o, err := DecodeLLMOutput(bz)
	if err != nil {
		return "", err
	}
	if o.Input != j.Input {
		return "", fmt.Errorf("output %x answers input %x, job %d's input is %x", want, o.Input[:8], id, j.Input[:8])
	}
	return o.Text, nil
}
