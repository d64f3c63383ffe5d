// Package genesis is the chain's initial state: parameters, account
// allocations and validators, as the app_state of CometBFT's genesis.json.
// Default() gives a valid document, Validate() is pure, and a document
// exported from a running chain starts a new chain with the same app hash.
package genesis

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/types"
)

// Params are the consensus parameters of transaction admission.
type Params struct {
	// MinGasPrice is the fee in base units charged per unit of gas.
	MinGasPrice *uint256.Int `json:"min_gas_price"`
	// TxBaseGas is charged once per transaction.
	TxBaseGas uint64 `json:"tx_base_gas"`
	// TxByteGas is charged per byte of the encoded transaction.
	TxByteGas uint64 `json:"tx_byte_gas"`
	// MsgGas is charged per message.
	MsgGas uint64 `json:"msg_gas"`
	// MaxTxBytes bounds the encoded size of a transaction.
	MaxTxBytes uint64 `json:"max_tx_bytes"`
	// MaxMsgs bounds the number of messages in a transaction.
	MaxMsgs uint64 `json:"max_msgs"`

	// Staking: bonds, unbonding, validators.
	Staking StakingParams `json:"staking"`
	// Market: jobs, auctions, verification, slashing.
	Market MarketParams `json:"market"`
	// WorkGas prices what a message makes the chain do beyond msg_gas:
	// a posted job's close and deadlines, a bid's eligibility matching.
	WorkGas WorkGas `json:"work_gas" rlp:"optional"`
	// Bridge: the Ethereum bridge; absent, it is off.
	Bridge *BridgeParams `json:"bridge,omitempty" rlp:"optional"`
}

// BridgeParams name the Ethereum deployment the validators attest and sign
// for, and bound what the bridge does per block (package bridge).
type BridgeParams struct {
	// EthChainID and Contract are the Ethereum chain and the OGPUBridge
	// contract: both go into every digest validators sign.
	EthChainID uint64        `json:"eth_chain_id"`
	Contract   types.Address `json:"contract"`
	// StartBlock is the contract's deployment block: validators' watchers
	// search its logs from there (not consensus data; a hint).
	StartBlock uint64 `json:"eth_start_block"`
	// MinWithdrawal is the smallest withdrawal: each one costs every
	// validator a signature and a relayer Ethereum gas.
	MinWithdrawal *uint256.Int `json:"min_withdrawal"`
	// MaxPendingWithdrawals bounds the withdrawals waiting for signatures
	// (a spammer paying the minimum fee cannot outgrow the validators'
	// signing, MaxSigs per block each).
	MaxPendingWithdrawals uint64 `json:"max_pending_withdrawals"`
	// ValsetChangeBps is how much of the normalized power must move (sum
	// of |old - new| over 2^32, in basis points) before the chain asks the
	// validators to sign a new valset for the contract; any member joining
	// or leaving does too.
	ValsetChangeBps uint64 `json:"valset_change_bps"`
}

// DefaultBridgeParams leave Contract empty: the deployment fills it in.
func DefaultBridgeParams() BridgeParams {
	return BridgeParams{
		MinWithdrawal:         types.OGPU(1),
		MaxPendingWithdrawals: 256,
		ValsetChangeBps:       500,
	}
}

// Validate checks the bridge parameters.
func (p *BridgeParams) Validate() error {
	switch {
	case p.EthChainID == 0:
		return fmt.Errorf("params.bridge.eth_chain_id is missing")
	case p.Contract == (types.Address{}):
		return fmt.Errorf("params.bridge.contract is missing: deploy OGPUBridge and put its address here")
	case p.MinWithdrawal == nil || p.MinWithdrawal.IsZero():
		return fmt.Errorf("params.bridge.min_withdrawal must be positive")
	case p.MaxPendingWithdrawals == 0 || p.MaxPendingWithdrawals > 65_536:
		return fmt.Errorf("params.bridge.max_pending_withdrawals = %d: want 1..65536", p.MaxPendingWithdrawals)
	case p.ValsetChangeBps == 0 || p.ValsetChangeBps > 10_000:
		return fmt.Errorf("params.bridge.valset_change_bps = %d: want 1..10000", p.ValsetChangeBps)
	}
	return nil
}

// WorkGas is the gas of the work a message causes, charged on top of
// msg_gas. Each is at most MaxWorkGas.
type WorkGas struct {
	// StageGas is charged per stage of a posted job: its task record,
	// deadlines and settlement.
	StageGas uint64 `json:"stage_gas"`
	// SlotGas is charged per stage × redundancy of a posted job: the
	// close ranks, awards and settles that many slots.
	SlotGas uint64 `json:"slot_gas"`
	// RequirementGas is charged per attribute requirement of a posted job.
	RequirementGas uint64 `json:"requirement_gas"`
	// MatchGas is charged per requirement × attribute comparison a bid or
	// claim's eligibility check may make (in CheckTx and again at the
	// close). A bid is charged at the bound, MaxWorkMatches: its gas is
	// computed from the transaction alone, so that a client knows the fee
	// without reading the state and CheckTx and the block agree.
	MatchGas uint64 `json:"match_gas"`
}

// Bounds of MsgWork: the market bounds requirements and provider
// attributes to 64 each (market.MaxAttributes).
const (
	MaxWorkRequirements = 64
	MaxWorkMatches      = 64 * 64
	MaxWorkGas          = 1_000_000
	// MaxWorkRedundancy is the largest max_redundancy (Validate): the
	// bound of an award's slots and eligibility checks.
	MaxWorkRedundancy = 64
	// MaxWorkSigs bounds MsgWork.Sigs: a session dispute carries at most
	// two requests and two receipts.
	MaxWorkSigs = 4
)

