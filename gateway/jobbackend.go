package gateway

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sync"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/types"
)

// JobConfig are the terms of the jobs JobBackend posts.
type JobConfig struct {
	// Redundancy is how many providers run each request (2: their
	// results are compared).
	Redundancy uint16
	// A job's price cap per provider is MaxPriceBase + MaxPricePerToken ×
	// max_tokens (providers price per token of the budget).
	MaxPriceBase     *uint256.Int
	MaxPricePerToken *uint256.Int
	// Requirements the providers must meet (MinStake nil: none extra).
	Req market.Requirements
	// Windows of the job's phases in blocks (zero: DefaultJobWindows).
	Windows market.Windows
	// Pool posts pool jobs instead of auctions: the price cap is then the
	// fixed reward per replica, provider agents claim the job on sight
	// and the r-th claim awards it (about two blocks to the first token,
	// against 1 + bid + reveal blocks for an auction).
	Pool bool
}

// Defaults of a zero JobConfig: two replicas, a cap above the built-in
// provider pricing (0.1 oGPU + 0.05 oGPU per token), the CLI's windows.
var (
	DefaultMaxPriceBase     = new(uint256.Int).Div(types.OGPU(1), uint256.NewInt(5))  // 0.2 oGPU
	DefaultMaxPricePerToken = new(uint256.Int).Div(types.OGPU(1), uint256.NewInt(10)) // 0.1 oGPU
	DefaultJobWindows       = market.Windows{Bid: 5, Reveal: 5, Execute: 40, Verify: 20}
)

func (c JobConfig) withDefaults() JobConfig {
	if c.Redundancy == 0 {
		c.Redundancy = 2
	}
	if c.MaxPriceBase == nil {
		c.MaxPriceBase = DefaultMaxPriceBase
	}
	if c.MaxPricePerToken == nil {
		c.MaxPricePerToken = DefaultMaxPricePerToken
	}
	if c.Req.MinStake == nil {
		c.Req.MinStake = new(uint256.Int)
	}
	if c.Windows == (market.Windows{}) {
		c.Windows = DefaultJobWindows
	}
	return c
}

// Validate checks c with defaults applied.
func (c JobConfig) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Redundancy > 16 {
		errs = append(errs, fmt.Errorf("redundancy %d: want 1..16", c.Redundancy))
	}
	if c.MaxPriceBase.IsZero() && c.MaxPricePerToken.IsZero() {
		errs = append(errs, errors.New("max price: the base and the per-token cap are both zero: no provider would bid"))
	}
	for _, a := range c.Req.Attributes {
		if _, err := market.ParseRequirement(a); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Windows.Bid == 0 || c.Windows.Execute == 0 || c.Windows.Verify == 0 {
		errs = append(errs, fmt.Errorf("windows %+v: bid, execute and verify need at least one block", c.Windows))
	}
	return errors.Join(errs...)
}

// JobBackend posts one on-chain LLM job per request through the client
// agent: the sealed-bid auction, the prompt served to the winners only,
// the first winner's tokens streamed, the results compared (and disputed
// if they differ), and the verified text fetched. Time to first token is
// the auction (about 1 + bid + reveal blocks).
type JobBackend struct {
	client *agent.Client
	cfg    JobConfig

	mu      sync.Mutex
	chainID string
}

// NewJobBackend posts jobs from client's account on cfg's terms.
func NewJobBackend(client *agent.Client, cfg JobConfig) (*JobBackend, error) {
	if client == nil {
		return nil, errors.New("job backend: a client agent is required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("job backend: %w", err)
	}
	return &JobBackend{client: client, cfg: cfg.withDefaults()}, nil
}

// Mode is "job".
func (b *JobBackend) Mode() string { return "job" }

// maxPrice is the job's cap per provider for maxTokens.
func (b *JobBackend) maxPrice(maxTokens uint64) *uint256.Int {
	p := new(uint256.Int).Mul(b.cfg.MaxPricePerToken, uint256.NewInt(maxTokens))
	return p.Add(p, b.cfg.MaxPriceBase)
}

func (b *JobBackend) msg(req *Request) *market.MsgPostJob {
	promptTokens := req.PromptTokens
	if promptTokens == 0 {
		promptTokens = agent.PromptTokenBound(req.Prompt)
	}
	mode := market.ModeAuction
	if b.cfg.Pool {
		mode = market.ModePool
	}
	return &market.MsgPostJob{
		Kind: market.KindInference, Mode: mode, Model: req.Model, ModelSize: req.ModelSize,
		Stages: 1, Redundancy: b.cfg.Redundancy, MaxPrice: b.maxPrice(req.MaxTokens), Req: b.req(req.Class),
		Input: types.Hash{0xff}, Seal: types.Hash{0xff}, Windows: b.cfg.Windows, MaxTokens: req.MaxTokens, PromptTokens: promptTokens,
	}
}

func (b *JobBackend) req(class string) market.Requirements {
	r := b.cfg.Req
	r.Attributes = slices.Clone(r.Attributes)
	if class != "" {
		r.Class = class
	}
	if r.Runtime == "" {
		r.Runtime = agent.Runtime
	}
	return r
}

func (b *JobBackend) chainIDOf(ctx context.Context) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.chainID == "" {
		id, err := b.client.Chain.ChainID(ctx)
		if err != nil {
			return "", err
		}
		b.chainID = id
	}
	return b.chainID, nil
}

