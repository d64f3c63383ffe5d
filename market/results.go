package market

import (
	"bytes"
	"encoding/binary"
	"strconv"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
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
	if j.State == JobBidding || j.State == JobRevealing {
		return types.ErrWrongPhase.Wrapf("job %d is %s: it takes results once it runs (when every task is awarded, at the latest after the close at height %d)", j.ID, j.State, j.RevealEnd)
	}
	t, err := k.ver.Commit(m.Job, m.Stage, from, m.Commitment, k.ctx.Height)
	if err != nil {
		return err
	}
	k.emit(EventResultCommitted{Job: m.Job, Stage: m.Stage, Provider: from, RevealsOpen: t.AllCommitted()})
	if allAnswered(t) {
		k.openVote(j, m.Stage, t, verifier.TaskInputCheck, nil)
	}
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
	if j.Kind == KindSplit {
		return types.ErrInvalidMsg.Wrapf("job %d is a %s job: reveal its transcript with reveal-transcript (MsgRevealTranscript)", j.ID, j.Kind)
	}
	if j.Kind == KindFinetune {
		return types.ErrInvalidMsg.Wrapf("job %d is a %s job: reveal its checkpoint root with reveal-finetune (MsgRevealFinetune)", j.ID, j.Kind)
	}
	t, err := k.ver.Reveal(m.Job, m.Stage, from, m.Result, m.Salt, k.ctx.Height)
	if err != nil {
		return err
	}
	k.emit(EventResultRevealed{Job: m.Job, Stage: m.Stage, Provider: from, Result: m.Result})
	k.evaluate(j, m.Stage, t, false)
	return nil
}

// ReportInput records an assigned provider's report that it could not get
// or use its task's input. A reported slot is not a no-show: once every
// live slot has committed or reported (or at the commit deadline), the
// validators check the input (TaskInputCheck). A slot whose report was
// already checked (the input was found available) cannot report again.
func (k *Keeper) ReportInput(from types.Address, m *verifier.MsgReportInput) error {
	j, t, ok, err := k.jobTask(m.Job, m.Stage)
	if err != nil {
		return err
	}
	if !ok {
		return types.ErrUnknownJob.Wrapf("job %d stage %d has no task: it was not awarded", j.ID, m.Stage)
	}
	if j.Kind == KindSplit {
		return types.ErrInvalidMsg.Wrapf("job %d is a %s job: a stage that got no input commits and reveals an empty transcript (0 steps)", j.ID, j.Kind)
	}
	i := t.SlotOf(from)
	switch {
	case t.Status != verifier.TaskExecuting:
		return types.ErrWrongPhase.Wrapf("job %d stage %d is %s: input reports are taken while it executes", j.ID, m.Stage, t.Status)
	case i < 0:
		return types.ErrUnauthorized.Wrapf("%s is not assigned to job %d stage %d", from, j.ID, m.Stage)
	case t.Slots[i].Committed:
		return types.ErrWrongPhase.Wrapf("%s already committed a result for job %d stage %d", from, j.ID, m.Stage)
	case t.Slots[i].InputReport != 0:
		return types.ErrDuplicate.Wrapf("%s already reported the input of job %d stage %d", from, j.ID, m.Stage)
	case t.Slots[i].Checked:
		return types.ErrWrongPhase.Wrapf("the validators found the input of job %d stage %d available and serve it: fetch it from them and commit a result", j.ID, m.Stage)
	case k.ctx.Height > t.CommitDeadline:
		return types.ErrWrongPhase.Wrapf("the commit window of job %d stage %d closed at height %d (now %d)", j.ID, m.Stage, t.CommitDeadline, k.ctx.Height)
	}
	t.Slots[i].InputReport = m.Reason
	k.setTask(j, m.Stage, t)
	k.emit(EventInputReported{Job: j.ID, Stage: m.Stage, Provider: from, Reason: verifier.InputReasonName(m.Reason)})
	if allAnswered(t) {
		k.openVote(j, m.Stage, t, verifier.TaskInputCheck, nil)
	}
	return nil
}

// jobTask reads a job and one stage's task (ok false: not awarded),
// refusing an unknown job or a stage it does not have.
func (k *Keeper) jobTask(id uint64, stage uint16) (*Job, *verifier.Task, bool, error) {
	j, err := k.job(id)
	if err != nil {
		return nil, nil, false, err
	}
	if err := k.checkStage(j, stage); err != nil {
		return nil, nil, false, err
	}
	t, ok := k.ver.GetTask(j.ID, stage)
	return j, t, ok, nil
}

