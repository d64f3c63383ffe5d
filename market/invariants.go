package market

// The invariants run after every block in tests (chain.CheckInvariants).

import (
	"fmt"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/finetune"
	"github.com/ogpu-network/ogpu/session"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

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
		var sess *session.Session
		if j.Kind == KindSession {
			sess, _ = session.Get(r, j.ID)
		}
		switch {
		case sess != nil:
			// The session's lanes and fee reserve while it runs, and its
			// open dispute bonds, which may outlive it (package session).
			want = sess.Owed()
		case !j.State.Open():
		case j.State == JobBidding || j.State == JobRevealing:
			want.Add(j.ValidatorFee, j.MaxPayout())
			held := depositHeld(r, &j)
			for _, b := range Bids(r, j.ID) {
				if held(&b) {
					want.Add(want, b.Deposit)
				}
			}
		default:
			if !j.FeePaid {
				want.Add(want, new(uint256.Int).Sub(j.ValidatorFee, j.feeSpent()))
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
// Before a job runs, its only tasks are pool tasks filled at their r-th
// claim (Job.Filled of them): waiting, r slots, nothing committed, no
// deadlines; a cancelled or expired job has none. No other job has a
// waiting task. A split job's stages have one slot per
// replica chain each, share their commit and reveal deadlines while they
// execute and leave executing together (the scan); at most
// MaxSplitReplacements of its slots changed hands, and no other job's did.
// Only a split stage after a disputed split stage is held.
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
		var prev, first *verifier.Task
		executing, replaced, filled := 0, 0, 0
		voting := false
		for s := uint16(0); s < j.Stages; s++ {
			t, ok := ver.GetTask(j.ID, s)
			if ok && j.State != JobRunning && j.State != JobCompleted {
				switch {
				case j.State != JobBidding && j.State != JobRevealing:
					return fail(s, "a task, yet the job is %s and never ran: it keeps none", j.State)
				case j.Mode != ModePool || j.Kind == KindSplit:
					return fail(s, "a %s task before the job runs: only a pool task filled at its r-th claim may be awarded before the close", t.Status)
				case t.Status != verifier.TaskWaiting || len(t.Slots) != int(j.Redundancy):
					return fail(s, "a filled pool task %s with %d slots before the job runs, want waiting with %d", t.Status, len(t.Slots), j.Redundancy)
				case t.CommitDeadline != 0 || t.RevealDeadline != 0 || t.DisputeDeadline != 0:
					return fail(s, "a filled pool task has deadlines before the job runs")
				}
				for i := range t.Slots {
					if t.Slots[i].Committed || t.Slots[i].Revealed {
						return fail(s, "filled, yet %s committed a result before the job runs", t.Slots[i].Provider)
					}
				}
				filled++
				continue
			}
			if ok {
				_, games := finetune.GetBracket(r, j.ID, s)
				switch {
				case t.Status == verifier.TaskGame && (j.Kind != KindFinetune || !games):
					return fail(s, "in games, yet it is no fine-tune task with a bracket")
				case games && j.Kind != KindFinetune:
					return fail(s, "a bracket of fine-tune games on a %s job", j.Kind)
				}
			}
			if ok && j.Kind == KindSplit && t.Status == verifier.TaskDisputed && t.Audit == "" {
				voting = true // the stages after a split dispute are held until its verdict
			}
			if ok && t.Status == verifier.TaskExecuting {
				executing++
				if first == nil {
					first = t
				}
			}
			if ok {
				for i := range t.Slots {
					replaced += len(t.Slots[i].Replaced)
				}
			}
			switch {
			case ok && j.Kind != KindSplit && replaced > 0:
				return fail(s, "a replaced slot: only split stages are replaced")
			case ok && j.Kind == KindSplit && t.Status == verifier.TaskExecuting && (t.CommitDeadline != first.CommitDeadline || t.RevealDeadline != first.RevealDeadline):
				return fail(s, "commits by %d and reveals by %d, stage 0 by %d and %d: a split job's stages share their deadlines", t.CommitDeadline, t.RevealDeadline, first.CommitDeadline, first.RevealDeadline)
			case ok && j.Kind == KindSplit && len(t.Slots) != int(j.Redundancy):
				return fail(s, "a split stage with %d slots, want one per replica chain (%d)", len(t.Slots), j.Redundancy)
			case ok && j.Kind == KindSplit && t.Status == verifier.TaskWaiting:
				return fail(s, "a split stage waiting: split stages are awarded and run together")
			case ok && t.Status == verifier.TaskHeld && (j.Kind != KindSplit || !voting):
				return fail(s, "held, which only a split stage after a disputed one may be (splitJudge)")
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
		if (j.State == JobBidding || j.State == JobRevealing) && filled != int(j.Filled) {
			return fail(0, "%d filled pool tasks, the job counts %d", filled, j.Filled)
		}
		if j.Kind == KindSplit && executing != 0 && executing != int(j.Stages) {
			return fail(0, "%d of %d split stages executing: the scan moves them together", executing, j.Stages)
		}
		if replaced > MaxSplitReplacements {
			return fail(0, "%d replacements, at most %d", replaced, MaxSplitReplacements)
		}
		return false
	})
	return bad
}