// MsgWork is what one message makes the chain do beyond msg_gas; the zero
// value is a plain message. chain.MsgWorks derives it from messages.
type MsgWork struct {
	Stages       uint64 // stages of a posted job
	Slots        uint64 // stages × redundancy of a posted job
	Requirements uint64 // attribute requirements of a posted job
	Matches      uint64 // requirement × attribute comparisons of a bid or claim
	// Awards is the tasks a message may award (a pool claim: the one it
	// claims, at its r-th eligible claim): each is charged at its bound,
	// stage_gas + max_redundancy × (slot_gas + an eligibility check of an
	// earlier claim, MaxWorkMatches × match_gas). At most one counts.
	Awards uint64
	// Sigs is the secp256k1 recoveries a message makes beyond its
	// transaction's own (a session dispute: its requests' and receipts'
	// signatures), each charged like a bid's matching at the bound
	// (MaxWorkMatches × match_gas ≈ tx_base_gas by default). At most
	// MaxWorkSigs count.
	Sigs uint64
}

// StakingParams govern bonded stake and validators.
type StakingParams struct {
	// UnbondingBlocks is how long unbonded stake stays locked and
	// slashable. It must exceed the longest job plus the dispute window, so
	// that nobody can walk away from a job before it is judged.
	UnbondingBlocks uint64 `json:"unbonding_blocks"`
	// MinProviderStake is the least bonded stake a provider bids with.
	MinProviderStake *uint256.Int `json:"min_provider_stake"`
	// MinValidatorStake is the least self-bond of a validator with power.
	MinValidatorStake *uint256.Int `json:"min_validator_stake"`
	// PowerReduction is the stake per unit of voting power.
	PowerReduction *uint256.Int `json:"power_reduction"`
	// MaxValidators bounds the number of validators.
	MaxValidators uint64 `json:"max_validators"`
	// ValidatorJailBlocks is how long a jailed validator waits to unjail.
	ValidatorJailBlocks uint64 `json:"validator_jail_blocks"`
	// DowntimeBlocks: a validator missing this many consecutive blocks is
	// slashed DowntimeSlashBps and jailed.
	DowntimeBlocks   uint64 `json:"downtime_blocks"`
	DowntimeSlashBps uint64 `json:"downtime_slash_bps"`
	// DoubleSignSlashBps is slashed from a validator CometBFT reports for
	// equivocation; it is also tombstoned.
	DoubleSignSlashBps uint64 `json:"double_sign_slash_bps"`
}

