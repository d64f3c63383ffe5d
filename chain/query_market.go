package chain

import (
	"encoding/binary"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/finetune"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/session"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// Market query paths. Answers are JSON.
const (
	QueryJob        = "/job/"            // + id
	QueryJobs       = "/jobs"            // all; /jobs/state/NAME, /jobs/client/ADDR, /jobs/provider/ADDR
	QueryBids       = "/bids/"           // + job id
	QueryProvider   = "/provider/"       // + address
	QueryProviders  = "/providers"       // all registered providers
	QueryMatch      = "/providers/match" // data: JSON Requirements; providers eligible for them
	QueryWhyNoBids  = "/whynobids/"      // + job id: every provider and why it can or cannot bid
	QueryEscrow     = "/escrow/"         // + job id
	QueryStake      = "/stake/"          // + address
	QueryReputation = "/reputation/"     // + address
)

// MaxListed bounds list answers.
const MaxListed = 1000

// MaxScanned bounds the provider records one query examines (/providers,
// /providers/match, /whynobids): registering a provider costs nothing but a
// fee, so a query must not walk every record there is (security review
// L4). A caller pages on with "?after=ADDR", the last address examined
// (WhyNoBidsView.Next; for lists, the last provider returned).
const MaxScanned = 500

// TaskView is one stage of a running or finished job.
type TaskView struct {
	Stage           uint16          `json:"stage"`
	Status          string          `json:"status"`
	Price           *uint256.Int    `json:"price"`
	CommitDeadline  uint64          `json:"commit_deadline"`
	RevealDeadline  uint64          `json:"reveal_deadline"`
	DisputeDeadline uint64          `json:"dispute_deadline,omitempty"`
	Verdict         types.Hash      `json:"verdict"`
	Slots           []SlotView      `json:"slots"`
	Backups         []types.Address `json:"backups"`
	Votes           []VoteView      `json:"votes,omitempty"`
	// Audit is why the task's vote is an audit ("short": fewer than r
	// agreeing results), empty for a dispute or no vote. Outcome is how a
	// settled task settled, and Verified whether it settled on a verified
	// result some provider delivered (market.VerifiedOutcome, and a slot
	// revealed the verdict: a verdict that rejected every result is not).
	Audit    string `json:"audit,omitempty"`
	Outcome  string `json:"outcome,omitempty"`
	Verified bool   `json:"verified"`
	// Games are a fine-tune task's step-bisection games (its bracket's
	// matches), once its results differed.
	Games []*finetune.Game `json:"games,omitempty"`
}

// SlotView is an assigned replica.
type SlotView struct {
	Provider  types.Address `json:"provider"`
	Committed bool          `json:"committed"`
	Revealed  bool          `json:"revealed"`
	Result    *types.Hash   `json:"result,omitempty"`
	NoShow    bool          `json:"no_show"`
	// InputReport is why the provider reported its input ("" if it did
	// not); Checked: its report was decided (the input is available).
	InputReport string `json:"input_report,omitempty"`
	Checked     bool   `json:"checked,omitempty"`
	// Split jobs (slot i is replica chain i): the revealed input running
	// hash and frame count (Result is the output's), whether the input was
	// proven by a hand-off signature, and whether the slot settled on its
	// own outside the stage's comparison (see the split_slot_settled event).
	Chain   *uint16     `json:"chain,omitempty"`
	Hin     *types.Hash `json:"hin,omitempty"`
	Steps   uint32      `json:"steps,omitempty"`
	Proven  bool        `json:"proven,omitempty"`
	Settled bool        `json:"settled,omitempty"`
	// Replaced: the providers that held this split slot before Provider,
	// oldest first, each replaced on the client's order (see the
	// split_stage_replaced event).
	Replaced []types.Address `json:"replaced,omitempty"`
	// Fine-tune jobs: the revealed checkpoint root and final hash (the
	// trained tensors' hash after the last step).
	Root  *types.Hash `json:"root,omitempty"`
	Final *types.Hash `json:"final,omitempty"`
}

// VoteView is a validator's dispute vote.
type VoteView struct {
	Validator types.Address `json:"validator"`
	Result    types.Hash    `json:"result"`
	Power     int64         `json:"power"`
}

// JobView is the answer to /job/ID.
type JobView struct {
	*market.Job
	StateName string       `json:"state_name"`
	Locked    *uint256.Int `json:"locked"`
	// Phase says in words where the job is and what happens next.
	Phase string     `json:"phase"`
	Tasks []TaskView `json:"tasks"`
}

// BidView is a bid in /bids/ID.
type BidView struct {
	Stage      uint16        `json:"stage"`
	Provider   types.Address `json:"provider"`
	Commitment types.Hash    `json:"commitment"`
	Deposit    *uint256.Int  `json:"deposit"`
	Revealed   bool          `json:"revealed"`
	Price      *uint256.Int  `json:"price,omitempty"`
}

// ProviderView is the answer to /provider/ADDR.
type ProviderView struct {
	Address types.Address `json:"address"`
	*market.Provider
	Bonded     *uint256.Int        `json:"bonded"`
	Unbonding  []escrow.Unbonding  `json:"unbonding"`
	Reputation verifier.Reputation `json:"reputation"`
	Score      uint64              `json:"score"`
}

// EligibilityView is one provider's answer in /whynobids/ID.
type EligibilityView struct {
	Provider types.Address `json:"provider"`
	Eligible bool          `json:"eligible"`
	Reason   string        `json:"reason,omitempty"`
	Bid      bool          `json:"bid"`
}

// WhyNoBidsView is the answer to /whynobids/ID.
type WhyNoBidsView struct {
	Job       uint64            `json:"job"`
	State     string            `json:"state"`
	Bids      uint32            `json:"bids"`
	Summary   string            `json:"summary"`
	Providers []EligibilityView `json:"providers"`
	// Next, when set, is where the next page starts (?after=Next): more
	// providers are registered than one query examines.
	Next string `json:"next,omitempty"`
}

// EscrowView is the answer to /escrow/ID.
type EscrowView struct {
	Job          uint64       `json:"job"`
	State        string       `json:"state"`
	Locked       *uint256.Int `json:"locked"`
	MaxPayout    *uint256.Int `json:"max_payout"`
	ValidatorFee *uint256.Int `json:"validator_fee"`
	Paid         *uint256.Int `json:"paid"`
	Refunded     *uint256.Int `json:"refunded"`
	Compensated  *uint256.Int `json:"compensated"`
}

// StakeView is the answer to /stake/ADDR.
type StakeView struct {
	Address   types.Address      `json:"address"`
	Bonded    *uint256.Int       `json:"bonded"`
	Unbonding []escrow.Unbonding `json:"unbonding"`
	Validator *ValidatorView     `json:"validator,omitempty"`
}

// ReputationView is the answer to /reputation/ADDR.
type ReputationView struct {
	Address types.Address `json:"address"`
	verifier.Reputation
	Score uint64 `json:"score"`
}

func parseID(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, types.ErrBadQuery.Wrapf("job id %q: want a number", s)
	}
	return id, nil
}

