package market

import (
	"crypto/sha256"
	"fmt"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/types"
)

// Provider is a registered provider's public record. Its stake is its
// bonded stake in escrow; its reputation lives in the verifier.
type Provider struct {
	PeerID     string   // libp2p peer id: clients talk only to this peer
	Addrs      []string // multiaddrs
	Attributes []string // hierarchical, see attrs.go
	Runtimes   []string // e.g. llama.cpp, ckks
	Models     []types.Hash
	// Class is the determinism class: replicas in one class must produce
	// identical outputs (llama.cpp build, backend, threads, batch, sampler).
	Class string
	// Jailed providers cannot bid until they unjail at or after JailedUntil;
	// tombstoned ones never again.
	Jailed      bool
	JailedUntil uint64
	Tombstoned  bool
	Registered  uint64
	// Moniker is the provider's display name (ProviderInfo.Moniker).
	Moniker string `rlp:"optional"`
	// TrainClass is the training determinism class (ProviderInfo.TrainClass).
	TrainClass string `rlp:"optional"`
}

// JobState is where a job is.
type JobState uint8

const (
	JobBidding   JobState = 1 // taking sealed bids (or pool claims)
	JobRevealing JobState = 2 // taking bid reveals
	JobRunning   JobState = 3 // awarded: stages execute and are verified
	JobCompleted JobState = 4 // every stage settled; escrow emptied
	JobExpired   JobState = 5 // no eligible bids: refunded
	JobCancelled JobState = 6 // cancelled by the client before the award
)

var jobStateNames = []string{"", "bidding", "revealing", "running", "completed", "expired", "cancelled"}