// allAnswered reports whether every live slot has committed or reported,
// at least one having reported: the input check need not wait for the
// commit deadline.
func allAnswered(t *verifier.Task) bool {
	reported := false
	for i := range t.Slots {
		s := &t.Slots[i]
		if !s.Live() {
			continue
		}
		if !s.Committed && s.InputReport == 0 {
			return false
		}
		reported = reported || s.InputReport != 0
	}
	return reported
}

// RevealCanary shows that a job is the sender's canary and claims its known
// answer for a stage whose providers all revealed. The claim is one more
// result: equal to the agreed one, the task settles at once; different,
// the validators vote (a dispute), and a claim the vote rejects costs the
// poster fraud_slash_bps of its stake and a jail term. Only an active
// validator (bonded, unjailed, with power) can make the claim, and slash
// compensation of a canary job is burned.
func (k *Keeper) RevealCanary(from types.Address, m *verifier.MsgRevealCanary) error {
	j, t, ok, err := k.jobTask(m.Job, m.Stage)
	if err != nil {
		return err
	}
	switch {
	case j.Kind == KindFinetune:
		return types.ErrInvalidMsg.Wrapf("job %d is a %s job: its results are checked by the step-bisection games, not by canary answers", j.ID, j.Kind)
	case len(m.StageHashes) != int(j.Stages):
		return types.ErrInvalidMsg.Wrapf("job %d has %d stages, the reveal gives %d stage hashes", j.ID, j.Stages, len(m.StageHashes))
	case verifier.CanarySeal(from, m.StageHashes) != j.Seal:
		return types.ErrCommitMismatch.Wrapf("hash(%s, stage hashes) is not job %d's seal: it is not your canary", from, j.ID)
	case verifier.CanaryStageHash(m.Answer, m.Salt) != m.StageHashes[m.Stage]:
		return types.ErrCommitMismatch.Wrapf("hash(answer %x, salt) is not stage %d's hash in the canary", m.Answer, m.Stage)
	}
	if _, active := k.activeValidator(from); !active {
		return types.ErrUnauthorized.Wrapf("%s is not an active validator (bonded at least the minimum, not jailed, with power): only those may claim a canary answer", from)
	}
	switch {
	case !ok:
		return types.ErrWrongPhase.Wrapf("job %d stage %d has no task: it was not awarded", j.ID, m.Stage)
	case t.CanaryBy != (types.Address{}):
		return types.ErrDuplicate.Wrapf("the canary answer of job %d stage %d is already claimed", j.ID, m.Stage)
	case t.Status == verifier.TaskConfirming && k.ctx.Height <= t.ConfirmBy:
	case t.Status == verifier.TaskDisputed && k.ctx.Height <= t.VoteCommitEnd:
	default:
		return types.ErrWrongPhase.Wrapf("job %d stage %d is %s: a canary answer is claimed after every provider revealed (while the task confirms, until height %d) or while its dispute takes sealed votes", j.ID, m.Stage, t.Status, t.ConfirmBy)
	}
	t.Canary, t.CanaryBy = m.Answer, from
	j.CanaryBy = from
	k.setJob(j)
	k.emit(EventCanaryRevealed{Job: j.ID, Stage: m.Stage, Validator: from, Answer: m.Answer})
	if t.Status == verifier.TaskDisputed {
		k.setTask(j, m.Stage, t)
		return nil
	}
	agreed := t.Revealed()[0]
	if agreed == m.Answer {
		k.settle(j, m.Stage, t, "agreed", agreed)
		return nil
	}
	k.openVote(j, m.Stage, t, verifier.TaskDisputed, []types.Hash{agreed, m.Answer})
	return nil
}

// activeValidator returns operator's power if it is an active validator:
// a record, not jailed or tombstoned, stake at least the minimum, and power
// reported to CometBFT. Records below that have no validator privilege.
func (k *Keeper) activeValidator(op types.Address) (int64, bool) {
	v, ok := k.esc.GetValidator(op)
	if !ok || v.Jailed || v.Tombstoned || k.esc.Power(k.sp, op, v) == 0 {
		return 0, false
	}
	p := k.esc.ReportedPower(v.PubKey)
	return p, p > 0
}

// activeValidators lists the active validators in operator order, with
// their power (at most max_validators entries).
func (k *Keeper) activeValidators() (ops []types.Address, powers []int64, total int64) {
	var all []types.Address
	k.esc.IterateValidators(func(op types.Address, _ *escrow.Validator) bool { all = append(all, op); return false })
	for _, op := range all {
		if p, ok := k.activeValidator(op); ok {
			ops, powers = append(ops, op), append(powers, p)
			total += p
		}
	}
	return ops, powers, total
}

