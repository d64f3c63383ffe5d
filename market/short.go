package market

import (
	"fmt"
	"strconv"

	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// Short stages (AppVersion 8, issue 30, review 2's M-H1): a result is paid
// as verified only when r independent results agreed on it, or when the
// validators re-executed it and upheld it. A stage can fall short of r
// twice:
//
//   - at the close, with fewer than r eligible revealed bids (or pool
//     claims): a thin market, a niche model, or a provider that hopes to be
//     alone;
//   - at its reveal deadline, when no-shows leave fewer than r live slots
//     that revealed the same result.
//
// What happens then is the client's choice, made when it posts the job
// (Job.Short, `ogpu job post --short`):
//
//   - ShortAudit: the stage goes ahead with the providers it has. Once they
//     revealed, their result is put to the validators exactly as a dispute
//     is (Task.Audit = AuditShort, the same sealed and opened votes, paid
//     from the stage's share of the validator fee that posting locked): a
//     result more than 2/3 of the voting power upholds settles "audited" and
//     is paid; one they reject is fraud (every slot that revealed it is
//     slashed and tombstoned); an undecided audit settles "unresolved" and
//     pays nobody.
//   - ShortRefund: a stage short at the close is not awarded (its r × cap
//     goes back; a pipeline, whose stages feed one another, expires); a
//     stage short at its reveal deadline settles "unverified": nobody is
//     paid, nobody is slashed, no reputation moves.
//   - ShortRebid: a close that finds a stage short takes bids (or claims)
//     for one more bid and reveal window instead (EventJobRebid; the bids
//     it has stay), and closes again; then it is ShortRefund. The job's
//     life holds that window.
//
// Either way a lone result never settles "agreed", never earns
// reputation as an agreement (M-L1) and is never counted in Job.Verified
// unless validators upheld it. Fine-tune jobs take ShortRefund only: a
// training run is not re-executed by a vote (its audit is one step against
// the committed checkpoints, not built yet). Sessions have lanes, not
// stages, and no short rule. Split jobs already expire at the close when a
// stage has fewer than r winners (splitGap).
const (
	ShortAudit  = "audit"
	ShortRefund = "refund"
	ShortRebid  = "rebid"
)

// ShortDefault is the policy a job of kind gets when its post names none.
func ShortDefault(kind string) string {
	switch kind {
	case KindSession:
		return ""
	case KindFinetune:
		return ShortRefund
	}
	return ShortAudit
}

// validateShort checks a post's short-stage policy against its kind.
func validateShort(kind, short string) error {
	switch {
	case short == "":
		return nil
	case kind == KindSession:
		return fmt.Errorf("short %q: a session has lanes, not stages, and takes no short-stage policy", short)
	case short != ShortAudit && short != ShortRefund && short != ShortRebid:
		return fmt.Errorf("short %q: want %s (validators re-execute a stage with fewer than r providers before it is paid), %s (such a stage is refunded, nobody paid) or %s (one more bid window, then refunded)", short, ShortAudit, ShortRefund, ShortRebid)
	case kind == KindFinetune && short == ShortAudit:
		return fmt.Errorf("short %q: fine-tune jobs are not audited by a vote yet: use %s (a stage with fewer than r trainers is refunded)", short, ShortRefund)
	}
	return nil
}

// shortPolicy is j's policy (jobs posted before AppVersion 8 have none:
// their kind's default).
func (j *Job) shortPolicy() string {
	if j.Short != "" {
		return j.Short
	}
	return ShortDefault(j.Kind)
}

// shortAtClose applies the policy to the stages of a closing auction or
// pool with fewer than r winners (at least one): under ShortRefund they
// lose their winners (the stage is then refunded like one nobody bid on);
// under ShortAudit they keep them. Either way EventStageShort says so.
// Split jobs have their own rule (splitGap).
func (k *Keeper) shortAtClose(j *Job, awards []stageAward, filled []bool) (awarded int) {
	r := int(j.Redundancy)
	for s := range awards {
		a := &awards[s]
		n := len(a.winners)
		if filled[s] {
			awarded++
			continue
		}
		if n == 0 {
			continue
		}
		if n >= r || j.Kind == KindSplit || j.Kind == KindSession {
			awarded++
			continue
		}
		policy := j.shortPolicy()
		k.emit(EventStageShort{Job: j.ID, Stage: uint16(s), Providers: uint16(n), Redundancy: j.Redundancy, Policy: policy})
		if policy != ShortAudit { // refund, or rebid after its extra window
			a.winners, a.backups = nil, nil
			continue
		}
		awarded++
	}
	return awarded
}

// agreeing counts the live slots of t that revealed result.
func agreeing(t *verifier.Task, result types.Hash) int {
	n := 0
	for i := range t.Slots {
		if s := &t.Slots[i]; s.Live() && s.Revealed && s.Result == result {
			n++
		}
	}
	return n
}

// shortResult handles a task whose live slots revealed one result, fewer
// than r of them: an audit by the validators (ShortAudit), or "unverified"
// (ShortRefund: nobody paid).
func (k *Keeper) shortResult(j *Job, stage uint16, t *verifier.Task, result types.Hash) {
	if j.shortPolicy() != ShortAudit {
		k.settle(j, stage, t, OutcomeUnverified, types.Hash{})
		return
	}
	k.openAudit(j, stage, t, verifier.AuditShort, result)
}

// openAudit puts a task's result to the validators: the vote of a dispute,
// over one result. Validators re-execute the task and vote the hash they
// compute, as for any dispute.
func (k *Keeper) openAudit(j *Job, stage uint16, t *verifier.Task, reason string, result types.Hash) {
	t.Audit = reason
	k.openVote(j, stage, t, verifier.TaskDisputed, []types.Hash{result})
	k.emit(EventAuditOpened{Job: j.ID, Stage: stage, Reason: reason, Result: result, Agreeing: uint16(agreeing(t, result)), Redundancy: j.Redundancy})
}

// Outcomes of a task settled on a short stage.
const (
	// OutcomeAudited: the validators re-executed the task and upheld its
	// result: paid, verified.
	OutcomeAudited = "audited"
	// OutcomeUnverified: fewer than r results and a ShortRefund job:
	// nobody paid, nobody slashed.
	OutcomeUnverified = "unverified"
)

// VerifiedOutcome reports whether a task that settled with outcome did so
// on a verified result: r agreeing results ("agreed", "agreed_final"), the
// validators' verdict of a dispute ("verdict"), an audit that upheld the
// result ("audited"), or fine-tune games won ("game"). Clients, the
// gateway and the console show "verified" for these only.
func VerifiedOutcome(outcome string) bool {
	switch outcome {
	case "agreed", "agreed_final", "verdict", OutcomeAudited, "game":
		return true
	}
	return false
}

// rebidWindow is what a ShortRebid job's life holds for its extra window.
func rebidWindow(m *MsgPostJob) uint64 {
	if m.Short != ShortRebid {
		return 0
	}
	return m.Windows.Bid + m.Windows.Reveal
}

// rebid runs at the close of a ShortRebid job that has not taken its
// extra window: if a stage would get fewer than r eligible winners (none
// counts too), the job takes bids or claims for one more bid and reveal
// window, from this height, instead of closing; what it has stays (sealed
// and revealed bids, leaders, claims and their deposits). It reports
// whether it reopened. The check reads each stage's leaders list or
// claims, as the close would.
func (k *Keeper) rebid(j *Job) bool {
	if j.shortPolicy() != ShortRebid || j.Rebids > 0 || j.Kind == KindSplit || j.Kind == KindSession {
		return false
	}
	var short []string
	for s := uint16(0); s < j.Stages; s++ {
		n := 0
		if j.Mode == ModeAuction {
			w, _, _ := k.rankLeaders(j, s, GetLeaders(k.kv, j.ID, s))
			n = len(w)
		} else {
			store.IteratePrefix(k.kv, bookStagePrefix(j.ID, s), func(key, _ []byte) bool {
				if EligibleStage(k.kv, k.ctx.Params, k.ctx.Height, j, s, types.BytesToAddress(key[len(key)-types.AddressLength:])) == nil {
					n++
				}
				return n >= int(j.Redundancy)
			})
		}
		if n < int(j.Redundancy) {
			short = append(short, strconv.Itoa(int(s)))
		}
	}
	if len(short) == 0 {
		return false
	}
	old := j.RevealEnd
	j.Rebids++
	j.BidEnd = k.ctx.Height + j.Windows.Bid
	j.RevealEnd = j.BidEnd + j.Windows.Reveal
	j.Expiry += j.RevealEnd - old
	k.setState(j, JobBidding)
	k.setJob(j)
	if j.Windows.Reveal > 0 {
		k.schedule(j.BidEnd, j.ID, stageNone, deadlineBidEnd)
	}
	k.schedule(j.RevealEnd, j.ID, stageNone, deadlineClose)
	k.emit(EventJobRebid{Job: j.ID, Stages: short, BidEnd: j.BidEnd, RevealEnd: j.RevealEnd})
	return true
}