// MarketParams govern jobs, auctions, results and disputes. Fractions are
// basis points (1/10,000), all arithmetic is integer.
type MarketParams struct {
	// BidDeposit is locked with every sealed bid; an unrevealed bid loses it.
	BidDeposit *uint256.Int `json:"bid_deposit"`
	// ValidatorFeeBps of a job's maximum payout is locked with the job and
	// paid to the fee pool when the job is awarded and settled.
	ValidatorFeeBps uint64 `json:"validator_fee_bps"`
	MaxStages       uint64 `json:"max_stages"`
	MaxRedundancy   uint64 `json:"max_redundancy"`
	// MaxBidsPerStage bounds the order book (and the work of a close).
	MaxBidsPerStage uint64 `json:"max_bids_per_stage"`
	// MaxJobBlocks bounds a job's whole life, including one reassignment
	// round: bid + reveal + 2 × (execute + verify) for an inference job,
	// bid + reveal + stages × (execute + verify + dispute_blocks) +
	// (execute + verify) for a pipeline, whose stages open one after
	// another.
	MaxJobBlocks uint64 `json:"max_job_blocks"`
	// DisputeBlocks is how long validators have to vote on a dispute.
	DisputeBlocks uint64 `json:"dispute_blocks"`
	// FraudSlashBps of a provider's stake is slashed for a wrong result
	// (lost dispute, failed canary); the provider is also tombstoned.
	FraudSlashBps uint64 `json:"fraud_slash_bps"`
	// NoShowSlashBps is slashed from a provider that does not commit or
	// reveal its result in time; it is jailed for ProviderJailBlocks.
	NoShowSlashBps     uint64 `json:"no_show_slash_bps"`
	ProviderJailBlocks uint64 `json:"provider_jail_blocks"`
	// CompensationBps of a provider's fraud slash goes to the job's client
	// (not for a canary: to nobody); the rest is burned. A no-show's slash
	// is all burned: a client must not profit from a provider missing a
	// deadline it may have caused.
	CompensationBps uint64 `json:"compensation_bps"`
	// CanaryBlocks: a task whose results agree settles this many blocks
	// after its last reveal, so that the poster of a canary can contest a
	// wrong agreement (every task waits, so canaries look like any job).
	CanaryBlocks uint64 `json:"canary_blocks"`
	// CanaryRateBps is how many canaries the validator agents post per
	// 10,000 client jobs, network-wide (agents read it; the chain cannot
	// tell canaries from jobs).
	CanaryRateBps uint64 `json:"canary_rate_bps"`
	// VoteSlashBps of a validator's stake is burned when it seals no vote,
	// does not open it, or votes against the outcome of a decided vote.
	VoteSlashBps uint64 `json:"vote_slash_bps"`
	// MaxDeadlineWork bounds the deadline work of one block, in units of
	// 1 + the job's stage count per deadline; the rest carries over.
	MaxDeadlineWork uint64 `json:"max_deadline_work"`
	// MinReputationPayment: an agreed result paid less than this adds
	// nothing to its provider's reputation (M3: sybils agreeing on junk
	// for 1-base-unit jobs farmed it for free). Each reputation point then
	// costs a farmer at least validator_fee_bps of it in validator fees.
	// Nil is no minimum.
	MinReputationPayment *uint256.Int `json:"min_reputation_payment" rlp:"optional"`
	// SessionDisputeBond is what the accuser of a session dispute locks
	// (protocol-threats S12, S19): returned when a receipt is proven wrong
	// or the validators reach no majority, paid to the fee pool when every
	// receipt is valid or the data was not available.
	SessionDisputeBond *uint256.Int `json:"session_dispute_bond" rlp:"optional"`
	// SessionReservationBps (S21) of each session lane's budget per 1,000
	// session blocks is paid to the lane's provider at the award, out of
	// the lane's budget, whether or not the client sends a request: a
	// client pays to keep r providers warm. At most 50 (half a budget at
	// the longest session, market.MaxSessionBlocks).
	SessionReservationBps uint64 `json:"session_reservation_bps" rlp:"optional"`
	// SessionLaneCapBps (S22) of a provider's bonded stake bounds the
	// budgets of its lanes in sessions not yet settled: at an auction's
	// close, a session bidder whose open budgets plus the new lane pass it
	// is not eligible. 0 is no cap.
	SessionLaneCapBps uint64 `json:"session_lane_cap_bps" rlp:"optional"`
	// Finetune governs fine-tune jobs and their step-bisection games
	// (package finetune); absent, the chain takes no fine-tune job.
	//
	// The tag's "nil" keeps an absent Finetune absent when a later field
	// (RetainBlocks) is set: RLP writes a nil pointer as an empty list.
	Finetune *FinetuneParams `json:"finetune,omitempty" rlp:"nil,optional"`
	// RetainBlocks: a job that reached a final state (completed, expired,
	// cancelled) is pruned from the state this many blocks later, with its
	// bids, tasks, votes, fine-tune games and index entries (market
	// prune.go); its history stays in the block events and the indexer.
	// No transaction can act on a final job, so the blocks only serve
	// readers (agents, the console) that look at it after its end; a
	// session job also waits for its session's dispute window. 0 keeps
	// every job forever (the rule before app version 7).
	RetainBlocks uint64 `json:"retain_blocks" rlp:"optional"`
	// AuditRateBps of the tasks whose r results agreed are audited: the
	// validators re-execute them before they are paid, drawn from the
	// randomness beacon after the results are revealed (market/audit.go).
	// 0 audits none.
	AuditRateBps uint64 `json:"audit_rate_bps" rlp:"optional"`
	// DeterrenceBps sets the stake at risk on an open slot paid P:
	// P × deterrence_bps / audit_rate_bps. A caught lie costs at least
	// that, and a provider holds open slots only while their stake at
	// risk fits in its bond (market/deterrence.go). At least 10,000, so
	// that a lie loses money at every price.
	DeterrenceBps uint64 `json:"deterrence_bps" rlp:"optional"`
}

// FinetuneParams govern fine-tune jobs (market/finetune.go) and the
// step-bisection games that decide their disagreements (package finetune).
type FinetuneParams struct {
	// Arity is c: each game round opens c−1 checkpoints per group (2 to
	// 8; 2 is bisection).
	Arity uint64 `json:"arity"`
	// MaxSteps bounds a job's step count N (its checkpoint tree has N+1
	// leaves).
	MaxSteps uint64 `json:"max_steps"`
	// WindowBlocks is how long a round waits for the groups' openings.
	// protocol-threats T15 asks for W·B_fill > f·S: a main chain raises it.
	WindowBlocks uint64 `json:"window_blocks"`
	// VerdictBlocks is how long the validators have to fetch the agreed
	// checkpoint, re-execute the one disputed step and vote.
	VerdictBlocks uint64 `json:"verdict_blocks"`
	// MaxDatasetBytes bounds a job's dataset (T12: what providers fetch
	// and validators check).
	MaxDatasetBytes uint64 `json:"max_dataset_bytes"`
}

// Bounds of FinetuneParams.
const (
	FinetuneMinArity = 2
	FinetuneMaxArity = 8
	// FinetuneMaxMaxSteps: a tree of 2^32 + 1 leaves has proofs of at most
	// 33 hashes (finetune.MaxProofLen is 40).
	FinetuneMaxMaxSteps = 1 << 32
	// FinetuneMaxDatasetBytes is the runtime's own bound on a dataset
	// (runtime/llm/train.MaxDataBytes).
	FinetuneMaxDatasetBytes = 16 << 20
)

// DefaultFinetuneParams: bisection, up to 2^20 steps, 20-block rounds and
// a 40-block verdict (10 s and 20 s at 0.5 s blocks): sized so that a game
// over 2^10 steps (10 rounds, 240 blocks) and the job before it fit the
// default unbonding of 1,200 blocks. A main chain raises windows and
// unbonding together (T15).
func DefaultFinetuneParams() FinetuneParams {
	return FinetuneParams{Arity: 2, MaxSteps: 1 << 20, WindowBlocks: 20, VerdictBlocks: 40, MaxDatasetBytes: 1 << 20}
}

