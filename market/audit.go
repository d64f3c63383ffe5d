package market

import (
	"github.com/ogpu-network/ogpu/beacon"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// Random audits (AppVersion 8, issue 30): a task whose r results agreed
// is not paid on the agreement alone. When it confirms (its last reveal,
// or its reveal deadline, at height e), it waits canary_blocks, and at
// least until the beacon value of e is final (Task.DrawAt; package
// beacon): that value is made of the validators' hash-chain values
// revealed with their precommits of block e, after every result of the
// task was in the block. That value draws it: with probability
// audit_rate_bps / 10,000 the validators re-execute it before it is paid,
// exactly as in a dispute (Task.Audit = AuditRandom).
//
// Nobody can foresee the draw when it could still act on it: the value
// was not known to anyone but all validators together when the providers
// committed and revealed, no proposer can
// choose it (it only delays it), and a validator can withhold its own
// value only by staying silent for beacon.Timeout blocks, for one bit.
// Every task is equally likely to be drawn, so audits need no disguise:
// a cartel holding every slot of a job cannot tell an audited task from
// another before it reveals, and a revealed lie is caught with
// probability audit_rate_bps / 10,000 (docs/economics.md).
//
// An audit that upholds the result settles "audited" (paid); one that
// rejects it is fraud for every slot that revealed it; one the validators
// do not decide leaves the agreement standing ("agreed": r providers
// agreed, and an absent validator set must not cost them their pay).
//
// Fine-tune tasks are not drawn yet: their audit is one step re-executed
// against the committed checkpoints, not built.

// AuditDomain is what a task's draw hashes with the beacon value:
// "ogpu/audit/v1" | job | stage.
func AuditDomain(job uint64, stage uint16) []byte {
	return cat([]byte("ogpu/audit/v1"), be64(job), be16(stage))
}

// Audited reports whether the beacon value v draws stage of job for an
// audit at rate bps.
func Audited(v types.Hash, job uint64, stage uint16, bps uint64) bool {
	return bps > 0 && beacon.Draw(v, AuditDomain(job, stage)) < bps
}

// confirmDeadline ends a confirming task's wait: without the beacon value
// of its draw height yet, it waits a block more (the value is final at
// most beacon.Timeout blocks after that height); then it is audited if
// drawn, else it settles on its agreed result.
func (k *Keeper) confirmDeadline(j *Job, stage uint16, t *verifier.Task) {
	result := t.Revealed()[0]
	if t.DrawAt == 0 || j.Kind == KindFinetune || k.p.AuditRateBps == 0 {
		k.settle(j, stage, t, "agreed", result)
		return
	}
	v, ok := beacon.Value(k.kv, t.DrawAt)
	if !ok {
		t.ConfirmBy = k.ctx.Height + 1
		k.setTask(j, stage, t)
		k.schedule(t.ConfirmBy, j.ID, stage, deadlineConfirm)
		return
	}
	if !Audited(v, j.ID, stage, k.p.AuditRateBps) {
		k.settle(j, stage, t, "agreed", result)
		return
	}
	k.openAudit(j, stage, t, verifier.AuditRandom, result)
}