// Quote is everything the job locks (the providers' caps and the
// validator fee) plus the fee of the post transaction. It refuses with 402
// when the account cannot pay that, and 503 when fewer providers than the
// redundancy can take the job.
func (b *JobBackend) Quote(ctx context.Context, req *Request) (*uint256.Int, error) {
	params, err := b.client.Chain.Params(ctx)
	if err != nil {
		return nil, err
	}
	id, err := b.chainIDOf(ctx)
	if err != nil {
		return nil, err
	}
	msg := b.msg(req)
	payout := new(uint256.Int).Mul(msg.MaxPrice, uint256.NewInt(uint64(msg.Redundancy)))
	total := new(uint256.Int).Add(payout, escrow.MulBps(payout, params.Market.ValidatorFeeBps))
	// The fee of the largest encoding of the post (nonce at full width).
	probe := &types.Tx{Body: types.TxBody{ChainID: id, From: b.client.Address(), Nonce: math.MaxUint64, Msgs: []types.RawMsg{msg.Raw()}}}
	total.Add(total, node.RequiredFee(params, probe))

	acct, err := b.client.Chain.Account(ctx, b.client.Address())
	if err != nil {
		return nil, err
	}
	if acct.Balance == nil || acct.Balance.Lt(total) {
		return nil, &Error{Status: http.StatusPaymentRequired, Type: TypeBilling, Code: CodeInsufficientFunds, NoRetry: true,
			Message: fmt.Sprintf("account %s holds %s, and this request locks up to %s (%d providers × %s cap, the validator fee and the transaction fee): fund the account or lower max_tokens",
				b.client.Address().Hex(), types.FormatAmount(acct.Balance), types.FormatAmount(total), msg.Redundancy, types.FormatAmount(msg.MaxPrice))}
	}
	eligible, err := b.client.Chain.MatchProviders(ctx, msg.Req)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, p := range eligible {
		if servable(p.Provider) && slices.Contains(p.Models, req.Model) {
			n++
		}
	}
	if n < int(msg.Redundancy) {
		return nil, &Error{Status: http.StatusServiceUnavailable, Type: TypeAPI, Code: CodeNoProviders, NoRetry: true,
			Message: fmt.Sprintf("%d unjailed provider(s) serve model %s under the gateway's requirements, and a job needs %d: try later, or lower the gateway's redundancy or requirements",
				n, modelID(req.Model), msg.Redundancy)}
	}
	return total, nil
}

// Generate posts the job and follows it to its settlement.
func (b *JobBackend) Generate(ctx context.Context, req *Request, ev Events) (*Result, error) {
	msg := b.msg(req)
	j := agent.LLMJob{
		Model: req.Model, ModelSize: req.ModelSize, Prompt: req.Prompt, MaxTokens: req.MaxTokens, PromptTokens: msg.PromptTokens,
		Redundancy: msg.Redundancy, MaxPrice: msg.MaxPrice, Req: msg.Req, Windows: msg.Windows, Mode: msg.Mode,
		OnPosted: func(job uint64, height int64) {
			if ev.Dispatched != nil {
				ev.Dispatched(Dispatch{Job: job, Height: height})
			}
		},
	}
	progress := func(format string, a ...any) {
		if ev.Progress != nil {
			ev.Progress(fmt.Sprintf(format, a...))
		}
	}
	pieces := 0 // one per generated token but the end-of-text one
	onText := func(piece string) {
		pieces++
		if ev.Token != nil {
			ev.Token(piece)
		}
	}
	out, err := b.client.RunLLM(ctx, j, progress, onText)
	if out == nil {
		// Nothing was posted.
		var te *node.TxError
		if errors.As(err, &te) && te.Code == types.ErrInsufficientFunds.Code {
			return nil, &Error{Status: http.StatusPaymentRequired, Type: TypeBilling, Code: CodeInsufficientFunds, NoRetry: true,
				Message: "the chain refused the job: " + te.Log}
		}
		if err == nil {
			err = errors.New("the job ended without a result")
		}
		return nil, err
	}
	res := &Result{Receipt: b.receipt(out)}
	// The receipt's details come from the chain after the fact; a failed
	// read leaves them out, never the answer.
	rctx := context.WithoutCancel(ctx)
	b.fillReceipt(rctx, &res.Receipt, out)
	if err != nil {
		switch {
		case out.Outcome == "expired":
			return res, &Error{Status: http.StatusServiceUnavailable, Type: TypeAPI, Code: CodeNoProviders, NoRetry: true,
				Message: fmt.Sprintf("no provider took the job: %v", err)}
		case out.Completed != 0:
			return res, &Error{Status: http.StatusBadGateway, Type: TypeAPI, Code: CodeUnverified, NoRetry: true, Message: err.Error()}
		}
		// Still running on chain: what it costs is not known yet.
		res.Receipt.Charged = nil
		return res, err
	}
	res.Text, res.Verified, res.Overruled = out.Text, market.VerifiedOutcome(out.Outcome), out.Overruled
	// The verified output's tokens; the streamed count if it cannot be read.
	res.Tokens, res.EndOfText = pieces, uint64(pieces) < req.MaxTokens
	if bz, err := b.client.Store.Get(out.Result); err == nil {
		if o, err := agent.DecodeLLMOutput(bz); err == nil {
			res.Tokens = len(o.Tokens)
			res.EndOfText = uint64(len(o.Tokens)) < req.MaxTokens
		}
	}
	return res, nil
}