// openVote puts a task to the validators: a dispute over the revealed
// results (and a canary claim), or an input check. Sealed votes are taken
// for the first half of dispute_blocks, opened until its end.
func (k *Keeper) openVote(j *Job, stage uint16, t *verifier.Task, status verifier.TaskStatus, results []types.Hash) {
	ops, powers, _ := k.activeValidators()
	k.ver.SetVoters(j.ID, stage, ops, powers)
	t.Status = status
	t.VoteCommitEnd = k.ctx.Height + max(1, k.p.DisputeBlocks/2)
	t.DisputeDeadline = k.ctx.Height + k.p.DisputeBlocks
	k.setTask(j, stage, t)
	k.schedule(t.DisputeDeadline, j.ID, stage, deadlineDispute)
	if status == verifier.TaskInputCheck {
		var reporters []string
		for i := range t.Slots {
			if t.Slots[i].Live() && t.Slots[i].InputReport != 0 {
				reporters = append(reporters, t.Slots[i].Provider.Hex())
			}
		}
		k.emit(EventInputCheckOpened{Job: j.ID, Stage: stage, Reporters: reporters, SealBy: t.VoteCommitEnd, Deadline: t.DisputeDeadline})
		return
	}
	names := make([]string, len(results))
	for i, r := range results {
		names[i] = r.Hex()
	}
	k.emit(EventDisputeOpened{Job: j.ID, Stage: stage, Results: names, SealBy: t.VoteCommitEnd, Deadline: t.DisputeDeadline})
}

// CommitVote seals an active validator's vote on a dispute or input check.
func (k *Keeper) CommitVote(from types.Address, m *verifier.MsgCommitVote) error {
	j, t, ok, err := k.jobTask(m.Job, m.Stage)
	if err != nil {
		return err
	}
	if ok && t.Status.Voting() && k.ver.VoterPower(j.ID, m.Stage, from) == 0 {
		return types.ErrUnauthorized.Wrapf("%s is not in the voter set of job %d stage %d: the active validators when the vote opened vote", from, j.ID, m.Stage)
	}
	switch {
	case !ok || !t.Status.Voting():
		return types.ErrWrongPhase.Wrapf("job %d stage %d is not in dispute or input check", j.ID, m.Stage)
	case k.ctx.Height > t.VoteCommitEnd:
		return types.ErrWrongPhase.Wrapf("sealed votes on job %d stage %d closed at height %d (now %d)", j.ID, m.Stage, t.VoteCommitEnd, k.ctx.Height)
	}
	if err := k.ver.SealVote(j.ID, m.Stage, from, m.Commitment); err != nil {
		return err
	}
	k.emit(EventVoteSealed{Job: j.ID, Stage: m.Stage, Validator: from})
	return nil
}

// VoteDispute opens a validator's sealed vote, once every active validator
// has sealed or the sealing phase is over. When every sealed vote is open
// the vote ends at once; otherwise at the dispute deadline.
func (k *Keeper) VoteDispute(from types.Address, m *verifier.MsgVoteDispute) error {
	j, t, ok, err := k.jobTask(m.Job, m.Stage)
	if err != nil {
		return err
	}
	switch {
	case !ok || !t.Status.Voting():
		return types.ErrWrongPhase.Wrapf("job %d stage %d is not in dispute or input check", j.ID, m.Stage)
	case k.ctx.Height > t.DisputeDeadline:
		return types.ErrWrongPhase.Wrapf("voting on job %d stage %d closed at height %d", j.ID, m.Stage, t.DisputeDeadline)
	case k.ctx.Height <= t.VoteCommitEnd && !k.allSealed(j.ID, m.Stage):
		return types.ErrWrongPhase.Wrapf("votes on job %d stage %d are opened once every active validator has sealed one or after height %d", j.ID, m.Stage, t.VoteCommitEnd)
	}
	if err := k.ver.OpenVote(j.ID, m.Stage, from, m.Result, m.Salt); err != nil {
		return err
	}
	power := k.ver.VoterPower(j.ID, m.Stage, from)
	k.emit(EventDisputeVoted{Job: j.ID, Stage: m.Stage, Validator: from, Result: m.Result, Power: uint64(power)})
	if k.allOpened(j.ID, m.Stage) {
		k.endVote(j, m.Stage, t)
	}
	return nil
}