func getJob(r store.KV, s string) (*market.Job, error) {
	id, err := parseID(s)
	if err != nil {
		return nil, err
	}
	j, ok := market.GetJob(r, id)
	if !ok && market.Pruned(r, id) {
		return nil, types.ErrNotFound.Wrapf("%s", market.PrunedError(id, getParams(r).Market.RetainBlocks))
	}
	if !ok {
		return nil, types.ErrNotFound.Wrapf("job %d does not exist", id)
	}
	return j, nil
}

func parseAddr(s string) (types.Address, error) {
	a, err := types.ParseAddress(s)
	if err != nil {
		return a, types.ErrBadQuery.Wrapf("%v", err)
	}
	return a, nil
}

// phase describes where a job is at height h (the last committed block).
func phase(j *market.Job, h uint64) string {
	if j.Mode == market.ModePool && (j.State == market.JobBidding || j.State == market.JobRevealing) {
		return "taking claims until height " + strconv.FormatUint(j.RevealEnd, 10) + "; then each task goes to " + strconv.FormatUint(uint64(j.Redundancy), 10) +
			" of its eligible claimants drawn from the beacon value of that height (arriving first wins nothing); the job runs once the draw is made"
	}
	switch j.State {
	case market.JobBidding:
		return "taking sealed bids until height " + strconv.FormatUint(j.BidEnd, 10) + ", reveals until " + strconv.FormatUint(j.RevealEnd, 10) + "; the award runs at the end of the block in which the last sealed bid is revealed, at the latest of block " + strconv.FormatUint(j.RevealEnd, 10)
	case market.JobRevealing:
		return "taking bid reveals until height " + strconv.FormatUint(j.RevealEnd, 10) + " (" + strconv.FormatUint(uint64(j.Opened), 10) + " of " + strconv.FormatUint(j.SealedBids(), 10) +
			" sealed bids revealed); the award runs at the end of the block in which the last is revealed, at the latest of block " + strconv.FormatUint(j.RevealEnd, 10)
	case market.JobRunning:
		return "awarded: providers execute, commit and reveal results; " + strconv.FormatUint(uint64(j.Settled), 10) + " of " + strconv.FormatUint(uint64(j.Stages), 10) + " stages settled"
	case market.JobCompleted:
		return "completed: paid " + types.FormatAmount(j.Paid) + ", refunded " + types.FormatAmount(j.Refunded) + " to the client"
	case market.JobExpired:
		return "expired without an eligible bid: the client was refunded (ogpu query why-no-bids " + strconv.FormatUint(j.ID, 10) + ")"
	case market.JobCancelled:
		return "cancelled by the client and refunded"
	}
	return j.State.String()
}

