package console

import (
	"context"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/types"
)

// Options are what a console is given besides the chain: the token and
// the parts of the process that runs it. A console with neither Client
// nor Provider is a read-only explorer; with them it shows the account's
// own pages and offers their actions, which that process signs with the
// key it already holds (the browser never sees a key).
type Options struct {
	// Token authorises actions; "" makes a random one (see Server.Token).
	Token string
	// Client is a client account this process holds the key of (`ogpud
	// console --from`): the client page, posting and cancelling jobs.
	Client ClientSide
	// Provider is the provider agent this process runs (`ogpud provider
	// run --console`): its decisions, speed, reachability, pricing and
	// stake actions.
	Provider ProviderSide
}

// ClientSide is a client account whose key the console's process holds.
type ClientSide interface {
	Address() types.Address
	// Models are the models the client can post jobs for.
	Models() []ModelChoice
	// PostLLM posts an inference job and returns once it is on chain
	// (escrow locked); the process then serves the prompt to the winners
	// and follows the job in the background until it settles.
	PostLLM(ctx context.Context, p PostLLM) (job uint64, height int64, err error)
	// Cancel cancels a job still in its bidding window.
	Cancel(ctx context.Context, job uint64) error
	// CloseSession ends a session early: what no voucher claimed is
	// refunded after its grace window.
	CloseSession(ctx context.Context, id uint64) error
}

// ModelChoice is a model a client can post a job for.
type ModelChoice struct {
	Name string
	Hash types.Hash
	Size uint64
}

// PostLLM is the form of an inference job.
type PostLLM struct {
	Model      types.Hash
	Prompt     string
	MaxTokens  uint64
	Redundancy uint16
	// MaxPrice is the price cap per provider (auction) or the fixed
	// reward per replica (pool).
	MaxPrice *uint256.Int
	// Mode is "auction" (sealed bids) or "pool".
	Mode string
}

// ProviderSide is the provider agent the console's process runs.
type ProviderSide interface {
	Address() types.Address
	// Decisions are the agent's latest auction decisions, newest first:
	// bids and why it did not bid.
	Decisions() []Decision
	// Speeds are the agent's latest measured generations, oldest first.
	Speeds() []SpeedSample
	// Reachability is how peers reach the agent.
	Reachability() Reachability
	// Pricing is the agent's current price; SetPricing changes it (and
	// the next bids).
	Pricing() Pricing
	SetPricing(ctx context.Context, p Pricing) error
	// Bond and Unbond move the provider's stake (signed transactions).
	Bond(ctx context.Context, amount *uint256.Int) error
	Unbond(ctx context.Context, amount *uint256.Int) error
}

// Decision, SpeedSample and Reachability are the provider agent's own
// records (node/agent's dashboard), shown as they are.
type (
	Decision     = agent.Decision
	SpeedSample  = agent.SpeedSample
	Reachability = agent.Reachability
)

// Pricing is a provider's built-in per-token price: Base per job plus
// PerToken per token of the job's budget. Script is set instead when an
// external pricing script decides (it cannot be changed from the page).
type Pricing struct {
	Base, PerToken *uint256.Int
	Script         string
}
