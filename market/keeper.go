package market

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/ethereum/go-ethereum/rlp"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// Context is what a handler sees of the block it runs in.
type Context struct {
	KV store.KV
	// Height is the height of the block being executed.
	Height uint64
	// BlockHash seeds the last tie-break of auctions. Every node executes
	// the same decided block, so it is the same everywhere.
	BlockHash []byte
	Params    genesis.Params
	Events    *types.Events
	// ChainID is the chain's id: hand-off signatures of split inference
	// (HandoffDigest) are bound to it.
	ChainID string
}

// Keeper runs the market over one Context.
type Keeper struct {
	ctx Context
	kv  store.KV
	esc escrow.Keeper
	ver verifier.Keeper
	p   genesis.MarketParams
	sp  genesis.StakingParams
}

// NewKeeper returns a keeper for ctx. A nil ctx.Events discards events.
func NewKeeper(ctx Context) *Keeper {
	if ctx.Events == nil {
		ctx.Events = new(types.Events)
	}
	return &Keeper{
		ctx: ctx, kv: ctx.KV,
		esc: escrow.NewKeeper(ctx.KV), ver: verifier.NewKeeper(ctx.KV),
		p: ctx.Params.Market, sp: ctx.Params.Staking,
	}
}

func (k *Keeper) emit(e types.Event) { k.ctx.Events.Emit(e) }

// ---- storage ----

func decode(bz []byte, v any, what string) {
	if err := rlp.DecodeBytes(bz, v); err != nil {
		panic(fmt.Errorf("market: stored %s unreadable: %w", what, err))
	}
}

func encode(v any) []byte {
	bz, err := rlp.EncodeToBytes(v)
	if err != nil {
		panic(err)
	}
	return bz
}

// GetProvider returns a provider's record.
func (k *Keeper) GetProvider(addr types.Address) (*Provider, bool) {
	return GetProvider(k.kv, addr)
}

// GetProvider reads a provider's record from r.
func GetProvider(r store.Reader, addr types.Address) (*Provider, bool) {
	bz := r.Get(ProviderKey(addr))
	if bz == nil {
		return nil, false
	}
	var p Provider
	decode(bz, &p, "provider")
	return &p, true
}

func (k *Keeper) setProvider(addr types.Address, p *Provider) { k.kv.Set(ProviderKey(addr), encode(p)) }

// GetJob reads a job from r.
func GetJob(r store.Reader, id uint64) (*Job, bool) {
	bz := r.Get(JobKey(id))
	if bz == nil {
		return nil, false
	}
	var j Job
	decode(bz, &j, "job")
	return &j, true
}

func (k *Keeper) job(id uint64) (*Job, error) {
	j, ok := GetJob(k.kv, id)
	if !ok && Pruned(k.kv, id) {
		return nil, types.ErrUnknownJob.Wrapf("%s", PrunedError(id, k.p.RetainBlocks))
	}
	if !ok {
		return nil, types.ErrUnknownJob.Wrapf("job %d does not exist", id)
	}
	return j, nil
}

func (k *Keeper) setJob(j *Job) { k.kv.Set(JobKey(j.ID), encode(j)) }

func (k *Keeper) setState(j *Job, s JobState) {
	k.kv.Delete(byStateKey(j.State, j.ID))
	j.State = s
	k.kv.Set(byStateKey(s, j.ID), present)
	k.queuePrune(j)
}

// GetBid reads a bid from r.
func GetBid(r store.Reader, job uint64, stage uint16, p types.Address) (*Bid, bool) {
	bz := r.Get(BidKey(job, stage, p))
	if bz == nil {
		return nil, false
	}
	var b Bid
	decode(bz, &b, "bid")
	return &b, true
}

// StageBid is a bid with where it is.
type StageBid struct {
	Stage    uint16
	Provider types.Address
	Bid
}