// sessionPhase is a running session job's phase: its lanes serve, then
// take the last redemptions, then settle (the session query has the rest).
func sessionPhase(s *session.Session, h uint64) string {
	due := strconv.FormatUint(s.Due(), 10)
	switch {
	case s.Closed || h > s.Expiry:
		return "session in its grace window: providers redeem their last vouchers; what no voucher claimed is refunded at the end of block " + due
	default:
		return "session open: " + strconv.Itoa(len(s.Lanes)) + " lanes serve requests until height " + strconv.FormatUint(s.Expiry, 10) +
			", paid by vouchers; redemptions until " + due + " (ogpu query session " + strconv.FormatUint(s.ID, 10) + ")"
	}
}

func jobView(r store.KV, j *market.Job, h uint64) JobView {
	v := JobView{Job: j, StateName: j.State.String(), Locked: escrow.NewKeeper(r).Locked(j.ID), Phase: phase(j, h), Tasks: []TaskView{}}
	if j.Kind == market.KindSession && j.State == market.JobRunning {
		if s, ok := session.Get(r, j.ID); ok {
			v.Phase = sessionPhase(s, h)
		}
	}
	vk := verifier.NewKeeper(r)
	ek := escrow.NewKeeper(r)
	for s := uint16(0); s < j.Stages; s++ {
		t, ok := vk.GetTask(j.ID, s)
		if !ok {
			continue
		}
		tv := TaskView{Stage: s, Status: t.Status.String(), Price: j.Prices[s], CommitDeadline: t.CommitDeadline,
			RevealDeadline: t.RevealDeadline, DisputeDeadline: t.DisputeDeadline, Verdict: t.Verdict, Backups: t.Backups,
			Audit: t.Audit, Outcome: t.Outcome, Verified: taskVerified(t)}
		for _, sl := range t.Slots {
			sv := SlotView{Provider: sl.Provider, Committed: sl.Committed, Revealed: sl.Revealed, NoShow: sl.NoShow, Checked: sl.Checked}
			if sl.InputReport != 0 {
				sv.InputReport = verifier.InputReasonName(sl.InputReport)
			}
			if sl.Revealed {
				res := sl.Result
				sv.Result = &res
			}
			if c, ok := market.GetFinetuneClaim(r, j.ID, s, sl.Result); ok && sl.Revealed && j.Kind == market.KindFinetune {
				sv.Root, sv.Final = &c.Root, &c.Final
			}
			if j.Kind == market.KindSplit {
				c := uint16(len(tv.Slots))
				sv.Chain, sv.Steps, sv.Proven, sv.Settled, sv.Replaced = &c, sl.Steps, sl.Proven, sl.Settled, sl.Replaced
				if sl.Revealed {
					hin := sl.Hin
					sv.Hin = &hin
				}
			}
			tv.Slots = append(tv.Slots, sv)
		}
		if j.Kind == market.KindFinetune {
			tv.Games = finetune.Games(r, j.ID, s)
		}
		for _, vote := range vk.Votes(j.ID, s) {
			var p int64
			if val, ok := ek.GetValidator(vote.Validator); ok {
				p = ek.ReportedPower(val.PubKey)
			}
			tv.Votes = append(tv.Votes, VoteView{Validator: vote.Validator, Result: vote.Result, Power: p})
		}
		v.Tasks = append(v.Tasks, tv)
	}
	return v
}

