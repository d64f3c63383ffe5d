package market

// A split stage replaced on its client's order (moved out of split.go).

import (
	"slices"
	"strconv"

	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// ---- replacement of a stage that stopped (issue 12, "Faults") ----

// MaxSplitReplacements caps the replacements of one split job (R_max of
// P10 and P11): each one hands a prompt-equivalent input transcript to one
// more provider. jobLife leaves a fresh execute window for each.
const MaxSplitReplacements = 2

// MsgReplaceStage is a split job's client ordering the provider of replica
// chain Chain of Stage, which stopped before committing its transcript,
// replaced by the stage's next eligible backup. The replacement takes the
// same slot (chain index and price), rebuilds its KV cache by replaying
// the slot's input transcript and continues the generation.
type MsgReplaceStage struct {
	Job   uint64
	Stage uint16
	Chain uint16
}

// Raw encodes the message.
func (m *MsgReplaceStage) Raw() types.RawMsg { return types.NewRawMsg(types.MsgTypeReplaceStage, m) }

// DecodeMsgReplaceStage parses a MsgReplaceStage payload.
func DecodeMsgReplaceStage(data []byte) (*MsgReplaceStage, error) {
	var m MsgReplaceStage
	return &m, types.DecodeMsgPayload("replace-stage", data, &m)
}

// splitReplacements counts a split job's replacements so far.
func splitReplacements(ts []*verifier.Task) int {
	n := 0
	for _, t := range ts {
		for i := range t.Slots {
			n += len(t.Slots[i].Replaced)
		}
	}
	return n
}

// splitHeld reports whether addr holds, or held before a replacement, a
// slot of any stage of the job.
func splitHeld(ts []*verifier.Task, addr types.Address) bool {
	for _, t := range ts {
		for i := range t.Slots {
			if t.Slots[i].Provider == addr || slices.Contains(t.Slots[i].Replaced, addr) {
				return true
			}
		}
	}
	return false
}

// splitBackup is the index in stage's backups of the first one that may
// take a slot now: it holds (and held) no slot of the job (P6: one slot
// per account) and is EligibleStage (registered, not jailed or
// tombstoned, bonded, advertising the slice). -1 if none.
func (k *Keeper) splitBackup(j *Job, stage uint16, ts []*verifier.Task) int {
	for i, cand := range ts[stage].Backups {
		if !splitHeld(ts, cand) && EligibleStage(k.kv, k.ctx.Params, k.ctx.Height, j, stage, cand) == nil {
			return i
		}
	}
	return -1
}

// ReplaceStage carries out the client's order to replace a split stage
// provider that stopped mid-generation (docs/design-notes.md, "Split
// inference", Replacement): slot Chain of Stage goes to the stage's first
// backup still eligible, which is paid the stage's clearing price like the
// slot it takes; the replaced provider is a no-show (slashed
// no_show_slash_bps, burned, jailed); every stage of the job gets at least
// a fresh execute window to commit (the replacement replays its input
// first), within the job's expiry. Only the client may order it (P10), for
// a slot that has not committed, before the commit deadline, at most
// MaxSplitReplacements times per job (P11).
func (k *Keeper) ReplaceStage(from types.Address, m *MsgReplaceStage) error {
	j, err := k.job(m.Job)
	if err != nil {
		return err
	}
	switch {
	case j.Kind != KindSplit:
		return types.ErrInvalidMsg.Wrapf("job %d is a %s job: only a split job's stages are replaced on order (other no-shows go to a backup at the commit deadline)", j.ID, j.Kind)
	case from != j.Client:
		return types.ErrUnauthorized.Wrapf("only job %d's client %s may order a stage replaced, not %s (P10: nobody else's word that a stage died is taken)", j.ID, j.Client, from)
	case m.Chain >= j.Redundancy:
		return types.ErrInvalidMsg.Wrapf("job %d has replica chains 0..%d, not %d", j.ID, j.Redundancy-1, m.Chain)
	}
	if err := k.checkStage(j, m.Stage); err != nil {
		return err
	}
	ts, ok := k.splitTasks(j)
	if !ok {
		return types.ErrWrongPhase.Wrapf("job %d is %s and its stages are not executing: a stage is replaced while the chains generate, before the commit deadline", j.ID, j.State)
	}
	t := ts[m.Stage]
	sl := &t.Slots[m.Chain]
	done := splitReplacements(ts)
	switch {
	case k.ctx.Height > t.CommitDeadline:
		return types.ErrWrongPhase.Wrapf("the commit window of job %d closed at height %d (now %d): a replacement is ordered before it", j.ID, t.CommitDeadline, k.ctx.Height)
	case !sl.Live():
		return types.ErrWrongPhase.Wrapf("chain %d of job %d stage %d is settled or a no-show: there is nothing to replace", m.Chain, j.ID, m.Stage)
	case sl.Committed:
		return types.ErrWrongPhase.Wrapf("%s committed its transcript for chain %d of job %d stage %d: it finished and is not replaced", sl.Provider, m.Chain, j.ID, m.Stage)
	case done >= MaxSplitReplacements:
		return types.ErrWrongPhase.Wrapf("job %d had its %d replacements, the most a split job may have (each replay shows the prompt to one more provider, P11)", j.ID, done)
	}
	commitBy := max(t.CommitDeadline, k.ctx.Height+j.Windows.Execute)
	revealBy := max(t.RevealDeadline, commitBy+j.Windows.Verify)
	if revealBy+uint64(j.Stages)*k.p.DisputeBlocks > j.Expiry {
		// jobLife leaves room for MaxSplitReplacements fresh windows from
		// the award; only an award the deadline bound deferred lacks it.
		return types.ErrWrongPhase.Wrapf("job %d has no time left for a replacement: its stages would reveal until %d, and its hand-off proofs and held stages' votes would run past its expiry %d", j.ID, revealBy, j.Expiry)
	}
	b := k.splitBackup(j, m.Stage, ts)
	if b < 0 {
		return types.ErrNotEligible.Wrapf("job %d stage %d has no backup left that is eligible and holds no slot of the job (%d backups ranked): the slot stays with %s",
			j.ID, m.Stage, len(t.Backups), sl.Provider)
	}
	old, to := sl.Provider, t.Backups[b]
	// The backups ranked before it are not eligible now or hold a slot:
	// they are passed over for good, as at a commit deadline.
	t.Backups = slices.Clone(t.Backups[b+1:])
	*sl = verifier.Slot{Provider: to, Replaced: append(slices.Clone(sl.Replaced), old)}
	k.kv.Set(byProviderKey(to, j.ID), present)
	k.noShowPenalty(j, m.Stage, old, "stopped mid-generation in job "+strconv.FormatUint(j.ID, 10)+": replaced on the client's order")
	// The deadlines scheduled before stay in the queue: each handler
	// compares the task's deadline with its height and passes over them.
	if revealBy != ts[0].RevealDeadline {
		k.schedule(revealBy, j.ID, stageNone, deadlineSplit)
	}
	for s, tk := range ts {
		if tk.CommitDeadline != commitBy {
			k.schedule(commitBy, j.ID, uint16(s), deadlineCommit)
		}
		tk.CommitDeadline, tk.RevealDeadline = commitBy, revealBy
		k.setTask(j, uint16(s), tk)
	}
	k.setJob(j)
	k.emit(EventSplitStageReplaced{Job: j.ID, Stage: m.Stage, Chain: m.Chain, From: old, To: to,
		CommitDeadline: commitBy, RevealDeadline: revealBy, Replacements: uint64(done + 1)})
	return nil
}
