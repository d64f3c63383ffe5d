// Package pricing decides what a provider bids for a job: a built-in
// strategy (PerToken) or an external script the operator writes (Script).
//
// # Script contract
//
// The agent runs the script's file directly (no shell: it needs a #! line
// and the executable bit) with the job as one line of JSON on stdin, a
// JobView:
//
//	{"id":42,"kind":"inference","mode":"auction","model":"9b3a…","model_size":1185376,
//	 "stages":1,"redundancy":2,"max_price":"10000000000000000000","max_tokens":64,
//	 "require":["gpu/nvidia"],"client":"0x…","height":1234,
//	 "provider":{"address":"0x…","attributes":["gpu/nvidia/h100"],"tokens_per_second":812.5}}
//
// Amounts are decimal strings in base units (10^-18 oGPU). The environment
// holds PATH and HOME only. The script answers on stdout with one of:
//
//	4.5ogpu                   a price in oGPU (up to 18 decimals)
//	4500000000000000000       a price in base units
//	{"price":"4.5ogpu"}       the same as JSON (the value may also be a JSON integer of base
//	                          units; the object may span lines)
//	{"skip":"reason"}         no bid, with a reason for the agent's log
//	(nothing)                 no bid
//
// The price is for one stage replica and must not exceed max_price; for
// a job of kind session (which carries a "session" object) it is the price
// of one output token. The
// script has Timeout (default 5 s) to answer; then it and every process it
// started are killed. A non-zero exit status, a timeout, more than 4 KiB of
// output, output that is not one of the above, a negative or fractional
// base-unit amount, or a price above max_price is an error that names the
// script and ends with the tail of its stderr; the agent does not bid.
//
// docs/pricing-scripts.md has an example script.
package pricing

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/types"
)

// JobView is what a pricing strategy sees: the job, and the provider
// asking. A script gets it as JSON on stdin.
type JobView struct {
	ID        uint64 `json:"id"`
	Kind      string `json:"kind"`       // inference, pipeline or session
	Mode      string `json:"mode"`       // auction or pool
	Model     string `json:"model"`      // sha256, 64 hex digits
	ModelSize uint64 `json:"model_size"` // bytes
	Stages    uint16 `json:"stages"`
	// Stage is the stage being priced (0 for an inference job): a
	// pipeline's stages cost differently and are bid on one by one.
	Stage      uint16 `json:"stage"`
	Redundancy uint16 `json:"redundancy"`
	// MaxPrice is the cap per stage replica, in base units.
	MaxPrice  string   `json:"max_price"`
	MaxTokens uint64   `json:"max_tokens"` // 0 unless an inference job sets it
	Require   []string `json:"require"`    // attribute patterns bidders must match
	Client    string   `json:"client"`
	Height    int64    `json:"height"` // the chain height the agent saw the job at
	Provider  Provider `json:"provider"`
	// Session holds a session lease's terms (kind session only): the
	// price asked is then per output token.
	Session *Session `json:"session,omitempty"`
}

// Session is what a session job leases: each lane's budget (base units,
// decimal), the input token's price as a share of the output token's,
// and how long the awarded providers serve (keeping the model loaded)
// and then take redemptions.
type Session struct {
	Budget        string `json:"budget"`
	InputPriceBps uint64 `json:"input_price_bps"`
	Blocks        uint64 `json:"blocks"`
	Grace         uint64 `json:"grace"`
}

// Provider is the bidding provider as a pricing strategy sees it.
type Provider struct {
	Address         string   `json:"address"`
	Attributes      []string `json:"attributes"`
	TokensPerSecond float64  `json:"tokens_per_second"` // measured, 0 if unknown
}

// NewJobView describes job j, seen at height, to provider p.
func NewJobView(j *market.Job, height int64, p Provider) JobView {
	maxPrice := "0"
	if j.MaxPrice != nil {
		maxPrice = j.MaxPrice.Dec()
	}
	require := j.Req.Attributes
	if require == nil {
		require = []string{}
	}
	if p.Attributes == nil {
		p.Attributes = []string{}
	}
	var sess *Session
	if t := j.Session; t != nil && t.Budget != nil {
		sess = &Session{Budget: t.Budget.Dec(), InputPriceBps: t.InputPriceBps, Blocks: t.Blocks, Grace: t.Grace}
	}
	return JobView{
		Session: sess,
		ID:      j.ID, Kind: j.Kind, Mode: j.Mode, Model: hex.EncodeToString(j.Model[:]), ModelSize: j.ModelSize,
		Stages: j.Stages, Redundancy: j.Redundancy, MaxPrice: maxPrice, MaxTokens: j.MaxTokens,
		Require: require, Client: j.Client.Hex(), Height: height, Provider: p,
	}
}

// maxPrice parses the job's cap.
func (j *JobView) maxPrice() (*uint256.Int, error) {
	p, err := uint256.FromDecimal(j.MaxPrice)
	if err != nil {
		return nil, fmt.Errorf("job %d: max price %q is not a decimal amount in base units: %w", j.ID, j.MaxPrice, err)
	}
	return p, nil
}

// Strategy prices a job for one stage replica. An error means: do not bid;
// it wraps ErrNoBid when that is the strategy's decision rather than a
// failure.
type Strategy interface {
	Price(ctx context.Context, j JobView) (*uint256.Int, error)
}

// ErrNoBid marks a strategy's decision not to bid (a script's skip, a cap
// below the strategy's price).
var ErrNoBid = errors.New("no bid")

// PerToken prices an inference job at Base + PerToken × max(MaxTokens, 1),
// a pipeline stage at PerStage (Base + PerToken if PerStage is nil), and a
// session at PerToken per output token (a session has no per-job base: it
// pays every token), in base units; nil means zero. It does not bid where
// that exceeds the job's cap.
type PerToken struct {
	Base, PerToken *uint256.Int
	PerStage       *uint256.Int
}

// Price implements Strategy.
func (s PerToken) Price(_ context.Context, j JobView) (*uint256.Int, error) {
	limit, err := j.maxPrice()
	if err != nil {
		return nil, err
	}
	price := new(uint256.Int)
	if j.Kind == market.KindSession {
		if s.PerToken != nil {
			price.Set(s.PerToken)
		}
	} else if j.Kind == "pipeline" && s.PerStage != nil {
		price.Set(s.PerStage)
	} else if s.PerToken != nil {
		if _, overflow := price.MulOverflow(s.PerToken, uint256.NewInt(max(j.MaxTokens, 1))); overflow {
			return nil, fmt.Errorf("%w: %d tokens at %s each overflows", ErrNoBid, j.MaxTokens, s.PerToken.Dec())
		}
	}
	if s.Base != nil && j.Kind != market.KindSession && (j.Kind != "pipeline" || s.PerStage == nil) {
		if _, overflow := price.AddOverflow(price, s.Base); overflow {
			return nil, fmt.Errorf("%w: base %s plus the token price overflows", ErrNoBid, s.Base.Dec())
		}
	}
	if price.Gt(limit) {
		return nil, fmt.Errorf("%w: job %d: our price %s is above its max price %s", ErrNoBid, j.ID, types.FormatAmount(price), types.FormatAmount(limit))
	}
	return price, nil
}
