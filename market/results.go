package market

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// CommitResult records an assigned provider's result commitment.
func (k *Keeper) CommitResult(from types.Address, m *verifier.MsgCommitResult) error {
	j, err := k.job(m.Job)
	if err != nil {
		return err
	}
	if err := k.checkStage(j, m.Stage); err != nil {
		return err
	}
	t, err := k.ver.Commit(m.Job, m.Stage, from, m.Commitment, k.ctx.Height)
	if err != nil {
		return err
	}
	k.emit(EventResultCommitted{Job: m.Job, Stage: m.Stage, Provider: from, RevealsOpen: t.AllCommitted()})
	return nil
}

// RevealResult opens a result commitment; the last reveal settles the
// task (or opens a dispute) at once.
func (k *Keeper) RevealResult(from types.Address, m *verifier.MsgRevealResult) error {
	j, err := k.job(m.Job)
	if err != nil {
		return err
	}
	if err := k.checkStage(j, m.Stage); err != nil {
		return err
	}
	t, err := k.ver.Reveal(m.Job, m.Stage, from, m.Result, m.Salt, k.ctx.Height)
	if err != nil {
		return err
	}
	k.emit(EventResultRevealed{Job: m.Job, Stage: m.Stage, Provider: from, Result: m.Result})
	k.evaluate(j, m.Stage, t, false)
	return nil
}

// RevealCanary opens a canary job's known answer. Like a result reveal it
// waits until every assigned provider has committed.
func (k *Keeper) RevealCanary(from types.Address, m *verifier.MsgRevealCanary) error {
	j, err := k.job(m.Job)
	if err != nil {
		return err
	}
	if err := k.checkStage(j, m.Stage); err != nil {
		return err
	}
	t, ok := k.ver.GetTask(j.ID, m.Stage)
	switch {
	case j.Canary == (types.Hash{}):
		return types.ErrInvalidMsg.Wrapf("job %d is not a canary", j.ID)
	case j.Client != from:
		return types.ErrUnauthorized.Wrapf("only the poster of canary job %d may reveal its answer", j.ID)
	case j.CanaryRevealed:
		return types.ErrDuplicate.Wrapf("the canary answer of job %d is already revealed", j.ID)
	case !ok || (t.Status != verifier.TaskExecuting && t.Status != verifier.TaskDisputed):
		return types.ErrWrongPhase.Wrapf("job %d stage %d is not executing", j.ID, m.Stage)
	case !t.AllCommitted() && k.ctx.Height <= t.CommitDeadline:
		return types.ErrWrongPhase.Wrapf("reveal the canary answer after every provider has committed or after height %d", t.CommitDeadline)
	case verifier.ResultCommitment(m.Result, m.Salt, from) != j.Canary:
		return types.ErrCommitMismatch.Wrapf("hash(answer, salt, %s) is not job %d's canary commitment", from, j.ID)
	}
	j.CanaryRevealed, j.CanaryAnswer = true, m.Result
	k.setJob(j)
	k.emit(EventCanaryRevealed{Job: j.ID, Answer: m.Result})
	if t.Status == verifier.TaskDisputed {
		k.settle(j, m.Stage, t, "canary", m.Result)
		return nil
	}
	k.evaluate(j, m.Stage, t, false)
	return nil
}

// VoteDispute records a validator's vote; once more than 2/3 of voting
// power agrees on a hash, the task settles on it.
func (k *Keeper) VoteDispute(from types.Address, m *verifier.MsgVoteDispute) error {
	j, err := k.job(m.Job)
	if err != nil {
		return err
	}
	if err := k.checkStage(j, m.Stage); err != nil {
		return err
	}
	v, ok := k.esc.GetValidator(from)
	if !ok {
		return types.ErrUnauthorized.Wrapf("%s operates no validator: only validators vote on disputes", from)
	}
	power := k.esc.ReportedPower(v.PubKey)
	if power == 0 {
		return types.ErrUnauthorized.Wrapf("validator %s has no voting power", v.Name)
	}
	t, ok := k.ver.GetTask(j.ID, m.Stage)
	if !ok || t.Status != verifier.TaskDisputed {
		return types.ErrWrongPhase.Wrapf("job %d stage %d is not in dispute", j.ID, m.Stage)
	}
	if k.ctx.Height > t.DisputeDeadline {
		return types.ErrWrongPhase.Wrapf("voting on job %d stage %d closed at height %d", j.ID, m.Stage, t.DisputeDeadline)
	}
	if err := k.ver.RecordVote(j.ID, m.Stage, from, m.Result); err != nil {
		return err
	}
	k.emit(EventDisputeVoted{Job: j.ID, Stage: m.Stage, Validator: from, Result: m.Result, Power: uint64(power)})
	if verdict, ok := k.ver.Tally(j.ID, m.Stage, k.votingPower, k.totalPower()); ok {
		k.settle(j, m.Stage, t, "verdict", verdict)
	}
	return nil
}