func providerView(r store.KV, addr types.Address, p *market.Provider) ProviderView {
	ek := escrow.NewKeeper(r)
	rep := verifier.NewKeeper(r).GetReputation(addr)
	return ProviderView{Address: addr, Provider: p, Bonded: ek.Bonded(addr), Unbonding: ek.Unbondings(addr), Reputation: rep, Score: rep.Score()}
}

// iterateProviders calls fn for at most MaxScanned provider records after
// the cursor (nil: from the first), in address order, and returns the last
// address examined if it stopped on the bound (more may follow).
func iterateProviders(r store.KV, after *types.Address, fn func(addr types.Address, p *market.Provider) bool) (next *types.Address) {
	start := market.ProviderKey(types.Address{})[:1]
	if after != nil {
		start = append(market.ProviderKey(*after), 0)
	}
	end := []byte{start[0] + 1}
	scanned := 0
	r.Iterate(start, end, func(key, _ []byte) bool {
		addr := types.BytesToAddress(key[1:])
		p, _ := market.GetProvider(r, addr)
		if fn(addr, p) {
			return true
		}
		if scanned++; scanned >= MaxScanned {
			next = &addr
			return true
		}
		return false
	})
	return next
}

// pageCursor splits "PATH?after=0xADDR" into the path and the cursor.
func pageCursor(path string) (string, *types.Address, error) {
	base, q, ok := strings.Cut(path, "?")
	if !ok {
		return path, nil, nil
	}
	v, ok := strings.CutPrefix(q, "after=")
	if !ok {
		return "", nil, types.ErrBadQuery.Wrapf("%q: the only query parameter is after=ADDRESS", path)
	}
	a, err := parseAddr(v)
	if err != nil {
		return "", nil, err
	}
	return base, &a, nil
}

// jobIDs lists job ids under an index prefix whose keys end in the id.
func jobIDs(r store.KV, prefix []byte) []uint64 {
	ids := []uint64{}
	store.IteratePrefix(r, prefix, func(key, _ []byte) bool {
		ids = append(ids, binary.BigEndian.Uint64(key[len(key)-8:]))
		return len(ids) >= MaxListed
	})
	return ids
}