func (k *Keeper) allSealed(job uint64, stage uint16) bool {
	ops, _, _ := k.ver.Voters(job, stage)
	for _, op := range ops {
		if !k.ver.VoteSealed(job, stage, op) {
			return false
		}
	}
	return true
}

// allOpened: every voter sealed a vote and opened it.
func (k *Keeper) allOpened(job uint64, stage uint16) bool {
	ops, _, _ := k.ver.Voters(job, stage)
	votes := k.ver.Votes(job, stage)
	for _, op := range ops {
		if !hasVote(votes, op) {
			return false
		}
	}
	return true
}

func hasVote(votes []verifier.Vote, op types.Address) bool {
	_, ok := voteOf(votes, op)
	return ok
}

func voteOf(votes []verifier.Vote, op types.Address) (types.Hash, bool) {
	for _, v := range votes {
		if v.Validator == op {
			return v.Result, true
		}
	}
	return types.Hash{}, false
}

// endVote decides a vote: the hash more than 2/3 of the voter set's power
// opened, if any (the voter set: the active validators when the vote
// opened, with their power then). Voters that opened no vote, or voted against
// a decided outcome (Abstain aside, and InputBad against InputAvailable: a
// validator that could not fetch an input others fetched is unpaid, not
// slashed), are slashed vote_slash_bps; those that voted with it share the
// stage's validator fee by power. Then a dispute
// settles on the verdict (or "unresolved"), and an input check reopens the
// task (input available: the validators serve it), settles "bad_input"
// (the client pays the reservations) or "no_input" (undecided).
func (k *Keeper) endVote(j *Job, stage uint16, t *verifier.Task) {
	ops, powers, total := k.ver.Voters(j.ID, stage)
	votes := k.ver.Votes(j.ID, stage)
	power := func(op types.Address) int64 {
		for i, o := range ops {
			if o == op {
				return powers[i]
			}
		}
		return 0
	}
	verdict, decided := k.ver.Tally(j.ID, stage, power, total)
	if decided && t.Status == verifier.TaskInputCheck && verdict != verifier.InputAvailable && verdict != verifier.InputBad {
		decided = false // an input check has two answers
	}
	var with []types.Address
	var withPower []int64
	var withTotal int64
	for i, op := range ops {
		v, voted := voteOf(votes, op)
		switch {
		case !voted:
			k.slashValidator(j, stage, op, k.p.VoteSlashBps, "missed the vote on job "+strconv.FormatUint(j.ID, 10))
		case decided && v == verdict:
			with, withPower, withTotal = append(with, op), append(withPower, powers[i]), withTotal+powers[i]
		case decided && t.Status == verifier.TaskInputCheck && verdict == verifier.InputAvailable && v == verifier.InputBad:
			// "I could not fetch it" against validators that did: a
			// statement about its own reach nobody can check, so unpaid,
			// not slashed (docs/design-notes.md, input checks).
		case decided && v != verifier.Abstain:
			k.slashValidator(j, stage, op, k.p.VoteSlashBps, "voted against the outcome of job "+strconv.FormatUint(j.ID, 10))
		}
	}
	if decided {
		k.payVoters(j, stage, t, with, withPower, withTotal)
	}
	if t.Status == verifier.TaskDisputed {
		switch {
		case decided && t.Audit != "" && agreeing(t, verdict) > 0:
			k.settle(j, stage, t, OutcomeAudited, verdict) // short.go
		case decided:
			k.settle(j, stage, t, "verdict", verdict)
		case t.Audit == verifier.AuditRandom:
			// r results agreed; the audit that was to check them did not
			// conclude: the agreement stands (audit.go).
			k.settle(j, stage, t, "agreed", t.Revealed()[0])
		default:
			k.settle(j, stage, t, "unresolved", types.Hash{})
		}
		return
	}
	switch {
	case decided && verdict == verifier.InputAvailable:
		k.reopen(j, stage, t)
	case decided:
		k.settle(j, stage, t, "bad_input", verdict)
	default:
		k.settle(j, stage, t, "no_input", types.Hash{})
	}
}