func (k *Keeper) votingPower(op types.Address) int64 {
	v, ok := k.esc.GetValidator(op)
	if !ok {
		return 0
	}
	return k.esc.ReportedPower(v.PubKey)
}

func (k *Keeper) totalPower() int64 {
	var total int64
	k.esc.IterateValidators(func(_ types.Address, v *escrow.Validator) bool {
		total += k.esc.ReportedPower(v.PubKey)
		return false
	})
	return total
}

// evaluate decides a task whose reveals are all in (or whose reveal window
// has closed, atDeadline): settle on agreement, open a dispute on
// disagreement, wait for a canary's answer.
func (k *Keeper) evaluate(j *Job, stage uint16, t *verifier.Task, atDeadline bool) {
	if t.Status != verifier.TaskExecuting {
		return
	}
	if !atDeadline && !t.AllRevealed() {
		return
	}
	if atDeadline {
		for i := range t.Slots {
			s := &t.Slots[i]
			if s.Live() && !s.Revealed {
				k.noShow(j, stage, t, i, "reveal")
				k.esc.Release(j.ID, j.Client, j.Prices[stage])
				j.Refunded.Add(j.Refunded, j.Prices[stage])
			}
		}
		k.setJob(j)
	}
	if j.Canary != (types.Hash{}) {
		if j.CanaryRevealed {
			k.settle(j, stage, t, "canary", j.CanaryAnswer)
			return
		}
		if !atDeadline {
			k.ver.SetTask(j.ID, stage, t)
			return // the poster reveals the answer before the deadline
		}
	}
	results := t.Revealed()
	switch len(results) {
	case 0:
		k.settle(j, stage, t, "no_results", types.Hash{})
	case 1:
		k.settle(j, stage, t, "agreed", results[0])
	default:
		t.Status = verifier.TaskDisputed
		t.DisputeDeadline = k.ctx.Height + k.p.DisputeBlocks
		k.ver.SetTask(j.ID, stage, t)
		k.schedule(t.DisputeDeadline, j.ID, stage, deadlineDispute)
		names := make([]string, len(results))
		for i, r := range results {
			names[i] = r.Hex()
		}
		k.emit(EventDisputeOpened{Job: j.ID, Stage: stage, Results: names, Deadline: t.DisputeDeadline})
	}
}

// noShow marks slot i dead: a light slash, jail, reputation.
func (k *Keeper) noShow(j *Job, stage uint16, t *verifier.Task, i int, missed string) {
	s := &t.Slots[i]
	s.NoShow = true
	k.emit(EventNoShow{Job: j.ID, Stage: stage, Provider: s.Provider, Missed: missed})
	k.slash(j, stage, s.Provider, k.p.NoShowSlashBps, "no-show")
	k.jailProvider(s.Provider, k.ctx.Height+k.p.ProviderJailBlocks, false, "missed the "+missed+" deadline of job "+strconv.FormatUint(j.ID, 10))
	k.ver.UpdateReputation(s.Provider, func(r *verifier.Reputation) { r.NoShows++ })
}

func (k *Keeper) slash(j *Job, stage uint16, addr types.Address, bps uint64, reason string) {
	res := k.esc.Slash(addr, bps, j.Client, k.p.CompensationBps)
	j.Compensated.Add(j.Compensated, res.Compensation)
	k.emit(EventSlashed{Account: addr, Job: j.ID, Stage: stage, Amount: res.Slashed, Compensation: res.Compensation, Burned: res.Burned, Reason: reason})
}