// Validate checks the ranges.
func (p FinetuneParams) Validate() error {
	switch {
	case p.Arity < FinetuneMinArity || p.Arity > FinetuneMaxArity:
		return fmt.Errorf("params.market.finetune.arity = %d: want %d..%d", p.Arity, FinetuneMinArity, FinetuneMaxArity)
	case p.MaxSteps < 1 || p.MaxSteps > FinetuneMaxMaxSteps:
		return fmt.Errorf("params.market.finetune.max_steps = %d: want 1..%d", p.MaxSteps, uint64(FinetuneMaxMaxSteps))
	case p.WindowBlocks < 1 || p.VerdictBlocks < 2 || p.WindowBlocks > 1_000_000 || p.VerdictBlocks > 1_000_000:
		return fmt.Errorf("params.market.finetune: window_blocks %d and verdict_blocks %d: want 1..1000000 and 2..1000000 (the verdict seals in its first half, opens in the second)", p.WindowBlocks, p.VerdictBlocks)
	case p.MaxDatasetBytes < 1 || p.MaxDatasetBytes > FinetuneMaxDatasetBytes:
		return fmt.Errorf("params.market.finetune.max_dataset_bytes = %d: want 1..%d", p.MaxDatasetBytes, FinetuneMaxDatasetBytes)
	}
	return nil
}

// MaxSessionReservationBps bounds params.market.session_reservation_bps:
// at the longest session (100,000 blocks) the reservation fee is then at
// most half of a lane's budget.
const MaxSessionReservationBps = 50

// MaxRetainBlocks bounds params.market.retain_blocks (a final job's height
// plus it cannot overflow). A chain that keeps every job sets 0.
const MaxRetainBlocks = 1_000_000_000

// DefaultStakingParams: three weeks of one-second blocks would be a real
// network's unbonding period; the default is sized to the job bound.
func DefaultStakingParams() StakingParams {
	return StakingParams{
		UnbondingBlocks:     1_200,
		MinProviderStake:    types.OGPU(100),
		MinValidatorStake:   types.OGPU(1_000),
		PowerReduction:      types.OGPU(1),
		MaxValidators:       100,
		ValidatorJailBlocks: 100,
		DowntimeBlocks:      50,
		DowntimeSlashBps:    10,
		DoubleSignSlashBps:  500,
	}
}

// DefaultMarketParams. The economic simulation (market/sim_test.go) shows
// that at these values every cheating strategy loses money.
func DefaultMarketParams() MarketParams {
	return MarketParams{
		BidDeposit:         types.OGPU(1),
		ValidatorFeeBps:    200,
		MaxStages:          64,
		MaxRedundancy:      16,
		MaxBidsPerStage:    256,
		MaxJobBlocks:       1_000,
		DisputeBlocks:      100,
		FraudSlashBps:      5_000,
		NoShowSlashBps:     200,
		ProviderJailBlocks: 200,
		CompensationBps:    5_000,
		CanaryBlocks:       3,
		// Canaries are retired in favour of random audits (issue 30,
		// docs/design-notes.md "Paid means verified"): validators post
		// none unless a network raises this.
		CanaryRateBps:   0,
		VoteSlashBps:    10,
		MaxDeadlineWork: 50_000,
		// The bid deposit's scale: a job worth less earns no reputation.
		MinReputationPayment: types.OGPU(1),
		// Ten times the bid deposit: a dismissed dispute pays the
		// validators' fetching and judging (S19: bond ≥ D_v).
		SessionDisputeBond: types.OGPU(10),
		// 0.1% of a lane's budget per 1,000 blocks: 10% at the longest
		// session (100,000 blocks).
		SessionReservationBps: 10,
		// κ = f at the default fraud slash: the budgets a provider can
		// cheat on at once are at most what one fraud slash takes (S22,
		// docs/economics.md limit 2).
		SessionLaneCapBps: 5_000,
		Finetune:          ptr(DefaultFinetuneParams()),
		// Five dispute windows: an agent or the console that was down a
		// few minutes still finds a job it watched (docs/design-notes.md
		// "Pruning settled jobs").
		RetainBlocks: 500,
		// One agreed task in twenty re-executed by the validators: with
		// r = 2 about 2.5% more compute than the replicas themselves
		// (docs/benchmarks.md, "The cost of verification").
		AuditRateBps: 500,
		// The break-even stake, P / ρ: a lie's expected profit is
		// (1 − ρ − 1)·P = −ρ·P, negative at every price; the minimum
		// provider stake (100 oGPU) then backs 5 oGPU of open slots.
		DeterrenceBps: 10_000,
	}
}

func ptr[T any](v T) *T { return &v }

// Evidence age defaults for CometBFT's consensus params (genesis.json,
// consensus_params.evidence): evidence of an equivocation is accepted
// until it is older than BOTH max_age_num_blocks and max_age_duration.
// The app slashes only stake that is still bonded or unbonding, so
// evidence must expire before unbonding stake matures: CheckEvidenceAge
// requires max_age_num_blocks < unbonding_blocks, and the default
// duration (10 s) stays below unbonding_blocks blocks at any block time
// above 9 ms. A production network with weeks of unbonding raises both.
const (
	DefaultEvidenceMaxAgeBlocks   = 1_000
	DefaultEvidenceMaxAgeDuration = 10 * time.Second
)