// Bids returns the bids on a job, by stage then provider.
func Bids(r store.Reader, job uint64) []StageBid {
	var out []StageBid
	pfx := cat([]byte{prefixBid}, be64(job))
	store.IteratePrefix(r, pfx, func(key, value []byte) bool {
		var b StageBid
		decode(value, &b.Bid, "bid")
		b.Stage = binary.BigEndian.Uint16(key[9:11])
		b.Provider = types.BytesToAddress(key[11:])
		out = append(out, b)
		return false
	})
	return out
}

func (k *Keeper) schedule(height, job uint64, stage uint16, kind byte) {
	k.kv.Set(scheduleKey(height, job, stage, kind), present)
}

// ---- providers ----

// RegisterProvider registers (or, with update, re-publishes) from's record.
func (k *Keeper) RegisterProvider(from types.Address, info *ProviderInfo, update bool) error {
	p, exists := k.GetProvider(from)
	switch {
	case update && !exists:
		return types.ErrUnknownProvider.Wrapf("%s is not a registered provider: register first", from)
	case !update && exists:
		return types.ErrDuplicate.Wrapf("%s is already registered: use update", from)
	}
	if !exists {
		p = &Provider{Registered: k.ctx.Height}
	}
	p.PeerID, p.Addrs, p.Attributes, p.Runtimes, p.Models, p.Class = info.PeerID, info.Addrs, info.Attributes, info.Runtimes, info.Models, info.Class
	p.Moniker, p.TrainClass = info.Moniker, info.TrainClass
	k.setProvider(from, p)
	k.emit(EventProviderRegistered{Provider: from, PeerID: info.PeerID, Update: update})
	return nil
}

// UnjailProvider lets a jailed provider bid again.
func (k *Keeper) UnjailProvider(from types.Address) error {
	p, ok := k.GetProvider(from)
	switch {
	case !ok:
		return types.ErrUnknownProvider.Wrapf("%s is not a registered provider", from)
	case !p.Jailed:
		return types.ErrInvalidMsg.Wrapf("provider %s is not jailed", from)
	case p.Tombstoned:
		return types.ErrJailed.Wrapf("provider %s was tombstoned for fraud and can never unjail", from)
	case k.ctx.Height < p.JailedUntil:
		return types.ErrJailed.Wrapf("provider %s is jailed until height %d (now %d)", from, p.JailedUntil, k.ctx.Height)
	}
	p.Jailed = false
	k.setProvider(from, p)
	k.emit(EventProviderUnjailed{Provider: from})
	return nil
}

// SessionFraud punishes a provider proven to have signed a wrong or
// equivocal session receipt (package session slashed it): jailed and
// tombstoned like a job fraud.
func (k *Keeper) SessionFraud(addr types.Address, reason string) {
	k.jailProvider(addr, k.ctx.Height+k.p.ProviderJailBlocks, true, reason)
}

func (k *Keeper) jailProvider(addr types.Address, until uint64, tombstone bool, reason string) {
	p, ok := k.GetProvider(addr)
	if !ok {
		return
	}
	p.Jailed = true
	if until > p.JailedUntil {
		p.JailedUntil = until
	}
	p.Tombstoned = p.Tombstoned || tombstone
	k.setProvider(addr, p)
	k.emit(EventProviderJailed{Provider: addr, Until: p.JailedUntil, Tombstoned: p.Tombstoned, Reason: reason})
}

// Eligible returns nil if provider may bid on (or be awarded) job, or the
// reason it may not, written for the provider's operator to act on.
func Eligible(r store.KV, params genesis.Params, height uint64, j *Job, addr types.Address) error {
	_, _, err := eligible(r, params, height, j, addr)
	return err
}