// payVoters pays the stage's share of the validator fee to the validators
// that voted with the outcome, by power; the rounding remainder goes to the
// fee pool. A stage pays its share once.
func (k *Keeper) payVoters(j *Job, stage uint16, t *verifier.Task, ops []types.Address, powers []int64, total int64) {
	if t.FeePaid {
		return
	}
	share := j.stageFee()
	paid := new(uint256.Int)
	for i, op := range ops {
		amt := new(uint256.Int).Mul(share, uint256.NewInt(uint64(powers[i])))
		amt.Div(amt, uint256.NewInt(uint64(total)))
		k.esc.Release(j.ID, op, amt)
		paid.Add(paid, amt)
	}
	k.esc.ReleaseToFeePool(j.ID, new(uint256.Int).Sub(share, paid))
	t.FeePaid = true
	j.FeeSpent = new(uint256.Int).Add(j.feeSpent(), share)
	k.setJob(j)
	k.emit(EventVotersPaid{Job: j.ID, Stage: stage, Amount: paid, Voters: uint64(len(ops))})
}

// reopen gives the reporters of an input the validators found available a
// fresh execute and verify window (the validators serve the input), if it
// fits before the job's expiry (as for a backup); else the task settles
// "no_input" with nobody slashed.
func (k *Keeper) reopen(j *Job, stage uint16, t *verifier.Task) {
	ev := j.Windows.Execute + j.Windows.Verify
	var later uint64
	if j.Kind == KindPipeline {
		later = uint64(j.Stages-1-stage) * (ev + k.p.DisputeBlocks)
	}
	if k.ctx.Height+ev+later > j.Expiry {
		k.settle(j, stage, t, "no_input", types.Hash{})
		return
	}
	for i := range t.Slots {
		if t.Slots[i].InputReport != 0 {
			t.Slots[i].InputReport, t.Slots[i].Checked = 0, true
		}
	}
	k.ver.ClearVotes(j.ID, stage) // a later dispute of the task votes afresh
	t.Status = verifier.TaskExecuting
	t.CommitDeadline = k.ctx.Height + j.Windows.Execute
	t.RevealDeadline = t.CommitDeadline + j.Windows.Verify
	t.VoteCommitEnd, t.DisputeDeadline = 0, 0
	k.setTask(j, stage, t)
	k.schedule(t.CommitDeadline, j.ID, stage, deadlineCommit)
	k.schedule(t.RevealDeadline, j.ID, stage, deadlineReveal)
	k.emit(EventInputAvailable{Job: j.ID, Stage: stage, CommitDeadline: t.CommitDeadline, RevealDeadline: t.RevealDeadline})
}

// evaluate decides a task whose reveals are all in (or whose reveal window
// has closed, atDeadline): agreement waits canary_blocks (TaskConfirming),
// disagreement opens a dispute, no result settles "no_results".
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
	results := t.Revealed()
	switch len(results) {
	case 0:
		k.settle(j, stage, t, "no_results", types.Hash{})
	case 1:
		if agreeing(t, results[0]) < int(j.Redundancy) {
			k.shortResult(j, stage, t, results[0]) // short.go
			return
		}
		k.confirm(j, stage, t, results[0])
	default:
		if j.Kind == KindFinetune {
			k.openGames(j, stage, t, results)
			return
		}
		k.openVote(j, stage, t, verifier.TaskDisputed, results)
	}
}

// confirm starts an agreed task's canary window: at ConfirmBy it is drawn
// for a random audit or settles on result (audit.go), unless a canary
// claim contests it first.
func (k *Keeper) confirm(j *Job, stage uint16, t *verifier.Task, result types.Hash) {
	t.Status = verifier.TaskConfirming
	t.ConfirmBy = k.ctx.Height + k.p.CanaryBlocks
	t.DrawAt = k.ctx.Height // audit.go
	k.setTask(j, stage, t)
	k.schedule(t.ConfirmBy, j.ID, stage, deadlineConfirm)
	k.emit(EventTaskConfirming{Job: j.ID, Stage: stage, Result: result, SettlesAt: t.ConfirmBy})
}

// noShow marks slot i dead: a light slash (burned: nobody is paid for
// another's missed deadline), jail, reputation.
func (k *Keeper) noShow(j *Job, stage uint16, t *verifier.Task, i int, missed string) {
	s := &t.Slots[i]
	s.NoShow = true
	k.emit(EventNoShow{Job: j.ID, Stage: stage, Provider: s.Provider, Missed: missed})
	k.noShowPenalty(j, stage, s.Provider, "missed the "+missed+" deadline of job "+strconv.FormatUint(j.ID, 10))
}

// noShowPenalty is what a no-show costs its provider: no_show_slash_bps
// of its stake, burned (never paid to the client: nobody gains by
// another's absence), a jail term, and a no-show in its reputation.
func (k *Keeper) noShowPenalty(j *Job, stage uint16, addr types.Address, why string) {
	k.slash(j, stage, addr, k.p.NoShowSlashBps, "no-show", false)
	k.jailProvider(addr, k.ctx.Height+k.p.ProviderJailBlocks, false, why)
	k.ver.UpdateReputation(addr, func(r *verifier.Reputation) { r.NoShows++ })
}