// commitDeadline handles the end of a task's commit window: providers that
// did not commit are no-shows; each slot goes to the next eligible backup
// bid if a fresh execute and verify window still fits before the job's
// expiry (for a pipeline stage: with the worst case of every later stage
// after it), else its payment is refunded to the client.
func (k *Keeper) commitDeadline(j *Job, stage uint16, t *verifier.Task) {
	if t.Status != verifier.TaskExecuting || t.CommitDeadline != k.ctx.Height {
		return
	}
	price := j.Prices[stage]
	ev := j.Windows.Execute + j.Windows.Verify
	var later uint64 // PostJob bounded the job's life, so none of this overflows
	if j.Kind == KindPipeline {
		later = uint64(j.Stages-1-stage) * (ev + k.p.DisputeBlocks)
	}
	reassignable := k.ctx.Height+ev+later <= j.Expiry
	var reassigned bool
	n := len(t.Slots)
	for i := 0; i < n; i++ {
		if !t.Slots[i].Live() || t.Slots[i].Committed {
			continue
		}
		from := t.Slots[i].Provider
		k.noShow(j, stage, t, i, "commit")
		var to types.Address
		for reassignable && len(t.Backups) > 0 && to == (types.Address{}) {
			cand := t.Backups[0]
			t.Backups = t.Backups[1:]
			if !t.Assigned(cand) && Eligible(k.kv, k.ctx.Params, k.ctx.Height, j, cand) == nil {
				to = cand
			}
		}
		if to == (types.Address{}) {
			k.esc.Release(j.ID, j.Client, price)
			j.Refunded.Add(j.Refunded, price)
			continue
		}
		t.Slots = append(t.Slots, verifier.Slot{Provider: to})
		k.kv.Set(byProviderKey(to, j.ID), present)
		reassigned = true
		k.emit(EventSlotReassigned{Job: j.ID, Stage: stage, From: from, To: to,
			CommitDeadline: k.ctx.Height + j.Windows.Execute, RevealDeadline: k.ctx.Height + j.Windows.Execute + j.Windows.Verify})
	}
	if reassigned {
		t.CommitDeadline = k.ctx.Height + j.Windows.Execute
		t.RevealDeadline = t.CommitDeadline + j.Windows.Verify
		k.schedule(t.CommitDeadline, j.ID, stage, deadlineCommit)
		k.schedule(t.RevealDeadline, j.ID, stage, deadlineReveal)
	}
	k.ver.SetTask(j.ID, stage, t)
	k.setJob(j)
	if live := liveSlots(t); live == 0 {
		k.settle(j, stage, t, "no_results", types.Hash{})
	}
}

func liveSlots(t *verifier.Task) int {
	n := 0
	for i := range t.Slots {
		if t.Slots[i].Live() {
			n++
		}
	}
	return n
}

// settle closes a task on a verdict: live revealed slots matching it are
// paid the clearing price and gain reputation; those that differ are fraud
// (slashed, tombstoned); unpaid slots are refunded to the client. The
// "unresolved", "no_results" and "no_input" outcomes pay nobody and refund
// every live slot. A pipeline then moves on to its next stage (advance).
func (k *Keeper) settle(j *Job, stage uint16, t *verifier.Task, outcome string, verdict types.Hash) {
	price := j.Prices[stage]
	paid, refund := new(uint256.Int), new(uint256.Int)
	decided := outcome == "agreed" || outcome == "verdict" || outcome == "canary"
	for i := range t.Slots {
		s := &t.Slots[i]
		if !s.Live() {
			continue // a no-show's payment was refunded or moved to its backup
		}
		switch {
		case decided && s.Revealed && s.Result == verdict:
			k.esc.Release(j.ID, s.Provider, price)
			paid.Add(paid, price)
			k.ver.UpdateReputation(s.Provider, func(r *verifier.Reputation) { r.CreditAgreed(price, k.p.MinReputationPayment) })
		case decided && s.Revealed:
			k.esc.Release(j.ID, j.Client, price)
			refund.Add(refund, price)
			k.slash(j, stage, s.Provider, k.p.FraudSlashBps, "fraud: "+outcome)
			k.jailProvider(s.Provider, k.ctx.Height+k.p.ProviderJailBlocks, true, "wrong result for job "+strconv.FormatUint(j.ID, 10))
			k.ver.UpdateReputation(s.Provider, func(r *verifier.Reputation) { r.Done++; r.Lost++ })
		default:
			k.esc.Release(j.ID, j.Client, price)
			refund.Add(refund, price)
			if s.Revealed {
				k.ver.UpdateReputation(s.Provider, func(r *verifier.Reputation) { r.Done++ })
			}
		}
	}
	t.Status = verifier.TaskSettled
	t.Verdict = verdict
	k.ver.SetTask(j.ID, stage, t)
	j.Paid.Add(j.Paid, paid)
	j.Refunded.Add(j.Refunded, refund)
	j.Settled++
	if decided {
		j.Verified++
	}
	k.setJob(j)
	k.emit(EventTaskSettled{Job: j.ID, Stage: stage, Outcome: outcome, Result: verdict, Paid: paid, Refund: refund})
	if j.Settled == j.Stages {
		k.complete(j)
		return
	}
	if j.Kind == KindPipeline {
		k.advance(j, stage, decided, verdict)
	}
}

