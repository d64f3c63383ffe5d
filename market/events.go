package market

import (
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/types"
)

// Typed events of the market, staking and verification. Names and
// attribute keys are part of the public interface: provider agents and
// clients subscribe to them (job_posted.job EXISTS, job_awarded.provider
// CONTAINS '0x..'). Decode with types.DecodeEvent.

type EventProviderRegistered struct {
	Provider types.Address `event:"provider,index"`
	PeerID   string        `event:"peer_id"`
	Update   bool          `event:"update"`
}

func (EventProviderRegistered) EventType() string { return "provider_registered" }

type EventProviderJailed struct {
	Provider   types.Address `event:"provider,index"`
	Until      uint64        `event:"until"`
	Tombstoned bool          `event:"tombstoned"`
	Reason     string        `event:"reason"`
}

func (EventProviderJailed) EventType() string { return "provider_jailed" }

type EventProviderUnjailed struct {
	Provider types.Address `event:"provider,index"`
}

func (EventProviderUnjailed) EventType() string { return "provider_unjailed" }

type EventSlashed struct {
	Account      types.Address `event:"account,index"`
	Job          uint64        `event:"job,index"`
	Stage        uint16        `event:"stage"`
	Amount       *uint256.Int  `event:"amount"`
	Compensation *uint256.Int  `event:"compensation"`
	Burned       *uint256.Int  `event:"burned"`
	Reason       string        `event:"reason"`
}

func (EventSlashed) EventType() string { return "slashed" }

type EventJobPosted struct {
	Job        uint64        `event:"job,index"`
	Client     types.Address `event:"client,index"`
	Kind       string        `event:"kind"`
	Mode       string        `event:"mode"`
	Model      types.Hash    `event:"model"`
	Stages     uint16        `event:"stages"`
	Redundancy uint16        `event:"redundancy"`
	MaxPrice   *uint256.Int  `event:"max_price"`
	Locked     *uint256.Int  `event:"locked"`
	BidEnd     uint64        `event:"bid_end"`
	RevealEnd  uint64        `event:"reveal_end"`
}

func (EventJobPosted) EventType() string { return "job_posted" }

type EventJobCancelled struct {
	Job    uint64       `event:"job,index"`
	Refund *uint256.Int `event:"refund"`
}

func (EventJobCancelled) EventType() string { return "job_cancelled" }

type EventBidCommitted struct {
	Job      uint64        `event:"job,index"`
	Stage    uint16        `event:"stage"`
	Provider types.Address `event:"provider,index"`
	Deposit  *uint256.Int  `event:"deposit"`
}

func (EventBidCommitted) EventType() string { return "bid_committed" }

type EventBidRevealed struct {
	Job      uint64        `event:"job,index"`
	Stage    uint16        `event:"stage"`
	Provider types.Address `event:"provider,index"`
	Price    *uint256.Int  `event:"price"`
}

func (EventBidRevealed) EventType() string { return "bid_revealed" }

// EventBidForfeited: a bid's deposit was burned at the close, because the
// bid was never revealed or its provider, leading the auction stage or
// claiming a pool task, was no longer eligible (Reason).
type EventBidForfeited struct {
	Job      uint64        `event:"job,index"`
	Stage    uint16        `event:"stage"`
	Provider types.Address `event:"provider,index"`
	Deposit  *uint256.Int  `event:"deposit"`
	Reason   string        `event:"reason"`
}

func (EventBidForfeited) EventType() string { return "bid_forfeited" }

// EventBidEvicted: a revealed bid was pushed out of its auction stage's
// leaders list (the Leaders best revealed bids) by a better one: it can
// no longer win, and its deposit was returned.
type EventBidEvicted struct {
	Job      uint64        `event:"job,index"`
	Stage    uint16        `event:"stage"`
	Provider types.Address `event:"provider,index"`
	Price    *uint256.Int  `event:"price"`
	Deposit  *uint256.Int  `event:"deposit"`
	Leaders  uint32        `event:"leaders"`
}

func (EventBidEvicted) EventType() string { return "bid_evicted" }

type EventJobRevealing struct {
	Job       uint64 `event:"job,index"`
	RevealEnd uint64 `event:"reveal_end"`
}

func (EventJobRevealing) EventType() string { return "job_revealing" }

// EventBidsRevealed: every one of the job's Bids sealed bids is revealed
// after its bid window, so the auction closes at the end of block CloseAt
// instead of RevealEnd (EventJobAwarded or EventJobExpired follows there).
type EventBidsRevealed struct {
	Job       uint64 `event:"job,index"`
	Bids      uint64 `event:"bids"`
	CloseAt   uint64 `event:"close_at"`
	RevealEnd uint64 `event:"reveal_end"`
}