// slash takes bps of a provider's stake. With compensate, compensation_bps
// of it goes to the job's client, unless the job is a canary (its poster
// is never paid for the slashes it brings about); the rest is burned.
func (k *Keeper) slash(j *Job, stage uint16, addr types.Address, bps uint64, reason string, compensate bool) {
	to := j.Client
	if !compensate || j.CanaryBy != (types.Address{}) {
		to = types.Address{}
	}
	res := k.esc.Slash(addr, bps, to, k.p.CompensationBps)
	j.Compensated.Add(j.Compensated, res.Compensation)
	k.emit(EventSlashed{Account: addr, Job: j.ID, Stage: stage, Amount: res.Slashed, Compensation: res.Compensation, Burned: res.Burned, Reason: reason})
}

// slashValidator burns bps of a validator's stake and, for a false canary
// claim, jails it.
func (k *Keeper) slashValidator(j *Job, stage uint16, op types.Address, bps uint64, reason string) {
	res := k.esc.Slash(op, bps, types.Address{}, 0)
	k.emit(EventSlashed{Account: op, Job: j.ID, Stage: stage, Amount: res.Slashed, Compensation: res.Compensation, Burned: res.Burned, Reason: reason})
}

// commitDeadline handles the end of a task's commit window: providers that
// did not commit or report their input are no-shows; each such slot goes
// to the next eligible backup bid if a fresh execute and verify window
// still fits before the job's expiry (for a pipeline stage: with the worst
// case of every later stage after it), else its payment is refunded to
// the client. If a provider reported its input, the validators check it.
func (k *Keeper) commitDeadline(j *Job, stage uint16, t *verifier.Task) {
	if t.Status != verifier.TaskExecuting {
		return
	}
	price := j.Prices[stage]
	ev := j.Windows.Execute + j.Windows.Verify
	var later uint64 // PostJob bounded the job's life, so none of this overflows
	if j.Kind == KindPipeline {
		later = uint64(j.Stages-1-stage) * (ev + k.p.DisputeBlocks)
	}
	// A split slot is replaced only on its client's order, before this
	// deadline (ReplaceStage: the replacement replays the input
	// transcript); a split no-show here has its payment refunded.
	reassignable := k.ctx.Height+ev+later <= j.Expiry && j.Kind != KindSplit
	var reassigned, reported bool
	n := len(t.Slots)
	for i := 0; i < n; i++ {
		if !t.Slots[i].Live() || t.Slots[i].Committed {
			continue
		}
		if t.Slots[i].InputReport != 0 {
			reported = true
			continue
		}
		from := t.Slots[i].Provider
		k.noShow(j, stage, t, i, "commit")
		var to types.Address
		for reassignable && len(t.Backups) > 0 && to == (types.Address{}) {
			cand := t.Backups[0]
			t.Backups = t.Backups[1:]
			if !t.Assigned(cand) && EligibleStage(k.kv, k.ctx.Params, k.ctx.Height, j, stage, cand) == nil {
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
	k.setTask(j, stage, t)
	k.setJob(j)
	switch {
	case reported:
		k.openVote(j, stage, t, verifier.TaskInputCheck, nil)
	case liveSlots(t) == 0 && j.Kind != KindSplit: // a split job's stages settle together (splitSettle)
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

// settle closes a task on an outcome:
//
//   - "agreed", "verdict" or "audited" (short.go): live revealed slots
//     matching the result are
//     paid the clearing price and gain reputation; those that differ are
//     fraud (slashed, tombstoned); a canary claim the verdict rejects costs
//     its validator fraud_slash_bps and a jail term;
//   - "bad_input": the validators found the client's input missing or not
//     what the job declares: every live slot is paid its price, the
//     reservation the client wasted (for a pipeline stage after the first,
//     whose input is not the client's, it is refunded instead);
//   - "unresolved", "no_results", "no_input" and "unverified" (short.go):
//     nobody is paid, every live slot is refunded.
//
// An agreed stage pays its share of the validator fee to the fee pool (a
// voted one paid it to its voters). A pipeline then moves on (advance).
func (k *Keeper) settle(j *Job, stage uint16, t *verifier.Task, outcome string, verdict types.Hash) {
	price := j.Prices[stage]
	paid, refund := new(uint256.Int), new(uint256.Int)
	decided := outcome == "agreed" || outcome == "verdict" || outcome == OutcomeAudited
	reserve := outcome == "bad_input" && (j.Kind != KindPipeline || stage == 0)
	for i := range t.Slots {
		s := &t.Slots[i]
		if !s.Live() {
			continue // a no-show's payment was refunded or moved to its backup
		}
		switch {
		case decided && s.Revealed && s.Result == verdict, reserve:
			k.esc.Release(j.ID, s.Provider, price)
			paid.Add(paid, price)
			via := PaidViaJob
			if !decided {
				via = PaidViaReservation
			}
			k.emit(EventProviderPaid{Provider: s.Provider, Job: j.ID, Stage: stage, Amount: price.Clone(), Via: via})
			if decided {
				k.ver.UpdateReputation(s.Provider, func(r *verifier.Reputation) { r.CreditAgreed(price, k.p.MinReputationPayment) })
			}
		case decided && s.Revealed:
			k.esc.Release(j.ID, j.Client, price)
			refund.Add(refund, price)
			k.fraudSlash(j, stage, s.Provider, "fraud: "+outcome) // deterrence.go
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
	if outcome == "verdict" && t.CanaryBy != (types.Address{}) && t.Canary != verdict {
		k.slashValidator(j, stage, t.CanaryBy, k.p.FraudSlashBps, "false canary answer for job "+strconv.FormatUint(j.ID, 10))
		until := k.ctx.Height + k.sp.ValidatorJailBlocks
		k.esc.Jail(t.CanaryBy, until, false)
		k.emit(escrow.EventValidatorJailed{Operator: t.CanaryBy, Until: until, Reason: "false canary answer for job " + strconv.FormatUint(j.ID, 10), Slashed: new(uint256.Int)})
	}
	if outcome == "agreed" {
		k.payStageFee(j, t)
	}
	// Verified: a decided result some provider delivered (a verdict that
	// rejects every revealed result settles the stage, but the client
	// has no result to use).
	if k.closeTask(j, stage, t, outcome, verdict, paid, refund, decided && !paid.IsZero()) {
		return
	}
	if j.Kind == KindSplit {
		k.splitRelease(j, stage, decided, verdict) // the stages held after a disputed one
	}
	if j.Kind == KindPipeline {
		k.advance(j, stage, decided, verdict)
	}
}

// payStageFee pays the stage's share of the validator fee to the fee
// pool, once (a stage decided by a vote paid it to its voters instead).
func (k *Keeper) payStageFee(j *Job, t *verifier.Task) {
	if t.FeePaid {
		return
	}
	share := j.stageFee()
	k.esc.ReleaseToFeePool(j.ID, share)
	t.FeePaid = true
	j.FeeSpent = new(uint256.Int).Add(j.feeSpent(), share)
}

// closeTask records that a task settled on outcome (verified: on a
// verified result) with what it paid and refunded, and completes the job
// when it was its last stage (reported true).
func (k *Keeper) closeTask(j *Job, stage uint16, t *verifier.Task, outcome string, verdict types.Hash, paid, refund *uint256.Int, verified bool) bool {
	t.Status = verifier.TaskSettled
	t.Verdict = verdict
	t.Outcome = outcome
	k.setTask(j, stage, t)
	j.Paid.Add(j.Paid, paid)
	j.Refunded.Add(j.Refunded, refund)
	j.Settled++
	if verified {
		j.Verified++
	}
	k.setJob(j)
	k.emit(EventTaskSettled{Job: j.ID, Stage: stage, Outcome: outcome, Result: verdict, Paid: paid, Refund: refund})
	if j.Settled == j.Stages {
		k.complete(j)
		return true
	}
	return false
}

// advance moves a pipeline on once stage has settled. On a decided result
// the next stage opens now, with that result as its input: a fresh execute
// window, then a verify window. Without one, no later stage has an input:
// the next settles "no_input" (refunding its slots), which settles the one
// after it the same way, and so on to the last, which completes the job.
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
	k.setTask(j, next, t)
	k.schedule(t.CommitDeadline, j.ID, next, deadlineCommit)
	k.schedule(t.RevealDeadline, j.ID, next, deadlineReveal)
	k.emit(EventStageOpened{Job: j.ID, Stage: next, Input: verdict, CommitDeadline: t.CommitDeadline, RevealDeadline: t.RevealDeadline})
}

// complete returns what is left of the escrow to the client: the stages'
// fee shares were paid as they settled (a stage that delivered nothing
// pays none).
func (k *Keeper) complete(j *Job) {
	j.FeePaid = true
	rest := k.esc.Locked(j.ID)
	k.esc.Release(j.ID, j.Client, rest)
	j.Refunded.Add(j.Refunded, rest)
	k.setState(j, JobCompleted)
	k.setJob(j)
	k.emit(EventJobCompleted{Job: j.ID, Paid: j.Paid, Refunded: j.Refunded, Compensated: j.Compensated, ValidatorFee: j.feeSpent()})
}

// ---- end of block ----

// EndBlock runs the deadlines due at or before this height, in key order
// (earliest height first): bid windows closing (an auction without a
// sealed bid closes there: Job.AllRevealed), auctions closing (at the end
// of the reveal window, or of the block of the last reveal: closeEarly),
// commit and reveal windows of tasks, canary windows, votes. The work is
// bounded: each deadline costs its job's stage count in units, and once
// max_deadline_work units are spent the rest carries over to the next
// block, oldest first (a bid window's end costs 1 unless it closes the
// auction), so that no number of jobs sharing a deadline can stall a
// block. A deadline acts on the state it was scheduled for (each handler
// compares the task's deadline with the scheduled height), so a late run
// is the same run.
func (k *Keeper) EndBlock() {
	type due struct {
		key    []byte
		height uint64
		job    uint64
		stage  uint16
		kind   byte
	}
	var list []due
	var spent uint64
	deferred := false
	end := cat([]byte{prefixSchedule}, be64(k.ctx.Height+1))
	k.kv.Iterate([]byte{prefixSchedule}, end, func(key, _ []byte) bool {
		d := due{bytes.Clone(key), binary.BigEndian.Uint64(key[1:9]), binary.BigEndian.Uint64(key[9:17]), binary.BigEndian.Uint16(key[17:19]), key[19]}
		j, _ := GetJob(k.kv, d.job)
		cost := uint64(1)
		// A bid end only changes the job's state, unless the auction has
		// no sealed bid to wait for: then it closes.
		if j != nil && (d.kind != deadlineBidEnd || j.AllRevealed(d.height)) {
			cost += uint64(j.Stages)
		}
		if spent > 0 && spent+cost > k.p.MaxDeadlineWork {
			deferred = true
			return true
		}
		spent += cost
		list = append(list, d)
		return false
	})
	if deferred {
		k.emit(EventDeadlinesDeferred{Height: k.ctx.Height, Work: spent})
	}
	for _, d := range list {
		// Read again: an earlier deadline of the block may have changed it.
		j, ok := GetJob(k.kv, d.job)
		k.kv.Delete(d.key)
		if !ok || !j.State.Open() {
			continue
		}
		switch d.kind {
		case deadlineBidEnd:
			if j.State == JobBidding && j.AllRevealed(d.height) {
				// No sealed bid: nothing to reveal, nothing can come.
				k.kv.Delete(scheduleKey(j.RevealEnd, j.ID, stageNone, deadlineClose))
				k.close(j)
			} else if j.State == JobBidding {
				k.setState(j, JobRevealing)
				k.setJob(j)
				k.emit(EventJobRevealing{Job: j.ID, RevealEnd: j.RevealEnd})
			}
		case deadlineClose:
			if (j.State == JobBidding || j.State == JobRevealing) && k.poolDrawReady(j) {
				k.close(j)
			}
		case deadlineCommit:
			if t, ok := k.ver.GetTask(j.ID, d.stage); ok && t.CommitDeadline == d.height {
				k.commitDeadline(j, d.stage, t)
			}
		case deadlineReveal:
			if t, ok := k.ver.GetTask(j.ID, d.stage); ok && t.Status == verifier.TaskExecuting && t.RevealDeadline == d.height {
				k.evaluate(j, d.stage, t, true)
			}
		case deadlineDispute:
			if t, ok := k.ver.GetTask(j.ID, d.stage); ok && t.Status.Voting() && t.DisputeDeadline == d.height {
				k.endVote(j, d.stage, t)
			}
		case deadlineSplit:
			if j.Kind == KindSplit {
				k.splitRevealDeadline(j, d.height)
			}
		case deadlineHandoff:
			if j.Kind == KindSplit {
				k.splitHandoffDeadline(j, d.height)
			}
		case deadlineConfirm:
			if t, ok := k.ver.GetTask(j.ID, d.stage); ok && t.Status == verifier.TaskConfirming && t.ConfirmBy == d.height {
				k.confirmDeadline(j, d.stage, t) // audit.go
			}
		}
	}
	k.gamesEndBlock()
	k.PruneEndBlock()
}