// marketQuery answers the market paths; ok is false for other paths.
func marketQuery(snap *store.Snapshot, path string, data []byte) (any, bool, error) {
	h := uint64(snap.Version())
	var after *types.Address
	if strings.HasPrefix(path, QueryProviders) || strings.HasPrefix(path, QueryWhyNoBids) {
		var err error
		if path, after, err = pageCursor(path); err != nil {
			return nil, true, err
		}
	}
	switch {
	case strings.HasPrefix(path, QueryJob):
		j, err := getJob(snap, strings.TrimPrefix(path, QueryJob))
		if err != nil {
			return nil, true, err
		}
		return jobView(snap, j, h), true, nil
	case path == QueryJobs || strings.HasPrefix(path, QueryJobs+"/"):
		var prefix []byte
		switch parts := strings.Split(strings.TrimPrefix(path, QueryJobs), "/"); {
		case len(parts) == 1:
			prefix = market.JobKey(0)[:1]
		case len(parts) == 3 && parts[1] == "state":
			s, err := market.ParseJobState(parts[2])
			if err != nil {
				return nil, true, types.ErrBadQuery.Wrapf("%v", err)
			}
			prefix = market.ByStatePrefix(s)
		case len(parts) == 3 && (parts[1] == "client" || parts[1] == "provider"):
			a, err := parseAddr(parts[2])
			if err != nil {
				return nil, true, err
			}
			if parts[1] == "client" {
				prefix = market.ByClientPrefix(a)
			} else {
				prefix = market.ByProviderPrefix(a)
			}
		default:
			return nil, true, types.ErrBadQuery.Wrapf("%q: want /jobs, /jobs/state/NAME, /jobs/client/ADDR or /jobs/provider/ADDR", path)
		}
		views := []JobView{}
		for _, id := range jobIDs(snap, prefix) {
			if j, ok := market.GetJob(snap, id); ok {
				views = append(views, jobView(snap, j, h))
			}
		}
		return views, true, nil
	case strings.HasPrefix(path, QueryBids):
		j, err := getJob(snap, strings.TrimPrefix(path, QueryBids))
		if err != nil {
			return nil, true, err
		}
		bids := []BidView{}
		for _, b := range market.Bids(snap, j.ID) {
			bv := BidView{Stage: b.Stage, Provider: b.Provider, Commitment: b.Commitment, Deposit: b.Deposit, Revealed: b.Revealed}
			if b.Revealed {
				bv.Price = b.Price
			}
			bids = append(bids, bv)
		}
		return bids, true, nil
	case path == QueryMatch:
		var req market.Requirements
		if err := json.Unmarshal(data, &req); err != nil {
			return nil, true, types.ErrBadQuery.Wrapf("requirements: %v", err)
		}
		if req.MinStake == nil {
			req.MinStake = new(uint256.Int)
		}
		probe := &market.Job{ID: 0, Req: req}
		params := getParams(snap)
		out := []ProviderView{}
		iterateProviders(snap, after, func(addr types.Address, p *market.Provider) bool {
			if market.Eligible(snap, params, h, probe, addr) == nil {
				out = append(out, providerView(snap, addr, p))
			}
			return len(out) >= MaxListed
		})
		return out, true, nil
	case strings.HasPrefix(path, QueryProvider):
		a, err := parseAddr(strings.TrimPrefix(path, QueryProvider))
		if err != nil {
			return nil, true, err
		}
		p, ok := market.GetProvider(snap, a)
		if !ok {
			return nil, true, types.ErrNotFound.Wrapf("%s is not a registered provider", a)
		}
		return providerView(snap, a, p), true, nil
	case path == QueryProviders:
		out := []ProviderView{}
		iterateProviders(snap, after, func(addr types.Address, p *market.Provider) bool {
			out = append(out, providerView(snap, addr, p))
			return len(out) >= MaxListed
		})
		return out, true, nil
	case strings.HasPrefix(path, QueryWhyNoBids):
		j, err := getJob(snap, strings.TrimPrefix(path, QueryWhyNoBids))
		if err != nil {
			return nil, true, err
		}
		return whyNoBids(snap, getParams(snap), j, h, after), true, nil
	case strings.HasPrefix(path, QueryEscrow):
		j, err := getJob(snap, strings.TrimPrefix(path, QueryEscrow))
		if err != nil {
			return nil, true, err
		}
		return EscrowView{Job: j.ID, State: j.State.String(), Locked: escrow.NewKeeper(snap).Locked(j.ID), MaxPayout: j.MaxPayout(),
			ValidatorFee: j.ValidatorFee, Paid: j.Paid, Refunded: j.Refunded, Compensated: j.Compensated}, true, nil
	case strings.HasPrefix(path, QueryStake):
		a, err := parseAddr(strings.TrimPrefix(path, QueryStake))
		if err != nil {
			return nil, true, err
		}
		ek := escrow.NewKeeper(snap)
		v := StakeView{Address: a, Bonded: ek.Bonded(a), Unbonding: ek.Unbondings(a)}
		if val, ok := ek.GetValidator(a); ok {
			vv := validatorView(getParams(snap).Staking, ek, a, val)
			v.Validator = &vv
		}
		return v, true, nil
	case strings.HasPrefix(path, QueryReputation):
		a, err := parseAddr(strings.TrimPrefix(path, QueryReputation))
		if err != nil {
			return nil, true, err
		}
		rep := verifier.NewKeeper(snap).GetReputation(a)
		return ReputationView{Address: a, Reputation: rep, Score: rep.Score()}, true, nil
	}
	return nil, false, nil
}