func (EventBidsRevealed) EventType() string { return "bids_revealed" }

// EventJobAwarded is emitted per stage when the job starts: at the close,
// or at the claim that fills a pool job's last task (EventTaskFilled). Providers is the
// winners in rank order (a split job's: in replica-chain order, Providers[i]
// holds chain i); each is paid Price. A pipeline's stages after the
// first are awarded waiting, with both deadlines 0: EventStageOpened gives
// them when the stage before settles.
type EventJobAwarded struct {
	Job            uint64       `event:"job,index"`
	Stage          uint16       `event:"stage"`
	Providers      []string     `event:"providers"`
	Price          *uint256.Int `event:"price"`
	CommitDeadline uint64       `event:"commit_deadline"`
	RevealDeadline uint64       `event:"reveal_deadline"`
}

func (EventJobAwarded) EventType() string { return "job_awarded" }

// EventTaskFilled: before AppVersion 8, a pool task got its r-th eligible
// claim and was awarded at once to Providers (in claim order). No longer
// emitted: pool tasks are drawn at the close (pool.go); the type stays so
// that readers of older blocks decode them.
type EventTaskFilled struct {
	Job       uint64       `event:"job,index"`
	Stage     uint16       `event:"stage"`
	Providers []string     `event:"providers"`
	Price     *uint256.Int `event:"price"`
	Filled    uint16       `event:"filled"`
	Stages    uint16       `event:"stages"`
}

func (EventTaskFilled) EventType() string { return "task_filled" }

// EventStageOpened opens a waiting pipeline stage once the stage before it
// settled on a decided result (agreed, verdict or canary). Input is that
// result: the hash of the output the stage's providers compute on. Results
// are committed until CommitDeadline and revealed until RevealDeadline.
type EventStageOpened struct {
	Job            uint64     `event:"job,index"`
	Stage          uint16     `event:"stage"`
	Input          types.Hash `event:"input"`
	CommitDeadline uint64     `event:"commit_deadline"`
	RevealDeadline uint64     `event:"reveal_deadline"`
}

func (EventStageOpened) EventType() string { return "stage_opened" }

type EventJobExpired struct {
	Job    uint64       `event:"job,index"`
	Refund *uint256.Int `event:"refund"`
	Reason string       `event:"reason"`
}

func (EventJobExpired) EventType() string { return "job_expired" }

type EventResultCommitted struct {
	Job      uint64        `event:"job,index"`
	Stage    uint16        `event:"stage"`
	Provider types.Address `event:"provider,index"`
	// RevealsOpen is true when this was the last commitment awaited.
	RevealsOpen bool `event:"reveals_open"`
}

func (EventResultCommitted) EventType() string { return "result_committed" }

type EventResultRevealed struct {
	Job      uint64        `event:"job,index"`
	Stage    uint16        `event:"stage"`
	Provider types.Address `event:"provider,index"`
	Result   types.Hash    `event:"result"`
}

func (EventResultRevealed) EventType() string { return "result_revealed" }

// EventFinetuneRevealed: a fine-tune slot revealed the root of its
// checkpoint tree and its final hash (the proofs of leaves 0 and N held).
type EventFinetuneRevealed struct {
	Job      uint64        `event:"job,index"`
	Stage    uint16        `event:"stage"`
	Provider types.Address `event:"provider,index"`
	Root     types.Hash    `event:"root"`
	Final    types.Hash    `event:"final"`
}

func (EventFinetuneRevealed) EventType() string { return "finetune_revealed" }

type EventNoShow struct {
	Job      uint64        `event:"job,index"`
	Stage    uint16        `event:"stage"`
	Provider types.Address `event:"provider,index"`
	Missed   string        `event:"missed"` // "commit" or "reveal"
}

func (EventNoShow) EventType() string { return "no_show" }

type EventSlotReassigned struct {
	Job            uint64        `event:"job,index"`
	Stage          uint16        `event:"stage"`
	From           types.Address `event:"from"`
	To             types.Address `event:"to,index"`
	CommitDeadline uint64        `event:"commit_deadline"`
	RevealDeadline uint64        `event:"reveal_deadline"`
}

func (EventSlotReassigned) EventType() string { return "slot_reassigned" }