// CheckEvidenceAge refuses consensus params under which equivocation
// evidence could arrive after the stake that backed it has left: the
// evidence max age in blocks must be below unbonding_blocks.
func (p StakingParams) CheckEvidenceAge(maxAgeBlocks int64) error {
	if maxAgeBlocks <= 0 || uint64(maxAgeBlocks) >= p.UnbondingBlocks {
		return fmt.Errorf("consensus_params.evidence.max_age_num_blocks = %d must be positive and below params.staking.unbonding_blocks = %d: evidence older than the unbonding period would find the double-signer's stake gone (lower the evidence age or raise unbonding_blocks)",
			maxAgeBlocks, p.UnbondingBlocks)
	}
	return nil
}

// Validate reports the first staking parameter out of range.
func (p StakingParams) Validate() error {
	switch {
	case p.MinProviderStake == nil || p.MinValidatorStake == nil || p.PowerReduction == nil:
		return fmt.Errorf("params.staking: min_provider_stake, min_validator_stake and power_reduction must be set")
	case p.PowerReduction.IsZero():
		return fmt.Errorf("params.staking.power_reduction must be positive")
	case p.MinValidatorStake.Lt(p.PowerReduction):
		return fmt.Errorf("params.staking.min_validator_stake must be at least power_reduction, or a validator could have no power")
	case p.UnbondingBlocks == 0:
		return fmt.Errorf("params.staking.unbonding_blocks must be positive")
	case p.MaxValidators == 0 || p.MaxValidators > 10_000:
		return fmt.Errorf("params.staking.max_validators = %d: want 1..10000", p.MaxValidators)
	case p.DowntimeBlocks == 0:
		return fmt.Errorf("params.staking.downtime_blocks must be positive")
	case p.DowntimeSlashBps > 10_000 || p.DoubleSignSlashBps > 10_000:
		return fmt.Errorf("params.staking: slash fractions are basis points, at most 10000")
	}
	// Total voting power must fit CometBFT's bound (MaxTotalVotingPower =
	// MaxInt64/8): the whole supply divided by the reduction.
	if new(uint256.Int).Div(types.MaxSupply, p.PowerReduction).Gt(uint256.NewInt(math.MaxInt64 / 8)) {
		return fmt.Errorf("params.staking.power_reduction is too small: the supply's voting power would pass CometBFT's limit")
	}
	return nil
}

// Validate reports the first market parameter out of range.
func (p MarketParams) Validate() error {
	switch {
	case p.BidDeposit == nil:
		return fmt.Errorf("params.market.bid_deposit must be set")
	case p.ValidatorFeeBps > 10_000 || p.FraudSlashBps > 10_000 || p.NoShowSlashBps > 10_000 || p.CompensationBps > 10_000:
		return fmt.Errorf("params.market: fractions are basis points, at most 10000")
	case p.MaxStages == 0 || p.MaxStages > 1024:
		return fmt.Errorf("params.market.max_stages = %d: want 1..1024", p.MaxStages)
	case p.MaxRedundancy < 2 || p.MaxRedundancy > MaxWorkRedundancy:
		return fmt.Errorf("params.market.max_redundancy = %d: want 2..64", p.MaxRedundancy)
	case p.MaxBidsPerStage < p.MaxRedundancy || p.MaxBidsPerStage > 10_000:
		return fmt.Errorf("params.market.max_bids_per_stage = %d: want max_redundancy..10000", p.MaxBidsPerStage)
	case p.MaxJobBlocks < 8 || p.MaxJobBlocks > 1_000_000:
		return fmt.Errorf("params.market.max_job_blocks = %d: want 8..1000000", p.MaxJobBlocks)
	case p.DisputeBlocks == 0 || p.DisputeBlocks > 1_000_000:
		return fmt.Errorf("params.market.dispute_blocks = %d: want 1..1000000", p.DisputeBlocks)
	case p.ProviderJailBlocks == 0:
		return fmt.Errorf("params.market.provider_jail_blocks must be positive")
	case p.CanaryBlocks == 0 || p.CanaryBlocks > p.DisputeBlocks:
		return fmt.Errorf("params.market.canary_blocks = %d: want 1..dispute_blocks (%d)", p.CanaryBlocks, p.DisputeBlocks)
	case p.AuditRateBps > 10_000:
		return fmt.Errorf("params.market.audit_rate_bps = %d: want 0..10000", p.AuditRateBps)
	case p.AuditRateBps > 0 && (p.DeterrenceBps < 10_000 || p.DeterrenceBps > 1_000_000):
		return fmt.Errorf("params.market.deterrence_bps = %d: want 10000..1000000 (below 10000 a lie can pay; set audit_rate_bps 0 to turn audits off)", p.DeterrenceBps)
	case p.CanaryRateBps > 10_000 || p.VoteSlashBps > 10_000:
		return fmt.Errorf("params.market: canary_rate_bps and vote_slash_bps are basis points, at most 10000")
	case p.MaxDeadlineWork < 1+p.MaxStages:
		return fmt.Errorf("params.market.max_deadline_work = %d: want at least 1 + max_stages (%d), one job's deadline", p.MaxDeadlineWork, 1+p.MaxStages)
	case p.DisputeBlocks < 2:
		return fmt.Errorf("params.market.dispute_blocks = %d: a vote needs at least 2 blocks (seal, then open)", p.DisputeBlocks)
	case p.SessionDisputeBond == nil || p.SessionDisputeBond.IsZero() || p.SessionDisputeBond.Gt(types.MaxSupply):
		return fmt.Errorf("params.market.session_dispute_bond must be positive (e.g. 10ogpu): a free dispute would let anyone load the validators")
	case p.SessionReservationBps > MaxSessionReservationBps:
		return fmt.Errorf("params.market.session_reservation_bps = %d: want 0..%d (at most half a lane's budget at the longest session)", p.SessionReservationBps, MaxSessionReservationBps)
	case p.SessionLaneCapBps > 1_000_000:
		return fmt.Errorf("params.market.session_lane_cap_bps = %d: want 0 (no cap) .. 1000000 (100 × the stake)", p.SessionLaneCapBps)
	case p.RetainBlocks != 0 && (p.RetainBlocks < p.DisputeBlocks || p.RetainBlocks > MaxRetainBlocks):
		return fmt.Errorf("params.market.retain_blocks = %d: want 0 (never prune) or dispute_blocks (%d) .. %d", p.RetainBlocks, p.DisputeBlocks, uint64(MaxRetainBlocks))
	}
	if p.Finetune != nil {
		return p.Finetune.Validate()
	}
	return nil
}