// eligible is Eligible, also returning what it read that a caller needs
// next: the provider's record and its reputation score (meaningful only
// when err is nil), so that the close reads each once per bid.
func eligible(r store.KV, params genesis.Params, height uint64, j *Job, addr types.Address) (*Provider, uint64, error) {
	p, ok := GetProvider(r, addr)
	if !ok {
		return nil, 0, types.ErrNotEligible.Wrapf("%s is not a registered provider: ogpu tx provider register", addr)
	}
	if addr == j.Client {
		return nil, 0, types.ErrNotEligible.Wrapf("%s posted job %d and cannot work on it", addr, j.ID)
	}
	if p.Tombstoned {
		return nil, 0, types.ErrNotEligible.Wrapf("provider %s was tombstoned for fraud", addr)
	}
	if p.Jailed {
		return nil, 0, types.ErrNotEligible.Wrapf("provider %s is jailed (until height %d, then ogpu tx provider unjail)", addr, p.JailedUntil)
	}
	need := params.Staking.MinProviderStake
	if j.Req.MinStake.Gt(need) {
		need = j.Req.MinStake
	}
	if have := escrow.NewKeeper(r).Bonded(addr); have.Lt(need) {
		return nil, 0, types.ErrNotEligible.Wrapf("provider %s has %s bonded, job %d needs %s: ogpu tx provider bond", addr, types.FormatAmount(have), j.ID, types.FormatAmount(need))
	}
	score := verifier.NewKeeper(r).GetReputation(addr).Score()
	if score < j.Req.MinReputation {
		return nil, 0, types.ErrNotEligible.Wrapf("provider %s has reputation %d, job %d needs %d", addr, score, j.ID, j.Req.MinReputation)
	}
	if j.Req.Runtime != "" && !contains(p.Runtimes, j.Req.Runtime) {
		return nil, 0, types.ErrNotEligible.Wrapf("provider %s does not offer runtime %q", addr, j.Req.Runtime)
	}
	if j.Kind == KindFinetune && p.TrainClass != j.Req.Class {
		return nil, 0, types.ErrNotEligible.Wrapf("provider %s is in training class %q, fine-tune job %d needs %q", addr, p.TrainClass, j.ID, j.Req.Class)
	}
	if j.Kind != KindFinetune && j.Req.Class != "" && p.Class != j.Req.Class {
		return nil, 0, types.ErrNotEligible.Wrapf("provider %s is in determinism class %q, job %d needs %q", addr, p.Class, j.ID, j.Req.Class)
	}
	if miss := MatchAll(j.Req.Attributes, p.Attributes); miss != "" {
		return nil, 0, types.ErrNotEligible.Wrapf("provider %s has no attribute matching %q", addr, miss)
	}
	if j.Kind == KindSession && j.Session != nil {
		if err := laneCap(r, params, addr, j); err != nil {
			return nil, 0, err
		}
	}
	if err := exposureCap(r, params, addr, j); err != nil { // deterrence.go
		return nil, 0, err
	}
	return p, score, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ---- jobs ----

// PostJob posts a job, locking its maximum payout and validator fee.
func (k *Keeper) PostJob(from types.Address, m *MsgPostJob) (uint64, error) {
	if uint64(m.Stages) > k.p.MaxStages {
		return 0, types.ErrInvalidMsg.Wrapf("post-job: %d stages, at most %d", m.Stages, k.p.MaxStages)
	}
	if uint64(m.Redundancy) > k.p.MaxRedundancy {
		return 0, types.ErrInvalidMsg.Wrapf("post-job: redundancy %d, at most %d", m.Redundancy, k.p.MaxRedundancy)
	}
	w := m.Windows
	// Each window is bounded first (genesis bounds MaxJobBlocks and
	// DisputeBlocks by 10^6, MaxStages above), so the life cannot overflow.
	long := w.Bid > k.p.MaxJobBlocks || w.Reveal > k.p.MaxJobBlocks || w.Execute > k.p.MaxJobBlocks || w.Verify > k.p.MaxJobBlocks
	life := jobLife(w, m.Kind, m.Stages, k.p.DisputeBlocks)
	if m.Mode == ModePool {
		life += PoolDrawWait // pool.go: the close waits for its beacon value
	}
	life += rebidWindow(m) // short.go: a rebid job's extra window
	switch {
	case m.Kind == KindPipeline && (long || life > k.p.MaxJobBlocks):
		needs := strconv.FormatUint(life, 10)
		if long {
			needs = fmt.Sprintf("more: one window alone is longer than %d blocks", k.p.MaxJobBlocks)
		}
		return 0, types.ErrInvalidMsg.Wrapf("post-job: a pipeline's stages run one after another: bid + reveal + stages × (execute + verify + %d dispute blocks) + (execute + verify + dispute) must be at most %d blocks, this job needs %s",
			k.p.DisputeBlocks, k.p.MaxJobBlocks, needs)
	case m.Kind == KindSplit && (long || life > k.p.MaxJobBlocks):
		return 0, types.ErrInvalidMsg.Wrapf("post-job: a split job leaves room for %d replacements and a vote per stage: bid + reveal + %d × execute + verify + stages × %d dispute blocks must be at most %d blocks",
			MaxSplitReplacements, 1+MaxSplitReplacements, k.p.DisputeBlocks, k.p.MaxJobBlocks)
	case m.Kind == KindSession:
		if err := k.checkSessionLife(m); err != nil {
			return 0, err
		}
		life = w.Bid + w.Reveal + m.Session.Blocks + m.Session.Grace
	case long || life > k.p.MaxJobBlocks:
		return 0, types.ErrInvalidMsg.Wrapf("post-job: bid + reveal + 2 × (execute + verify) + %d dispute blocks must be at most %d blocks", k.p.DisputeBlocks, k.p.MaxJobBlocks)
	case m.Kind == KindFinetune:
		if err := k.checkFinetuneLife(m, life); err != nil {
			return 0, err
		}
	}
	id := decodeU64(k.kv.Get(NextJobKey()))
	if id == 0 {
		id = 1
	}
	k.kv.Set(NextJobKey(), be64(id+1))
	j := &Job{
		ID: id, Client: from, Kind: m.Kind, Mode: m.Mode, Model: m.Model, ModelSize: m.ModelSize,
		Stages: m.Stages, Redundancy: m.Redundancy, MaxPrice: m.MaxPrice, Req: m.Req,
		Input: m.Input, Windows: m.Windows, Seal: m.Seal, MaxTokens: m.MaxTokens, PromptTokens: m.PromptTokens, Slices: m.Slices, Session: m.Session, Finetune: m.Finetune,
		Posted: k.ctx.Height, Bids: make([]uint32, m.Stages), Prices: make([]*uint256.Int, m.Stages),
		Paid: new(uint256.Int), Refunded: new(uint256.Int), Compensated: new(uint256.Int), FeeSpent: new(uint256.Int),
		Short: m.Short,
	}
	if j.Short == "" {
		j.Short = ShortDefault(j.Kind)
	}
	for i := range j.Prices {
		j.Prices[i] = new(uint256.Int)
	}
	j.BidEnd = k.ctx.Height + w.Bid
	j.RevealEnd = j.BidEnd + w.Reveal
	j.Expiry = k.ctx.Height + life
	j.ValidatorFee = escrow.MulBps(j.MaxPayout(), k.p.ValidatorFeeBps)
	lock := new(uint256.Int).Add(j.MaxPayout(), j.ValidatorFee)
	if err := k.esc.Lock(from, id, lock); err != nil {
		return 0, fmt.Errorf("cannot lock the job's escrow of %s: %w", types.FormatAmount(lock), err)
	}
	j.State = JobBidding
	k.kv.Set(byStateKey(JobBidding, id), present)
	k.kv.Set(byClientKey(from, id), present)
	k.setJob(j)
	if w.Reveal > 0 {
		k.schedule(j.BidEnd, id, stageNone, deadlineBidEnd)
	}
	k.schedule(j.RevealEnd, id, stageNone, deadlineClose)
	k.emit(EventJobPosted{Job: id, Client: from, Kind: j.Kind, Mode: j.Mode, Model: j.Model, Stages: j.Stages,
		Redundancy: j.Redundancy, MaxPrice: j.MaxPrice, Locked: lock, BidEnd: j.BidEnd, RevealEnd: j.RevealEnd})
	return id, nil
}

// jobLife is how many blocks a job may run from its posting to its last
// reveal deadline (its Expiry): bid + reveal, then
//
//   - inference (stages run side by side): 2 × (execute + verify), the
//     second window for a no-show's backup or a reporter whose input the
//     validators found available, plus dispute blocks for that input check;
//   - pipeline (stage s+1 opens when stage s settles): stages × (execute +
//     verify + dispute), each stage's worst case, plus one execute +
//     verify + dispute for a backup or an input check;
//   - split (stages run together): execute, then MaxSplitReplacements more
//     execute windows (a replacement ordered at the last height of a
//     commit window moves every stage's commit deadline one execute window
//     on), verify, dispute blocks for the hand-off proofs, and dispute
//     blocks for each stage after the first: the stages held after a
//     disputed one are audited once its verdict is in (splitRelease), and
//     with r ≥ 3 a released stage may be disputed in turn.
//
// A dispute of the last window may end up to dispute blocks after it
// (genesis keeps stake unbonding longer than that). The caller bounds the
// windows so that this cannot overflow.
func jobLife(w Windows, kind string, stages uint16, dispute uint64) uint64 {
	ev := w.Execute + w.Verify
	switch kind {
	case KindPipeline:
		return w.Bid + w.Reveal + uint64(stages)*(ev+dispute) + ev + dispute
	case KindSplit:
		return w.Bid + w.Reveal + (1+MaxSplitReplacements)*w.Execute + w.Verify + uint64(stages)*dispute
	}
	return w.Bid + w.Reveal + 2*ev + dispute
}

func decodeU64(bz []byte) uint64 {
	if len(bz) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(bz)
}

// CancelJob cancels a job before its award, refunding every deposit and
// the client's escrow.
func (k *Keeper) CancelJob(from types.Address, id uint64) error {
	j, err := k.job(id)
	if err != nil {
		return err
	}
	if j.Client != from {
		return types.ErrUnauthorized.Wrapf("job %d belongs to %s", id, j.Client)
	}
	if j.State != JobBidding && j.State != JobRevealing {
		return types.ErrWrongPhase.Wrapf("job %d is %s: only a job not yet awarded can be cancelled", id, j.State)
	}
	held := depositHeld(k.kv, j)
	for _, b := range Bids(k.kv, id) {
		if held(&b) {
			k.esc.Release(id, b.Provider, b.Deposit)
		}
	}
	k.clearBook(id)
	for s := uint16(0); s < j.Stages; s++ {
		k.kv.Delete(LeadersKey(id, s))
	}
	refund := k.esc.Locked(id)
	k.esc.Release(id, j.Client, refund)
	j.Refunded.Add(j.Refunded, refund)
	k.setState(j, JobCancelled)
	k.setJob(j)
	k.emit(EventJobCancelled{Job: id, Refund: refund})
	return nil
}

// depositHeld returns whether a bid of j still holds its deposit in the
// job's escrow: a sealed bid; an auction's revealed bid still in its
// stage's leaders list (one pushed out got its deposit back at once); a
// claim still in the order book (until the close, pool.go). It reads each
// stage's leaders list once.
func depositHeld(r store.Reader, j *Job) func(b *StageBid) bool {
	if j.Mode != ModeAuction {
		return func(b *StageBid) bool {
			return !b.Revealed || r.Get(BookKey(j.ID, b.Stage, b.Price, b.Provider)) != nil
		}
	}
	leaders := make([]*Leaders, j.Stages)
	return func(b *StageBid) bool {
		if !b.Revealed {
			return true
		}
		if leaders[b.Stage] == nil {
			leaders[b.Stage] = GetLeaders(r, j.ID, b.Stage)
		}
		return leaders[b.Stage].has(b.Provider)
	}
}

// clearBook drops a job's order book once its bids are resolved. The bid
// records stay, for queries; their deposits were returned or burned.
func (k *Keeper) clearBook(job uint64) {
	var keys [][]byte
	store.IteratePrefix(k.kv, cat([]byte{prefixBook}, be64(job)), func(key, _ []byte) bool {
		keys = append(keys, bytes.Clone(key))
		return false
	})
	for _, key := range keys {
		k.kv.Delete(key)
	}
}

func (k *Keeper) checkStage(j *Job, stage uint16) error {
	if stage >= j.Stages {
		return types.ErrInvalidMsg.Wrapf("job %d has stages 0..%d, not %d", j.ID, j.Stages-1, stage)
	}
	return nil
}

// CommitBid places a sealed bid and locks its deposit.
func (k *Keeper) CommitBid(from types.Address, m *MsgCommitBid) error {
	j, err := k.job(m.Job)
	if err != nil {
		return err
	}
	if err := k.checkStage(j, m.Stage); err != nil {
		return err
	}
	switch {
	case j.Mode != ModeAuction:
		return types.ErrWrongPhase.Wrapf("job %d is a %s job: claim tasks with ogpu tx market claim", j.ID, j.Mode)
	case j.State != JobBidding || k.ctx.Height > j.BidEnd:
		return types.ErrWrongPhase.Wrapf("job %d is not taking bids: its bid window ended at height %d (now %d, %s)", j.ID, j.BidEnd, k.ctx.Height, j.State)
	}
	if _, dup := GetBid(k.kv, j.ID, m.Stage, from); dup {
		return types.ErrDuplicate.Wrapf("%s already bid on job %d stage %d", from, j.ID, m.Stage)
	}
	// Cheap stateful checks before the eligibility matching (M2): a bid
	// refused here costs its sender nothing but costs the node little.
	if uint64(j.Bids[m.Stage]) >= k.p.MaxBidsPerStage {
		return types.ErrWrongPhase.Wrapf("job %d stage %d has the maximum of %d bids", j.ID, m.Stage, k.p.MaxBidsPerStage)
	}
	if err := k.canPayDeposit(from, "bid"); err != nil {
		return err
	}
	if err := EligibleStage(k.kv, k.ctx.Params, k.ctx.Height, j, m.Stage, from); err != nil {
		return err
	}
	if err := k.esc.Lock(from, j.ID, k.p.BidDeposit); err != nil {
		return fmt.Errorf("cannot lock the bid deposit of %s: %w", types.FormatAmount(k.p.BidDeposit), err)
	}
	j.Bids[m.Stage]++
	b := &Bid{Commitment: m.Commitment, Deposit: k.p.BidDeposit.Clone(), Price: new(uint256.Int), Seq: k.nextSeq(j)}
	k.kv.Set(BidKey(j.ID, m.Stage, from), encode(b))
	k.setJob(j)
	k.emit(EventBidCommitted{Job: j.ID, Stage: m.Stage, Provider: from, Deposit: b.Deposit})
	return nil
}

// canPayDeposit refuses a bid or claim whose sender cannot pay the deposit,
// without writing: it runs before the eligibility matching (M2).
func (k *Keeper) canPayDeposit(from types.Address, what string) error {
	if bal := k.esc.Balance(from); bal.Lt(k.p.BidDeposit) {
		return fmt.Errorf("cannot lock the %s deposit of %s: %w", what, types.FormatAmount(k.p.BidDeposit),
			types.ErrInsufficientFunds.Wrapf("%s has %s, needs %s", from, types.FormatAmount(bal), types.FormatAmount(k.p.BidDeposit)))
	}
	return nil
}

func (k *Keeper) nextSeq(j *Job) uint64 { return j.SealedBids() }

// RevealBid opens a sealed bid during the reveal window. The reveal of the
// last sealed bid closes the auction at the end of its block (closeEarly).
func (k *Keeper) RevealBid(from types.Address, m *MsgRevealBid) error {
	j, err := k.job(m.Job)
	if err != nil {
		return err
	}
	if err := k.checkStage(j, m.Stage); err != nil {
		return err
	}
	if j.Mode != ModeAuction {
		return types.ErrWrongPhase.Wrapf("job %d is a %s job: it has no sealed bids", j.ID, j.Mode)
	}
	if k.ctx.Height <= j.BidEnd || k.ctx.Height > j.RevealEnd || !j.State.Open() || j.State == JobRunning {
		return types.ErrWrongPhase.Wrapf("job %d is %s: it takes reveals at heights %d..%d (now %d)", j.ID, j.State, j.BidEnd+1, j.RevealEnd, k.ctx.Height)
	}
	b, ok := GetBid(k.kv, j.ID, m.Stage, from)
	switch {
	case !ok:
		return types.ErrUnknownJob.Wrapf("%s has no sealed bid on job %d stage %d", from, j.ID, m.Stage)
	case b.Revealed:
		return types.ErrDuplicate.Wrapf("%s already revealed its bid on job %d stage %d", from, j.ID, m.Stage)
	case BidCommitment(j.ID, m.Stage, m.Price, m.Salt, from) != b.Commitment:
		return types.ErrCommitMismatch.Wrapf("hash(job %d, stage %d, price %s, salt, %s) is not the sealed bid", j.ID, m.Stage, types.FormatAmount(m.Price), from)
	case m.Price.Gt(j.MaxPrice):
		return types.ErrInvalidMsg.Wrapf("price %s is above job %d's cap of %s", types.FormatAmount(m.Price), j.ID, types.FormatAmount(j.MaxPrice))
	}
	// The ranking happens here (leaders.go): the provider must be
	// eligible now, and is checked again at the close if it leads.
	score, err := eligibleStage(k.kv, k.ctx.Params, k.ctx.Height, j, m.Stage, from)
	if err != nil {
		return fmt.Errorf("%w; the bid stays sealed: reveal it by height %d once eligible, or its deposit is forfeited at the close", err, j.RevealEnd)
	}
	if j.Opened == 0 {
		j.TieSeed = bytes.Clone(k.ctx.BlockHash)
	}
	b.Revealed, b.Price = true, m.Price.Clone()
	k.kv.Set(BidKey(j.ID, m.Stage, from), encode(b))
	l := GetLeaders(k.kv, j.ID, m.Stage)
	out := l.insert(Leader{Provider: from, Price: b.Price, Score: score, Tie: TieHash(j.TieSeed, j.ID, m.Stage, from), Seq: b.Seq, Deposit: b.Deposit}, leaderCap(j, k.p.MaxBidsPerStage))
	k.setLeaders(j.ID, m.Stage, l)
	j.Opened++
	k.setJob(j)
	k.emit(EventBidRevealed{Job: j.ID, Stage: m.Stage, Provider: from, Price: b.Price})
	if out != nil {
		// A definite loser: leaderCap bids rank before it and only
		// better ones can come. Its deposit goes back now.
		k.esc.Release(j.ID, out.Provider, out.Deposit)
		k.emit(EventBidEvicted{Job: j.ID, Stage: m.Stage, Provider: out.Provider, Price: out.Price, Deposit: out.Deposit, Leaders: uint32(len(l.List))})
	}
	if j.AllRevealed(k.ctx.Height) {
		k.closeEarly(j)
	}
	return nil
}

// closeEarly moves the close of auction j to the end of this block: every
// sealed bid is revealed and the bid window is over, so no bid can enter
// or leave the book any more (a reveal is taken once per sealed bid, a
// sealed bid only up to BidEnd). Waiting for RevealEnd would change
// nothing but the height. The close is the same close: it still checks
// every winner's eligibility then (L1) and ranks the same book, and its
// work is the deadline's, counted in EndBlock against max_deadline_work
// like any close (a block with too many carries the rest over).
//
// A sealed bid that is never revealed keeps the close at RevealEnd: its
// bidder delays the award to the end of the window, as before, and loses
// its deposit there.
func (k *Keeper) closeEarly(j *Job) {
	if k.ctx.Height >= j.RevealEnd {
		return // the close runs at the end of this block anyway
	}
	k.kv.Delete(scheduleKey(j.RevealEnd, j.ID, stageNone, deadlineClose))
	k.schedule(k.ctx.Height, j.ID, stageNone, deadlineClose)
	k.emit(EventBidsRevealed{Job: j.ID, Bids: j.SealedBids(), CloseAt: k.ctx.Height, RevealEnd: j.RevealEnd})
}

// ClaimTask claims a task of a pool-mode job at its fixed reward. Claims
// are taken for the whole claim window (until RevealEnd); the close then
// draws the r winners of each task among its eligible claimants from the
// beacon value of RevealEnd (pool.go), which no claimant could know when
// it claimed: arriving first, or being the proposer that orders the
// claims, wins nothing (AppVersion 8, review 2's M-M4; before, the r-th
// claim awarded the task to the first r in block order).
func (k *Keeper) ClaimTask(from types.Address, m *MsgClaimTask) error {
	j, err := k.job(m.Job)
	if err != nil {
		return err
	}
	if err := k.checkStage(j, m.Stage); err != nil {
		return err
	}
	switch {
	case j.Mode != ModePool:
		return types.ErrWrongPhase.Wrapf("job %d is an auction: bid with ogpu tx market bid", j.ID)
	case !j.State.Open() || k.ctx.Height > j.RevealEnd:
		return types.ErrWrongPhase.Wrapf("job %d took claims until height %d (now %d)", j.ID, j.RevealEnd, k.ctx.Height)
	case j.State == JobRunning:
		return types.ErrWrongPhase.Wrapf("job %d was awarded: it takes no more claims; look for another pool job", j.ID)
	}
	if _, dup := GetBid(k.kv, j.ID, m.Stage, from); dup {
		return types.ErrDuplicate.Wrapf("%s already claimed job %d task %d", from, j.ID, m.Stage)
	}
	// Cheap stateful checks before the eligibility matching (M2).
	if uint64(j.Bids[m.Stage]) >= k.p.MaxBidsPerStage {
		return types.ErrWrongPhase.Wrapf("job %d task %d has the maximum of %d claims", j.ID, m.Stage, k.p.MaxBidsPerStage)
	}
	if err := k.canPayDeposit(from, "claim"); err != nil {
		return err
	}
	if err := EligibleStage(k.kv, k.ctx.Params, k.ctx.Height, j, m.Stage, from); err != nil {
		return err
	}
	if err := k.esc.Lock(from, j.ID, k.p.BidDeposit); err != nil {
		return fmt.Errorf("cannot lock the claim deposit of %s: %w", types.FormatAmount(k.p.BidDeposit), err)
	}
	b := &Bid{Deposit: k.p.BidDeposit.Clone(), Revealed: true, Price: j.MaxPrice.Clone(), Seq: k.nextSeq(j)}
	j.Bids[m.Stage]++
	k.kv.Set(BidKey(j.ID, m.Stage, from), encode(b))
	k.kv.Set(BookKey(j.ID, m.Stage, b.Price, from), present)
	k.emit(EventBidRevealed{Job: j.ID, Stage: m.Stage, Provider: from, Price: b.Price})
	k.setJob(j)
	return nil
}

// stageGapReason says why a pipeline job with stage s unawarded expired.
func stageGapReason(j *Job, s uint16) string {
	if j.Bids[s] == 0 {
		return fmt.Sprintf("stage %d has no bids, and a pipeline needs every stage: see ogpu query why-no-bids", s)
	}
	return fmt.Sprintf("stage %d has no eligible revealed bids, and a pipeline needs every stage", s)
}

func (k *Keeper) noBidsReason(j *Job) string {
	var n uint32
	for _, c := range j.Bids {
		n += c
	}
	if n == 0 {
		return "no bids: see ogpu query why-no-bids"
	}
	return "no eligible revealed bids"
}