type EventDisputeOpened struct {
	Job      uint64   `event:"job,index"`
	Stage    uint16   `event:"stage"`
	Results  []string `event:"results"`
	SealBy   uint64   `event:"seal_by"`
	Deadline uint64   `event:"deadline"`
}

func (EventDisputeOpened) EventType() string { return "dispute_opened" }

// EventStageShort: at the close, stage Stage of job Job has Providers
// eligible winners, fewer than its Redundancy. Policy is what the client
// chose when posting (short.go): "audit" (the stage runs and its result
// is audited by the validators before it is paid) or "refund" (the stage
// is not awarded, its escrow goes back).
type EventStageShort struct {
	Job        uint64 `event:"job,index"`
	Stage      uint16 `event:"stage"`
	Providers  uint16 `event:"providers"`
	Redundancy uint16 `event:"redundancy"`
	Policy     string `event:"policy"`
}

func (EventStageShort) EventType() string { return "stage_short" }

// EventJobRebid: the close of a ShortRebid job found Stages short of r
// eligible winners, so the job takes bids (pool: claims) again until
// BidEnd and reveals until RevealEnd, and closes then (short.go).
// Provider agents treat it as a new posting.
type EventJobRebid struct {
	Job       uint64   `event:"job,index"`
	Stages    []string `event:"stages"`
	BidEnd    uint64   `event:"bid_end"`
	RevealEnd uint64   `event:"reveal_end"`
}

func (EventJobRebid) EventType() string { return "job_rebid" }

// EventAuditOpened: the validators are asked to re-execute stage Stage of
// job Job and vote on Result before it is paid (short.go). Reason is why
// (verifier.AuditShort: Agreeing live slots revealed it, fewer than
// Redundancy). The vote itself is announced by the EventDisputeOpened of
// the same transaction.
type EventAuditOpened struct {
	Job        uint64     `event:"job,index"`
	Stage      uint16     `event:"stage"`
	Reason     string     `event:"reason"`
	Result     types.Hash `event:"result"`
	Agreeing   uint16     `event:"agreeing"`
	Redundancy uint16     `event:"redundancy"`
}

func (EventAuditOpened) EventType() string { return "audit_opened" }

type EventDisputeVoted struct {
	Job       uint64        `event:"job,index"`
	Stage     uint16        `event:"stage"`
	Validator types.Address `event:"validator,index"`
	Result    types.Hash    `event:"result"`
	Power     uint64        `event:"power"`
}

func (EventDisputeVoted) EventType() string { return "dispute_voted" }

// EventTaskSettled closes a stage: Outcome is "agreed" (all revealed
// results equal), "verdict" (a dispute decided), "unresolved" (a dispute
// without a 2/3 vote: refunded), "no_results" (refunded), "no_bids"
// (nobody won the stage), "bad_input" (validators found the client's
// input missing or wrong: the client pays the reservations) or "no_input"
// (a pipeline stage whose previous stage settled without a decided
// result, or an undecided input check: refunded).
type EventTaskSettled struct {
	Job     uint64       `event:"job,index"`
	Stage   uint16       `event:"stage"`
	Outcome string       `event:"outcome"`
	Result  types.Hash   `event:"result"`
	Paid    *uint256.Int `event:"paid"`
	Refund  *uint256.Int `event:"refund"`
}

func (EventTaskSettled) EventType() string { return "task_settled" }

// EventProviderPaid: escrow released Amount of job Job (stage Stage) to
// Provider. It is emitted wherever the market pays a provider, so that a
// provider's earnings are one indexed query
// (provider_paid.provider='0x…', over tx_search and block_search: most
// payments happen in FinalizeBlock). Via says why:
//
//   - "job": a decided result (agreed or verdict) or an unverified split
//     slot, paid the stage's clearing price;
//   - "reservation": a bad_input stage's reservation, or a session lane's
//     reservation (S21) paid at the award.
//
// A session's voucher redemptions are not repeated here: session_redeemed
// (provider indexed, paid) already names the provider and the amount, and
// a reader summing both events must not count a redemption twice. So a
// job's Paid is the sum of its provider_paid amounts plus, for a session,
// of its session_redeemed paid amounts. Slashed and refunded slots get no
// event.
type EventProviderPaid struct {
	Provider types.Address `event:"provider,index"`
	Job      uint64        `event:"job,index"`
	Stage    uint16        `event:"stage"`
	Amount   *uint256.Int  `event:"amount"`
	Via      string        `event:"via"`
}

func (EventProviderPaid) EventType() string { return "provider_paid" }

// Values of EventProviderPaid.Via.
const (
	PaidViaJob         = "job"
	PaidViaReservation = "reservation"
)