// DefaultParams: a transfer costs about 33,000 gas, 0.000033 oGPU at 1 gwei.
func DefaultParams() Params {
	return Params{
		MinGasPrice: uint256.NewInt(1_000_000_000),
		TxBaseGas:   21_000,
		TxByteGas:   16,
		MsgGas:      9_000,
		MaxTxBytes:  64 << 10,
		MaxMsgs:     32,
		Staking:     DefaultStakingParams(),
		Market:      DefaultMarketParams(),
		WorkGas:     DefaultWorkGas(),
	}
}

// DefaultWorkGas: a 1-stage, 2-replica job pays 9,000 on top of msg_gas,
// a 64-stage, 16-replica one 2,368,000; a bid or claim pays 20,480 for its
// matching (see docs/design-notes.md, M2), and a pool claim 364,680 more
// for the award it may make (5,000 + 16 × (2,000 + 20,480) at the default
// max_redundancy of 16; docs/design-notes.md, issue 14).
func DefaultWorkGas() WorkGas {
	return WorkGas{StageGas: 5_000, SlotGas: 2_000, RequirementGas: 500, MatchGas: 5}
}

// Validate reports the first parameter out of range.
func (p Params) Validate() error {
	switch {
	case p.MinGasPrice == nil:
		return fmt.Errorf("params.min_gas_price is missing")
	case p.MaxTxBytes < 256 || p.MaxTxBytes > 4<<20:
		return fmt.Errorf("params.max_tx_bytes = %d: want 256..4194304", p.MaxTxBytes)
	case p.MaxMsgs == 0 || p.MaxMsgs > 1024:
		return fmt.Errorf("params.max_msgs = %d: want 1..1024", p.MaxMsgs)
	}
	// Gas is computed in uint64 and reported to CometBFT as an int64, so the
	// gas of the largest transaction must fit in an int64 without wrapping
	// (a wrapped gas would make a large transaction cheap). runTx computes
	// gas before it refuses too many messages, so a message count is bounded
	// only by the size: one per byte at most.
	if hi, lo := bits.Mul64(p.MaxTxBytes, p.TxByteGas); hi != 0 || lo > math.MaxInt64 {
		return fmt.Errorf("params.tx_byte_gas = %d: the gas of a %d-byte transaction overflows", p.TxByteGas, p.MaxTxBytes)
	}
	if hi, lo := bits.Mul64(p.MaxTxBytes, p.MsgGas); hi != 0 || lo > math.MaxInt64 {
		return fmt.Errorf("params.msg_gas = %d: the gas of %d messages overflows", p.MsgGas, p.MaxTxBytes)
	}
	if total, carry := bits.Add64(p.TxBaseGas, p.MaxTxBytes*p.TxByteGas+p.MaxTxBytes*p.MsgGas, 0); carry != 0 || total > math.MaxInt64 {
		return fmt.Errorf("params.tx_base_gas = %d: the gas of the largest transaction overflows", p.TxBaseGas)
	}
	w := p.WorkGas
	if w.StageGas > MaxWorkGas || w.SlotGas > MaxWorkGas || w.RequirementGas > MaxWorkGas || w.MatchGas > MaxWorkGas {
		return fmt.Errorf("params.work_gas: each gas is at most %d", MaxWorkGas)
	}
	// The heaviest message (bounds below 2^17 stages, 2^23 slots, 2^7
	// requirements, 2^13 matches, an award of 2^7 × 2^13 at 2^20 gas
	// each: below 2^45) times one
	// message per byte (2^22) stays below 2^67 only if checked: do so.
	if p.Market.MaxStages <= 1024 && p.Market.MaxRedundancy <= 64 {
		heaviest := p.workGas(MsgWork{Stages: p.Market.MaxStages, Slots: p.Market.MaxStages * p.Market.MaxRedundancy, Requirements: MaxWorkRequirements, Matches: MaxWorkMatches, Awards: 1, Sigs: MaxWorkSigs})
		hi, lo := bits.Mul64(p.MaxTxBytes, heaviest)
		if total, carry := bits.Add64(lo, p.TxBaseGas+p.MaxTxBytes*p.TxByteGas, 0); hi != 0 || carry != 0 || total > math.MaxInt64 {
			return fmt.Errorf("params.work_gas: the gas of the largest transaction overflows")
		}
	}
	// The largest fee must fit in 256 bits: gas < 2^63, price < 2^192.
	if p.MinGasPrice.BitLen() > 192 {
		return fmt.Errorf("params.min_gas_price is absurdly large")
	}
	if err := p.Staking.Validate(); err != nil {
		return err
	}
	if err := p.Market.Validate(); err != nil {
		return err
	}
	if p.Bridge != nil {
		if err := p.Bridge.Validate(); err != nil {
			return err
		}
	}
	if p.Staking.UnbondingBlocks <= p.Market.MaxJobBlocks+p.Market.DisputeBlocks {
		return fmt.Errorf("params.staking.unbonding_blocks = %d must exceed market.max_job_blocks + market.dispute_blocks = %d, so stake stays slashable until every job it backed is judged",
			p.Staking.UnbondingBlocks, p.Market.MaxJobBlocks+p.Market.DisputeBlocks)
	}
	return nil
}