// advance moves a pipeline on once stage has settled. On a decided result
// the next stage opens now, with that result as its input: a fresh execute
// window, then a verify window. Without one, no later stage has an input:
// the next settles "no_input" (refunding its slots), which settles the one
// after it the same way, and so on to the last, which completes the job.
// The validator fee stays pro rata to the verified stages.
func (k *Keeper) advance(j *Job, stage uint16, decided bool, verdict types.Hash) {
	next := stage + 1
	if next >= j.Stages {
		return
	}
	t, ok := k.ver.GetTask(j.ID, next)
	if !ok || t.Status != verifier.TaskWaiting {
		// Not reached: close expires a pipeline with an unawarded stage,
		// and a stage leaves waiting only here (StageInvariant checks).
		return
	}
	if !decided {
		k.settle(j, next, t, "no_input", types.Hash{})
		return
	}
	t.Status = verifier.TaskExecuting
	t.CommitDeadline = k.ctx.Height + j.Windows.Execute
	t.RevealDeadline = t.CommitDeadline + j.Windows.Verify
	k.ver.SetTask(j.ID, next, t)
	k.schedule(t.CommitDeadline, j.ID, next, deadlineCommit)
	k.schedule(t.RevealDeadline, j.ID, next, deadlineReveal)
	k.emit(EventStageOpened{Job: j.ID, Stage: next, Input: verdict, CommitDeadline: t.CommitDeadline, RevealDeadline: t.RevealDeadline})
}

// complete pays the validator fee pro rata to the stages settled on a
// verified result (a job that delivered nothing pays none) and returns what
// is left of the escrow to the client.
func (k *Keeper) complete(j *Job) {
	fee := new(uint256.Int).Mul(j.ValidatorFee, uint256.NewInt(uint64(j.Verified)))
	fee.Div(fee, uint256.NewInt(uint64(j.Stages)))
	k.esc.ReleaseToFeePool(j.ID, fee)
	j.FeePaid = true
	rest := k.esc.Locked(j.ID)
	k.esc.Release(j.ID, j.Client, rest)
	j.Refunded.Add(j.Refunded, rest)
	k.setState(j, JobCompleted)
	k.setJob(j)
	k.emit(EventJobCompleted{Job: j.ID, Paid: j.Paid, Refunded: j.Refunded, Compensated: j.Compensated, ValidatorFee: fee})
}

// ---- end of block ----

// EndBlock runs every deadline due at this height, in key order: bid
// windows closing, auctions closing, commit and reveal windows of tasks,
// dispute windows.
func (k *Keeper) EndBlock() {
	type due struct {
		key   []byte
		job   uint64
		stage uint16
		kind  byte
	}
	var list []due
	end := cat([]byte{prefixSchedule}, be64(k.ctx.Height+1))
	k.kv.Iterate([]byte{prefixSchedule}, end, func(key, _ []byte) bool {
		list = append(list, due{bytes.Clone(key), binary.BigEndian.Uint64(key[9:17]), binary.BigEndian.Uint16(key[17:19]), key[19]})
		return false
	})
	for _, d := range list {
		k.kv.Delete(d.key)
		j, ok := GetJob(k.kv, d.job)
		if !ok || !j.State.Open() {
			continue
		}
		switch d.kind {
		case deadlineBidEnd:
			if j.State == JobBidding {
				k.setState(j, JobRevealing)
				k.setJob(j)
				k.emit(EventJobRevealing{Job: j.ID, RevealEnd: j.RevealEnd})
			}
		case deadlineClose:
			if j.State == JobBidding || j.State == JobRevealing {
				k.close(j)
			}
		case deadlineCommit:
			if t, ok := k.ver.GetTask(j.ID, d.stage); ok {
				k.commitDeadline(j, d.stage, t)
			}
		case deadlineReveal:
			if t, ok := k.ver.GetTask(j.ID, d.stage); ok && t.Status == verifier.TaskExecuting && t.RevealDeadline == k.ctx.Height {
				k.evaluate(j, d.stage, t, true)
			}
		case deadlineDispute:
			if t, ok := k.ver.GetTask(j.ID, d.stage); ok && t.Status == verifier.TaskDisputed && t.DisputeDeadline == k.ctx.Height {
				k.settle(j, d.stage, t, "unresolved", types.Hash{})
			}
		}
	}
}