func (s JobState) String() string {
	if int(s) < len(jobStateNames) && s != 0 {
		return jobStateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// ParseJobState is the inverse of String.
func ParseJobState(s string) (JobState, error) {
	for i, n := range jobStateNames {
		if n != "" && n == s {
			return JobState(i), nil
		}
	}
	return 0, fmt.Errorf("unknown job state %q: want bidding, revealing, running, completed, expired or cancelled", s)
}

// Open reports whether the job still holds escrow.
func (s JobState) Open() bool { return s == JobBidding || s == JobRevealing || s == JobRunning }

// Job kinds and modes.
const (
	KindInference = "inference"
	KindPipeline  = "pipeline"
	// KindSplit is split inference: one LLM cut by layers into Stages
	// slices, each stage run by Redundancy replica chains (split.go).
	KindSplit = "split"
	// KindSession is a session lease: one auction awards r providers a lane
	// each for SessionTerms.Blocks blocks; requests are paid by vouchers
	// off chain (session.go, package session).
	KindSession = "session"
	// KindFinetune: see finetune.go.
	ModeAuction = "auction"
	ModePool    = "pool"
)

// Requirements restrict who may bid.
type Requirements struct {
	MinStake      *uint256.Int // on top of the provider minimum
	MinReputation uint64       // verifier score, 0..1000
	Attributes    []string     // requirement patterns, all must match
	Runtime       string       // the provider must offer it, if set
	Class         string       // the provider's determinism class must equal it, if set
}

// Windows are a job's phases in blocks.
type Windows struct {
	Bid     uint64 // sealed bids (pool mode: claims)
	Reveal  uint64 // bid reveals (pool mode: more claims)
	Execute uint64 // from the award to the last result commitment
	Verify  uint64 // from the commit deadline to the last result reveal
}

// Job is a posted job.
type Job struct {
	ID         uint64
	Client     types.Address
	Kind       string
	Mode       string
	Model      types.Hash
	ModelSize  uint64
	Stages     uint16
	Redundancy uint16
	// MaxPrice is the cap per stage replica (pool mode: the fixed reward).
	MaxPrice     *uint256.Int
	ValidatorFee *uint256.Int
	Req          Requirements
	Input        types.Hash
	Windows      Windows
	// Seal is 32 bytes every job carries: random for a client's job,
	// verifier.CanarySeal(validator, stage hashes) for a validator's canary.
	// Nothing tells the two apart until the validator reveals it
	// (MsgRevealCanary), which it does only to contest a wrong result.
	Seal types.Hash

	State     JobState
	Posted    uint64
	BidEnd    uint64 // last height of the bid window
	RevealEnd uint64 // last height of the reveal window; the close runs at its end at the latest (Opened)
	Expiry    uint64 // the last height any stage may still be executing
	// Bids counts sealed bids (or claims) per stage, bounding the book.
	Bids []uint32
	// Prices are the clearing prices per stage, set at the award (zero for
	// a stage nobody won).
	Prices []*uint256.Int
	// Settled counts settled stages; the job completes when all are.
	Settled uint16
	// Verified counts stages settled on a verified result some provider
	// delivered and was paid for: r agreeing results, a vote's verdict
	// (a dispute, an audit or a canary claim) or fine-tune games won. A
	// stage with fewer than r agreeing results counts only once an audit
	// upheld it (short.go).
	Verified uint16
	// Paid, Refunded and Slashed sum what went to providers, back to the
	// client, and to the client as slash compensation.
	Paid, Refunded, Compensated *uint256.Int
	FeePaid                     bool
	// MaxTokens bounds an inference job's generation (0 for other kinds):
	// providers price by it and verification refuses longer outputs.
	MaxTokens uint64 `rlp:"optional"`
	// PromptTokens is the prompt's length in the model's tokens, declared
	// by the client (inference jobs): providers check PromptTokens +
	// MaxTokens against their context before bidding, and a longer prompt
	// is the client's fault (an input report the validators uphold).
	PromptTokens uint64 `rlp:"optional"`
	// CanaryBy is the validator that revealed this job as its canary (zero
	// until then). Slash compensation of a canary is burned, never paid to
	// its poster.
	CanaryBy types.Address `rlp:"optional"`
	// FeeSpent is the part of ValidatorFee already paid out: a stage
	// settled by agreement pays its share (fee / stages) to the fee pool, a
	// stage decided by a vote pays it to the validators who voted with the
	// outcome. What is left returns to the client at completion.
	FeeSpent *uint256.Int `rlp:"optional"`
	// Slices are a split job's slice hashes, one per stage (empty for
	// other kinds): a provider is eligible for stage s when it advertises
	// Slices[s] or the whole Model.
	Slices []types.Hash `rlp:"optional"`
	// Filled counted the tasks of a pool job awarded at their r-th
	// eligible claim before AppVersion 8. Pool tasks are now drawn at the
	// close (pool.go), so it stays 0; the field keeps the encoding.
	Filled uint16 `rlp:"optional"`
	// Session holds a session lease's terms (session jobs only).
	Session *SessionTerms `rlp:"nil,optional"`
	// Finetune holds a fine-tune job's terms (fine-tune jobs only).
	Finetune *FinetuneTerms `rlp:"nil,optional"`
	// TrainSeed is a fine-tune job's data-order seed, set at the award
	// (FinetuneSeed).
	TrainSeed uint64 `rlp:"optional"`
	// Opened counts the sealed bids revealed so far, every stage together
	// (auctions only; a pool's claims are revealed when made). The reveal
	// that brings it to the number of sealed bids, which no longer grows
	// once the bid window is over, moves the close to the end of its block
	// (RevealBid, closeEarly): the auction closes at RevealEnd only while a
	// sealed bid is still unrevealed.
	Opened uint32 `rlp:"optional"`
	// TieSeed is the hash of the block that carried the auction's first
	// reveal: it seeds the last tie-break of the ranking (TieHash). Every
	// bid was sealed before it was known.
	TieSeed []byte `rlp:"optional"`
	// Short is what the client chose, when posting, for a stage left with
	// fewer than r eligible providers (ShortAudit or ShortRefund; short.go).
	Short string `rlp:"optional"`
	// Rebids counts the extra bid windows a ShortRebid job took (at most
	// one: short.go).
	Rebids uint8 `rlp:"optional"`
}

// SealedBids is the number of sealed bids (pool mode: claims) on the job,
// every stage together.
func (j *Job) SealedBids() uint64 {
	var n uint64
	for _, c := range j.Bids {
		n += uint64(c)
	}
	return n
}

// AllRevealed reports whether every sealed bid of an auction is revealed
// and no more can come (the bid window is over at height h): the close
// then has nothing left to wait for. A job with no bids at all counts.
func (j *Job) AllRevealed(h uint64) bool {
	return j.Mode == ModeAuction && h >= j.BidEnd && uint64(j.Opened) == j.SealedBids()
}

// feeSpent is FeeSpent, zero when absent.
func (j *Job) feeSpent() *uint256.Int {
	if j.FeeSpent == nil {
		return new(uint256.Int)
	}
	return j.FeeSpent
}

// stageFee is one stage's share of the validator fee.
func (j *Job) stageFee() *uint256.Int {
	return new(uint256.Int).Div(j.ValidatorFee, uint256.NewInt(uint64(j.Stages)))
}

// MaxPayout is stages × r × max price, what posting locks besides the fee.
func (j *Job) MaxPayout() *uint256.Int {
	n := uint256.NewInt(uint64(j.Stages) * uint64(j.Redundancy))
	if j.Session != nil {
		return n.Mul(n, j.Session.Budget) // a session locks a budget per lane
	}
	return n.Mul(n, j.MaxPrice)
}

// Bid is a sealed bid (Revealed false) or an opened one. In pool mode a
// claim is a bid revealed at the cap.
type Bid struct {
	Commitment types.Hash
	Deposit    *uint256.Int
	Revealed   bool
	Price      *uint256.Int
	// Seq orders bids by arrival (pool mode awards first come first).
	Seq uint64
}

// BidCommitment is sha256("ogpu/bid/v1" | job | stage | price | salt |
// provider): what a sealed bid commits to.
func BidCommitment(job uint64, stage uint16, price *uint256.Int, salt types.Hash, provider types.Address) types.Hash {
	h := sha256.New()
	h.Write([]byte("ogpu/bid/v1"))
	h.Write(be64(job))
	h.Write(be16(stage))
	p := price.Bytes32()
	h.Write(p[:])
	h.Write(salt[:])
	h.Write(provider[:])
	return types.Hash(h.Sum(nil))
}