// Gas is the gas of a transaction of size bytes whose messages cause work
// (one entry per message): tx_base_gas + size × tx_byte_gas + per message
// msg_gas + its work (workGas). This is the only fee formula: CheckTx,
// FinalizeBlock and every client compute fees with it.
func (p Params) Gas(size int, work []MsgWork) uint64 {
	g := p.TxBaseGas + uint64(size)*p.TxByteGas
	for _, w := range work {
		g += p.workGas(w)
	}
	return g
}

// workGas is one message's gas: msg_gas plus its work, each count clamped
// to what the market allows (a message beyond them fails anyway), so that
// Validate can bound the gas of the largest transaction.
func (p Params) workGas(w MsgWork) uint64 {
	stages := min(w.Stages, p.Market.MaxStages)
	slots := min(w.Slots, p.Market.MaxStages*p.Market.MaxRedundancy)
	award := p.WorkGas.StageGas + min(p.Market.MaxRedundancy, MaxWorkRedundancy)*(p.WorkGas.SlotGas+MaxWorkMatches*p.WorkGas.MatchGas)
	return p.MsgGas + stages*p.WorkGas.StageGas + slots*p.WorkGas.SlotGas +
		min(w.Requirements, MaxWorkRequirements)*p.WorkGas.RequirementGas + min(w.Matches, MaxWorkMatches)*p.WorkGas.MatchGas +
		min(w.Awards, 1)*award + min(w.Sigs, MaxWorkSigs)*MaxWorkMatches*p.WorkGas.MatchGas
}

// RequiredFee is Gas(size, work) * MinGasPrice.
func (p Params) RequiredFee(size int, work []MsgWork) *uint256.Int {
	return new(uint256.Int).Mul(uint256.NewInt(p.Gas(size, work)), p.MinGasPrice)
}

// Account is an allocation: a balance and, for exported chains, the nonce.
type Account struct {
	Address types.Address `json:"address"`
	Balance *uint256.Int  `json:"balance"`
	Nonce   uint64        `json:"nonce,omitempty"`
}

// Validator is a genesis validator: its operator account, its CometBFT
// ed25519 consensus key and its bonded self-stake, from which its voting
// power follows (stake / power_reduction).
type Validator struct {
	Name     string        `json:"name"`
	Operator types.Address `json:"operator"`
	PubKey   []byte        `json:"pub_key"`
	Stake    *uint256.Int  `json:"stake"`
}

// Doc is the app_state of genesis.json. The bridge reserve is what the cap
// leaves after balances, fee pool and burned tokens: the oGPU that exists on
// the Ethereum side.
type Doc struct {
	Params     Params       `json:"params"`
	Accounts   []Account    `json:"accounts"`
	Validators []Validator  `json:"validators"`
	FeePool    *uint256.Int `json:"fee_pool"`
	Burned     *uint256.Int `json:"burned"`
	// GenTxs are signed transactions (create-validator, typically) run at
	// InitChain after the allocations, in order; every one must succeed.
	// They are how `ogpud testnet` creates its validators.
	GenTxs []hexutil.Bytes `json:"gen_txs,omitempty"`
	// Bridge is the bridge's state carried over by an export (package
	// bridge): without it a restarted chain would credit every deposit
	// again from nonce 1.
	Bridge *BridgeState `json:"bridge_state,omitempty"`
}

// BridgeState is what an exported chain's bridge must remember: the last
// deposit credited and withdrawal nonce assigned, the validators' bridge
// keys, and the latest valset (the one the contract holds or will hold,
// adopted). Export refuses while withdrawals are in the outbound escrow.
type BridgeState struct {
	LastDeposit    uint64         `json:"last_deposit"`
	LastWithdrawal uint64         `json:"last_withdrawal"`
	Keys           []BridgeKey    `json:"keys"`
	ValsetNonce    uint64         `json:"valset_nonce"`
	Valset         []BridgeMember `json:"valset"`
}

// BridgeKey is a validator's bridge address.
type BridgeKey struct {
	Operator types.Address `json:"operator"`
	Key      types.Address `json:"key"`
}

// BridgeMember is one member of a valset.
type BridgeMember struct {
	Addr  types.Address `json:"addr"`
	Power uint32        `json:"power"`
}

// Default returns a valid document with no accounts: the whole supply is in
// the bridge reserve.
func Default() *Doc {
	return &Doc{
		Params:     DefaultParams(),
		Accounts:   []Account{},
		Validators: []Validator{},
		FeePool:    new(uint256.Int),
		Burned:     new(uint256.Int),
	}
}