func whyNoBids(r store.KV, params genesis.Params, j *market.Job, h uint64, after *types.Address) WhyNoBidsView {
	v := WhyNoBidsView{Job: j.ID, State: j.State.String(), Providers: []EligibilityView{}}
	for _, n := range j.Bids {
		v.Bids += n
	}
	bidders := map[types.Address]bool{} // looked up only
	for _, b := range market.Bids(r, j.ID) {
		bidders[b.Provider] = true
	}
	eligible := 0
	next := iterateProviders(r, after, func(addr types.Address, _ *market.Provider) bool {
		e := EligibilityView{Provider: addr, Eligible: true, Bid: bidders[addr]}
		if err := eligibleAnyStage(r, params, h, j, addr); err != nil {
			e.Eligible, e.Reason = false, strings.TrimPrefix(err.Error(), types.ErrNotEligible.Desc+": ")
		} else {
			eligible++
		}
		v.Providers = append(v.Providers, e)
		return false
	})
	if next != nil {
		v.Next = next.Hex()
	}
	switch {
	case len(v.Providers) == 0:
		v.Summary = "no provider is registered on this chain"
	case eligible == 0:
		v.Summary = "no registered provider meets the job's requirements: see each reason"
	case v.Bids == 0:
		v.Summary = strconv.FormatUint(uint64(eligible), 10) + " eligible providers, none bid: the price cap may be below their prices, or their agents are not running"
	default:
		v.Summary = strconv.FormatUint(uint64(v.Bids), 10) + " bids from " + strconv.FormatUint(uint64(eligible), 10) + " eligible providers"
	}
	return v
}

// eligibleAnyStage: the provider may bid on some stage of j (a split
// stage also needs its slice or the whole model); the error is the last
// stage's reason.
func eligibleAnyStage(r store.KV, params genesis.Params, h uint64, j *market.Job, addr types.Address) error {
	if j.Kind != market.KindSplit {
		return market.Eligible(r, params, h, j, addr)
	}
	var err error
	for s := uint16(0); s < j.Stages; s++ {
		if err = market.EligibleStage(r, params, h, j, s, addr); err == nil {
			return nil
		}
	}
	return err
}

func validatorView(p genesis.StakingParams, ek escrow.Keeper, op types.Address, v *escrow.Validator) ValidatorView {
	return ValidatorView{Name: v.Name, Operator: op, PubKey: v.PubKey, Power: uint64(ek.ReportedPower(v.PubKey)),
		Stake: ek.Bonded(op), Jailed: v.Jailed, JailedUntil: v.JailedUntil, Tombstoned: v.Tombstoned, Missed: v.Missed,
		Active: ek.IsActiveValidator(p, op)}
}

// taskVerified reports whether a settled task's result is verified and was
// delivered: a verified outcome and a live slot that revealed it.
func taskVerified(t *verifier.Task) bool {
	if t.Status != verifier.TaskSettled || !market.VerifiedOutcome(t.Outcome) {
		return false
	}
	for i := range t.Slots {
		if s := &t.Slots[i]; s.Revealed && s.Result == t.Verdict {
			return true
		}
	}
	return false
}