// ---- invariants ----

// EscrowInvariant checks every job's escrow against what it still owes,
// exactly: an open job holds its unpaid validator fee, its bid deposits
// (before the close), r × cap per stage (before the close), and the
// clearing price of every live slot of every unsettled task (after); a
// closed job holds nothing.
func EscrowInvariant(r store.KV) error {
	esc := escrow.NewKeeper(r)
	ver := verifier.NewKeeper(r)
	var bad error
	store.IteratePrefix(r, []byte{prefixJob}, func(_, value []byte) bool {
		var j Job
		decode(value, &j, "job")
		want := new(uint256.Int)
		switch {
		case !j.State.Open():
		case j.State == JobBidding || j.State == JobRevealing:
			want.Add(j.ValidatorFee, j.MaxPayout())
			for _, b := range Bids(r, j.ID) {
				want.Add(want, b.Deposit)
			}
		default:
			if !j.FeePaid {
				want.Add(want, j.ValidatorFee)
			}
			for s := uint16(0); s < j.Stages; s++ {
				t, ok := ver.GetTask(j.ID, s)
				if !ok || t.Status == verifier.TaskSettled {
					continue
				}
				n := uint256.NewInt(uint64(liveSlots(t)))
				want.Add(want, n.Mul(n, j.Prices[s]))
			}
		}
		if have := esc.Locked(j.ID); !have.Eq(want) {
			bad = fmt.Errorf("escrow invariant broken: job %d (%s) holds %s, owes %s", j.ID, j.State, have.Dec(), want.Dec())
			return true
		}
		return false
	})
	return bad
}

// StageInvariant checks that a pipeline's stages run one after another: a
// waiting task belongs to a running pipeline job, is not stage 0, has no
// commitment, reveal, deadline, verdict or vote, and waits on a stage that
// has not settled; a pipeline stage past waiting follows a settled stage.
// No other job has a waiting task.
func StageInvariant(r store.KV) error {
	ver := verifier.NewKeeper(r)
	var bad error
	store.IteratePrefix(r, []byte{prefixJob}, func(_, value []byte) bool {
		var j Job
		decode(value, &j, "job")
		fail := func(s uint16, f string, a ...any) bool {
			bad = fmt.Errorf("stage invariant broken: job %d (%s %s) stage %d: %s", j.ID, j.Kind, j.State, s, fmt.Sprintf(f, a...))
			return true
		}
		var prev *verifier.Task
		for s := uint16(0); s < j.Stages; s++ {
			t, ok := ver.GetTask(j.ID, s)
			switch {
			case !ok:
			case t.Status == verifier.TaskWaiting:
				if j.Kind != KindPipeline || s == 0 || j.State != JobRunning {
					return fail(s, "waiting, which only a running pipeline's later stages may be")
				}
				for i := range t.Slots {
					if t.Slots[i].Committed || t.Slots[i].Revealed {
						return fail(s, "waiting, yet %s committed a result", t.Slots[i].Provider)
					}
				}
				if t.CommitDeadline != 0 || t.RevealDeadline != 0 || t.DisputeDeadline != 0 || t.Verdict != (types.Hash{}) || len(ver.Votes(j.ID, s)) != 0 {
					return fail(s, "waiting, yet it has deadlines, a verdict or votes")
				}
				if prev == nil || prev.Status == verifier.TaskSettled {
					return fail(s, "waiting on stage %d, which is settled or missing", s-1)
				}
			case j.Kind == KindPipeline && s > 0 && (prev == nil || prev.Status != verifier.TaskSettled):
				return fail(s, "%s before stage %d settled", t.Status, s-1)
			}
			prev = t
		}
		return false
	})
	return bad
}