type EventJobCompleted struct {
	Job          uint64       `event:"job,index"`
	Paid         *uint256.Int `event:"paid"`
	Refunded     *uint256.Int `event:"refunded"`
	Compensated  *uint256.Int `event:"compensated"`
	ValidatorFee *uint256.Int `event:"validator_fee"`
}

func (EventJobCompleted) EventType() string { return "job_completed" }

type EventCanaryRevealed struct {
	Job       uint64        `event:"job,index"`
	Stage     uint16        `event:"stage"`
	Validator types.Address `event:"validator,index"`
	Answer    types.Hash    `event:"answer"`
}

func (EventCanaryRevealed) EventType() string { return "canary_revealed" }

// EventInputReported: an assigned provider could not get or use its input.
type EventInputReported struct {
	Job      uint64        `event:"job,index"`
	Stage    uint16        `event:"stage"`
	Provider types.Address `event:"provider,index"`
	Reason   string        `event:"reason"`
}

func (EventInputReported) EventType() string { return "input_reported" }

// EventInputCheckOpened: validators fetch the task's input and vote
// (sealed until SealBy, opened until Deadline).
type EventInputCheckOpened struct {
	Job       uint64   `event:"job,index"`
	Stage     uint16   `event:"stage"`
	Reporters []string `event:"reporters"`
	SealBy    uint64   `event:"seal_by"`
	Deadline  uint64   `event:"deadline"`
}

func (EventInputCheckOpened) EventType() string { return "input_check_opened" }

// EventInputAvailable: the validators found the input available; they
// serve it, and the reporters have a fresh window.
type EventInputAvailable struct {
	Job            uint64 `event:"job,index"`
	Stage          uint16 `event:"stage"`
	CommitDeadline uint64 `event:"commit_deadline"`
	RevealDeadline uint64 `event:"reveal_deadline"`
}

func (EventInputAvailable) EventType() string { return "input_available" }

// EventVoteSealed: a validator sealed its vote.
type EventVoteSealed struct {
	Job       uint64        `event:"job,index"`
	Stage     uint16        `event:"stage"`
	Validator types.Address `event:"validator,index"`
}

func (EventVoteSealed) EventType() string { return "vote_sealed" }

// EventVotersPaid: a stage's share of the validator fee went to the
// validators that voted with the outcome.
type EventVotersPaid struct {
	Job    uint64       `event:"job,index"`
	Stage  uint16       `event:"stage"`
	Amount *uint256.Int `event:"amount"`
	Voters uint64       `event:"voters"`
}

func (EventVotersPaid) EventType() string { return "voters_paid" }

// EventDeadlinesDeferred: this block ran Work units of deadlines, its
// bound (max_deadline_work); the rest run in the next blocks, oldest first.
type EventDeadlinesDeferred struct {
	Height uint64 `event:"height"`
	Work   uint64 `event:"work"`
}

func (EventDeadlinesDeferred) EventType() string { return "deadlines_deferred" }

// EventTaskConfirming: every live slot revealed the same result; the task
// settles on it at the end of block SettlesAt unless a canary claim
// contests it.
type EventTaskConfirming struct {
	Job       uint64     `event:"job,index"`
	Stage     uint16     `event:"stage"`
	Result    types.Hash `event:"result"`
	SettlesAt uint64     `event:"settles_at"`
}

func (EventTaskConfirming) EventType() string { return "task_confirming" }

// EventTranscriptRevealed: a split slot (replica Chain of Stage) opened its
// transcript commitment: Steps frames, the running hashes of what it
// received (Hin) and sent (Hout).
type EventTranscriptRevealed struct {
	Job      uint64        `event:"job,index"`
	Stage    uint16        `event:"stage"`
	Chain    uint16        `event:"chain"`
	Provider types.Address `event:"provider,index"`
	Steps    uint32        `event:"steps"`
	Hin      types.Hash    `event:"hin"`
	Hout     types.Hash    `event:"hout"`
}

func (EventTranscriptRevealed) EventType() string { return "transcript_revealed" }

// EventSplitInputsPending: at a split job's reveal deadline, the inputs of
// Slots ("stage/chain") differ from their upstream's revealed output (or,
// at stage 0, between chains) or their upstream revealed nothing: each
// must be proven (MsgProveHandoff) by height ProveBy, or it is judged
// then (input_lie or input_unproven).
type EventSplitInputsPending struct {
	Job     uint64   `event:"job,index"`
	Slots   []string `event:"slots"`
	ProveBy uint64   `event:"prove_by"`
}