func amountOr0(a *uint256.Int) *uint256.Int {
	if a == nil {
		return new(uint256.Int)
	}
	return new(uint256.Int).Set(a)
}

// receipt is what RunLLM reported.
func (b *JobBackend) receipt(out *agent.LLMResult) Receipt {
	r := Receipt{Mode: "job", Job: out.Job, PriceUnit: "job", Outcome: out.Outcome, PostedHeight: out.Posted, CompletedHeight: out.Completed,
		Paid: amountOr0(out.Paid), ValidatorFee: amountOr0(out.ValidatorFee), Refunded: amountOr0(out.Refunded),
		Compensated: amountOr0(out.Compensated), TxFee: new(uint256.Int), Providers: []types.Address{}}
	if out.Result != (types.Hash{}) {
		h := out.Result
		r.Result = &h
	}
	if out.StreamedFrom != (types.Address{}) {
		a := out.StreamedFrom
		r.StreamedFrom = &a
	}
	return r
}

// fillReceipt adds what the chain knows: the post's transaction fee, the
// providers that ran the job (not the no-shows) and the clearing price; then Charged = paid + validator fee +
// transaction fee.
func (b *JobBackend) fillReceipt(ctx context.Context, r *Receipt, out *agent.LLMResult) {
	if fee, err := postFee(ctx, b.client.Chain, out.Posted, out.Job); err == nil {
		r.TxFee = fee
	}
	if j, err := b.client.Chain.Job(ctx, out.Job); err == nil && len(j.Tasks) > 0 {
		t := j.Tasks[0]
		if t.Price != nil {
			r.UnitPrice = new(uint256.Int).Set(t.Price)
		}
		for _, s := range t.Slots {
			if !s.NoShow { // a no-show's slot went to a backup, also listed
				r.Providers = append(r.Providers, s.Provider)
			}
		}
	}
	r.Charged = new(uint256.Int).Add(r.Paid, r.ValidatorFee)
	r.Charged.Add(r.Charged, r.TxFee)
}

// postFee finds the fee the transaction that posted job paid, in the
// block at height.
func postFee(ctx context.Context, c *node.Client, height int64, job uint64) (*uint256.Int, error) {
	res, err := c.RPC.BlockResults(ctx, &height)
	if err != nil {
		return nil, err
	}
	for _, tx := range res.TxResults {
		var fee *uint256.Int
		found := false
		for _, ev := range tx.Events {
			switch ev.Type {
			case chain.EventTypeTx:
				if e, err := chain.ParseEventTx(ev); err == nil {
					fee = e.Fee
				}
			case market.EventJobPosted{}.EventType():
				var e market.EventJobPosted
				if types.DecodeEvent(ev, &e) == nil && e.Job == job {
					found = true
				}
			}
		}
		if found && fee != nil {
			return fee, nil
		}
	}
	return nil, fmt.Errorf("no transaction at height %d posted job %d", height, job)
}

// JobView is GET /v1/ogpu/jobs/{id}: the job's state, and its verified
// text once settled (for the gateway's own jobs).
type JobView struct {
	Job      uint64 `json:"job"`
	State    string `json:"state"`
	Phase    string `json:"phase"`
	Verified bool   `json:"verified"`
	Text     string `json:"text,omitempty"`
	// TextError says why a settled job's text could not be fetched.
	TextError string        `json:"text_error,omitempty"`
	Chain     chain.JobView `json:"chain"`
}

// LookupJob reads job id and, when it settled on a verified result and
// belongs to this account, fetches the text from its providers.
func (b *JobBackend) LookupJob(ctx context.Context, id uint64) (any, error) {
	j, err := b.client.Chain.Job(ctx, id)
	if err != nil {
		var qe *node.QueryError
		if errors.As(err, &qe) {
			return nil, &Error{Status: http.StatusNotFound, Type: TypeInvalidRequest, Code: "job_not_found", Message: fmt.Sprintf("job %d: %s", id, qe.Log)}
		}
		return nil, err
	}
	v := &JobView{Job: id, State: j.StateName, Phase: j.Phase, Chain: *j}
	if j.Client != b.client.Address() || j.Kind != market.KindInference || len(j.Tasks) == 0 || j.Tasks[0].Verdict == (types.Hash{}) {
		return v, nil
	}
	v.Verified = true
	if text, err := b.client.FetchText(ctx, id); err != nil {
		v.TextError = err.Error()
	} else {
		v.Text = text
	}
	return v, nil
}
