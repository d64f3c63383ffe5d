package gateway

import (
	"context"
	"fmt"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/types"
)

// Backend turns one generation request into paid, verified work on the
// network. JobBackend posts an on-chain job per request; a session
// backend (a leased set of providers paid by vouchers) implements the same
// methods. A Backend must be safe for concurrent use.
type Backend interface {
	// Mode names the backend in answers (ogpu.mode): "job", "session".
	Mode() string
	// Quote says what req may cost at worst, all fees included, before
	// anything is spent; the gateway reserves that against its caps. It
	// refuses what cannot run now: an *Error with 402 (the account cannot
	// pay) or 503 (not enough providers).
	Quote(ctx context.Context, req *Request) (*uint256.Int, error)
	// Generate runs req. It calls ev.Dispatched once money is committed
	// (a job posted, a voucher signed): from then on a failure is never
	// retried by the client. ev.Token receives provisional text as it is
	// generated, in order; ev.Progress lines of what happens. The Result
	// holds the verified text; with an error it may still carry the
	// Receipt of what was spent.
	Generate(ctx context.Context, req *Request, ev Events) (*Result, error)
}

// Request is one generation, rendered: the raw prompt and its limits.
type Request struct {
	Model     types.Hash
	ModelSize uint64 // 0 if unknown
	Prompt    string
	// PromptTokens is the prompt's length in the model's tokens (0: the
	// gateway could not count it; the backend declares a bound).
	PromptTokens uint64
	MaxTokens    uint64
	// ModelFile is the model's local GGUF file, if the gateway has one
	// (its tokenizer is what a session client counts with).
	ModelFile string
	// Class, if set, is the determinism class the job's providers must
	// declare (an audit of a session asks for its providers' class).
	Class string

	// ticket is a session backend's choice for this request, made by
	// Quote and used by Generate (nil for other backends).
	ticket *sessionTicket
}

// Events are the callbacks of one Generate; nil members are skipped.
type Events struct {
	Dispatched func(Dispatch)
	Token      func(piece string)
	Progress   func(line string)
}

// Dispatch says where a request's money went.
type Dispatch struct {
	// Job is the on-chain job (job mode); Session the lease (session mode).
	Job     uint64
	Session string
	Height  int64
}

// Result is a finished generation.
type Result struct {
	// Text is the verified output; Tokens its length in tokens, and
	// EndOfText whether generation stopped on the model's end-of-text
	// token (else it ran to max_tokens).
	Text      string
	Tokens    int
	EndOfText bool
	// Verified: the text is what the network settled on (replicas agreed,
	// or the validators decided). Overruled: the provider whose tokens
	// were streamed lost; the stream was wrong.
	Verified  bool
	Overruled bool
	Receipt   Receipt
}

// Receipt is what a request paid and to whom. Amounts are base units.
type Receipt struct {
	Mode    string `json:"mode"`
	Job     uint64 `json:"job,omitempty"`
	Session string `json:"session,omitempty"`
	// Providers ran the request; StreamedFrom is the one whose tokens were
	// streamed.
	Providers    []types.Address `json:"providers"`
	StreamedFrom *types.Address  `json:"streamed_from,omitempty"`
	// UnitPrice per PriceUnit ("job": per provider for the whole job;
	// "token" in session mode, the price of an output token).
	UnitPrice *uint256.Int `json:"unit_price"`
	PriceUnit string       `json:"price_unit"`
	// PriceIn and PriceOut are a session's prices of a prompt token and
	// of an output token (session mode).
	PriceIn  *uint256.Int `json:"price_in,omitempty"`
	PriceOut *uint256.Int `json:"price_out,omitempty"`
	// Lanes are the session's lanes asked (session mode): the seq this
	// request took on each, what it added to the lane's voucher and the
	// voucher after it.
	Lanes []LaneReceipt `json:"lanes,omitempty"`
	// Fallback says why a gateway that prefers sessions ran this request
	// as a job.
	Fallback string `json:"fallback,omitempty"`
	// Charged is what left the account for good: paid to providers, the
	// validator fee and the transaction fee. Compensation from a slashed
	// provider is reported apart (it came back).
	Charged      *uint256.Int `json:"charged"`
	Paid         *uint256.Int `json:"paid"`
	ValidatorFee *uint256.Int `json:"validator_fee"`
	TxFee        *uint256.Int `json:"tx_fee"`
	Refunded     *uint256.Int `json:"refunded"`
	Compensated  *uint256.Int `json:"compensated"`
	// Outcome is how the chain settled (agreed, verdict, expired, ...);
	// Result the settled result hash.
	Outcome         string      `json:"outcome"`
	Result          *types.Hash `json:"result,omitempty"`
	PostedHeight    int64       `json:"posted_height,omitempty"`
	CompletedHeight int64       `json:"completed_height,omitempty"`
}

// LaneReceipt is one session lane's part of a request.
type LaneReceipt struct {
	Provider types.Address `json:"provider"`
	Seq      uint64        `json:"seq"`
	// Charged is what the request added to the lane's cumulative voucher;
	// Cumulative the voucher after it.
	Charged    *uint256.Int `json:"charged"`
	Cumulative *uint256.Int `json:"cumulative"`
	// Error is why the lane did not answer (empty: it did).
	Error string `json:"error,omitempty"`
}

// NewBackend makes the backend of a gateway mode: "job" (one job per
// request), "session" (leased sessions only) or "auto" (sessions, job
// mode when none can be opened, and the audits' jobs). It also says in
// words what it is.
func NewBackend(cl *agent.Client, mode string, jc JobConfig, sc SessionConfig) (Backend, string, error) {
	jb, err := NewJobBackend(cl, jc)
	if err != nil {
		return nil, "", err
	}
	job := "job mode: one on-chain job per request"
	if jc.Pool {
		job = "job mode: one pool job per request"
	}
	switch mode {
	case "job":
		return jb, job, nil
	case "session":
		b, err := NewSessionBackend(cl, sc, nil)
		return b, "session mode: requests paid by vouchers on a leased session", err
	case "auto", "":
		b, err := NewSessionBackend(cl, sc, jb)
		return b, "session mode, " + job + " when no session can be opened", err
	}
	return nil, "", fmt.Errorf("gateway mode %q: want session, job or auto", mode)
}