func (EventSplitInputsPending) EventType() string { return "split_inputs_pending" }

// EventHandoffProven: a split slot proved its input with Signer's hand-off
// signature (its upstream's, or the client's at stage 0).
type EventHandoffProven struct {
	Job      uint64        `event:"job,index"`
	Stage    uint16        `event:"stage"`
	Chain    uint16        `event:"chain"`
	Provider types.Address `event:"provider,index"`
	Steps    uint32        `event:"steps"`
	Hin      types.Hash    `event:"hin"`
	Signer   types.Address `event:"signer"`
}

func (EventHandoffProven) EventType() string { return "handoff_proven" }

// EventHandoffEquivocation: Provider, chain Chain of Stage, signed a
// hand-off transcript (SignedSteps, Signed) other than the output it
// revealed (RevealedSteps, Revealed): it is slashed and tombstoned with no
// vote (EventSplitSlotSettled, outcome equivocated).
type EventHandoffEquivocation struct {
	Job           uint64        `event:"job,index"`
	Stage         uint16        `event:"stage"`
	Chain         uint16        `event:"chain"`
	Provider      types.Address `event:"provider,index"`
	SignedSteps   uint32        `event:"signed_steps"`
	Signed        types.Hash    `event:"signed"`
	RevealedSteps uint32        `event:"revealed_steps"`
	Revealed      types.Hash    `event:"revealed"`
}

func (EventHandoffEquivocation) EventType() string { return "handoff_equivocation" }

// EventClientEquivocated: the client signed Inputs different stage-0
// inputs for the chains of a split job (P8): no stage-0 output is
// compared across them, and nobody is slashed for the difference.
type EventClientEquivocated struct {
	Job    uint64 `event:"job,index"`
	Inputs uint64 `event:"inputs"`
}

func (EventClientEquivocated) EventType() string { return "client_equivocated" }

// EventSplitDiverged: Stage is the first stage of a split job whose slots
// have the same input (Steps frames, running hash Hin) and different
// outputs: it is disputed (EventDisputeOpened); validators re-execute the
// stage's slice on that input transcript and vote for its Hout.
type EventSplitDiverged struct {
	Job   uint64     `event:"job,index"`
	Stage uint16     `event:"stage"`
	Steps uint32     `event:"steps"`
	Hin   types.Hash `event:"hin"`
}

func (EventSplitDiverged) EventType() string { return "split_diverged" }

// EventSplitSlotSettled: a split slot settled on its own, outside its
// stage's comparison. Outcome is unverified, downstream_unverified (paid
// Paid), input_lie, equivocated (slashed, unpaid), input_unproven or
// not_compared (unpaid); see the Split* constants.
type EventSplitSlotSettled struct {
	Job      uint64        `event:"job,index"`
	Stage    uint16        `event:"stage"`
	Chain    uint16        `event:"chain"`
	Provider types.Address `event:"provider,index"`
	Outcome  string        `event:"outcome"`
	Paid     *uint256.Int  `event:"paid"`
}

func (EventSplitSlotSettled) EventType() string { return "split_slot_settled" }

// EventSplitStageReplaced: on the client's order (MsgReplaceStage), chain
// Chain of Stage went from From, which stopped before committing (a
// no-show: slashed no_show_slash_bps, burned, jailed), to To, the stage's
// next eligible backup, at the same price. To replays the slot's input
// transcript from its upstream (the client, at stage 0) and continues the
// generation; its neighbours in the chain send to and take from To now.
// Every stage of the job commits by CommitDeadline and reveals by
// RevealDeadline. Replacements counts the job's replacements so far (at
// most MaxSplitReplacements).
type EventSplitStageReplaced struct {
	Job            uint64        `event:"job,index"`
	Stage          uint16        `event:"stage"`
	Chain          uint16        `event:"chain"`
	From           types.Address `event:"from,index"`
	To             types.Address `event:"to,index"`
	CommitDeadline uint64        `event:"commit_deadline"`
	RevealDeadline uint64        `event:"reveal_deadline"`
	Replacements   uint64        `event:"replacements"`
}

func (EventSplitStageReplaced) EventType() string { return "split_stage_replaced" }

// EventJobPruned: a final job's records left the state (prune.go), at
// Height, retain_blocks after its end. Its history is in the events before.
type EventJobPruned struct {
	Job    uint64 `event:"job,index"`
	State  string `event:"state"`
	Height uint64 `event:"height"`
}

func (EventJobPruned) EventType() string { return "job_pruned" }