// Validate checks the document without touching anything else.
func (d *Doc) Validate() error {
	if err := d.Params.Validate(); err != nil {
		return err
	}
	if d.FeePool == nil || d.Burned == nil {
		return fmt.Errorf("fee_pool and burned must be set (use \"0\")")
	}
	if _, err := d.BridgeReserve(); err != nil {
		return err
	}
	if d.Bridge != nil && d.Params.Bridge == nil {
		return fmt.Errorf("bridge_state is set but params.bridge is absent")
	}
	for i, a := range d.Accounts {
		if a.Balance == nil {
			return fmt.Errorf("accounts[%d] (%s): balance is missing", i, a.Address)
		}
		if a.Address == (types.Address{}) {
			return fmt.Errorf("accounts[%d]: the zero address cannot hold oGPU", i)
		}
		if i > 0 && bytes.Compare(d.Accounts[i-1].Address[:], a.Address[:]) >= 0 {
			return fmt.Errorf("accounts[%d] (%s): accounts must be sorted by address without duplicates", i, a.Address)
		}
	}
	for i, v := range d.Validators {
		if len(v.PubKey) != ed25519.PublicKeySize {
			return fmt.Errorf("validators[%d] (%s): pub_key is %d bytes, want an ed25519 key of %d", i, v.Name, len(v.PubKey), ed25519.PublicKeySize)
		}
		if v.Operator == (types.Address{}) {
			return fmt.Errorf("validators[%d] (%s): operator is missing", i, v.Name)
		}
		if v.Stake == nil || v.Stake.Lt(d.Params.Staking.MinValidatorStake) {
			return fmt.Errorf("validators[%d] (%s): stake must be at least params.staking.min_validator_stake (%s)", i, v.Name, types.FormatAmount(d.Params.Staking.MinValidatorStake))
		}
		for _, w := range d.Validators[:i] {
			if bytes.Equal(w.PubKey, v.PubKey) {
				return fmt.Errorf("validators[%d] (%s): duplicate pub_key", i, v.Name)
			}
			if w.Operator == v.Operator {
				return fmt.Errorf("validators[%d] (%s): operator %s already runs validator %s", i, v.Name, v.Operator, w.Name)
			}
		}
	}
	if uint64(len(d.Validators)) > d.Params.Staking.MaxValidators {
		return fmt.Errorf("%d validators, params.staking.max_validators is %d", len(d.Validators), d.Params.Staking.MaxValidators)
	}
	for i, tx := range d.GenTxs {
		if len(tx) == 0 {
			return fmt.Errorf("gen_txs[%d] is empty", i)
		}
	}
	return nil
}

// BridgeReserve is MaxSupply minus balances, stakes, fee pool and burned tokens; an
// error if they exceed the cap.
func (d *Doc) BridgeReserve() (*uint256.Int, error) {
	total := new(uint256.Int)
	parts := []*uint256.Int{d.FeePool, d.Burned}
	for _, a := range d.Accounts {
		parts = append(parts, a.Balance)
	}
	for _, v := range d.Validators {
		parts = append(parts, v.Stake)
	}
	for _, p := range parts {
		if p == nil {
			continue
		}
		if _, overflow := total.AddOverflow(total, p); overflow {
			return nil, fmt.Errorf("allocations overflow")
		}
	}
	if total.Gt(types.MaxSupply) {
		return nil, fmt.Errorf("allocations total %s, more than the cap of %s", types.FormatAmount(total), types.FormatAmount(types.MaxSupply))
	}
	return new(uint256.Int).Sub(types.MaxSupply, total), nil
}

// AddAccount adds amt to addr's allocation (creating it) and keeps accounts
// sorted. It fails if the total would pass the cap.
func (d *Doc) AddAccount(addr types.Address, amt *uint256.Int) error {
	// Check before changing anything: a refused addition leaves d as it was.
	reserve, err := d.BridgeReserve()
	if err != nil {
		return err
	}
	if amt.Gt(reserve) {
		return fmt.Errorf("cannot add %s to %s: only %s is left under the cap of %s", types.FormatAmount(amt), addr, types.FormatAmount(reserve), types.FormatAmount(types.MaxSupply))
	}
	i, found := slices.BinarySearchFunc(d.Accounts, addr, func(a Account, t types.Address) int {
		return bytes.Compare(a.Address[:], t[:])
	})
	if found {
		// No overflow: the sum is within the cap checked above.
		d.Accounts[i].Balance = new(uint256.Int).Add(d.Accounts[i].Balance, amt)
	} else {
		d.Accounts = slices.Insert(d.Accounts, i, Account{Address: addr, Balance: amt.Clone()})
	}
	return nil
}

// Sort puts accounts in address order, as Validate requires.
func (d *Doc) Sort() {
	slices.SortFunc(d.Accounts, func(a, b Account) int { return bytes.Compare(a.Address[:], b.Address[:]) })
}

// Parse reads and validates an app_state.
func Parse(bz []byte) (*Doc, error) {
	d := Default()
	dec := json.NewDecoder(bytes.NewReader(bz))
	dec.DisallowUnknownFields()
	if err := dec.Decode(d); err != nil {
		return nil, fmt.Errorf("cannot parse genesis app_state: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("cannot parse genesis app_state: data after the JSON object")
	}
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("invalid genesis app_state: %w", err)
	}
	return d, nil
}

// Marshal writes the document as indented JSON.
func (d *Doc) Marshal() ([]byte, error) {
	return json.MarshalIndent(d, "", "  ")
}

// Power is the voting power of a bonded stake: stake / power_reduction.
// Validate bounds it below CometBFT's total power limit.
func (p StakingParams) Power(stake *uint256.Int) int64 {
	return int64(new(uint256.Int).Div(stake, p.PowerReduction).Uint64())
}
