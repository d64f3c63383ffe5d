package market

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// Split inference (KindSplit, docs/design-notes.md "Split inference (issue
// 12)"): one LLM cut by layers into K stages, run by r replica chains.
// Slot i of every stage's task is replica chain i. Every stage is awarded
// at the close (decode needs them all at once), each slot commits to its
// transcript (SplitCommitment) and reveals it (MsgRevealTranscript): the
// number of frames T, the running hash Hin of what it received and Hout
// of what it sent (the slot's Result). Once the transcripts are final the
// chain scans the stages from 0 (splitSettle): agreeing stages confirm,
// the first stage whose slots have equal inputs and different outputs is
// disputed, and every later stage is paid without comparison.

// MaxSplitStages bounds a split job's slice list in the decoder (genesis
// bounds max_stages lower).
const MaxSplitStages = verifier.MaxCanaryStages

// validateSplitPost checks what a split job adds to a post (the decoder's
// other checks apply too).
func validateSplitPost(m *MsgPostJob) error {
	switch {
	case m.Stages < 2:
		return fmt.Errorf("a split job has at least 2 stages (one stage: post an %s job)", KindInference)
	case len(m.Slices) != int(m.Stages):
		return fmt.Errorf("a split job names one slice hash per stage: %d stages, %d slices", m.Stages, len(m.Slices))
	}
	for i, h := range m.Slices {
		switch {
		case h == (types.Hash{}):
			return fmt.Errorf("slice %d: the hash is missing (the manifest of ogpu model split gives it)", i)
		case h == m.Model:
			return fmt.Errorf("slice %d is the whole model's hash: a slice holds only its stage's layers", i)
		}
		for k := 0; k < i; k++ {
			if m.Slices[k] == h {
				return fmt.Errorf("slices %d and %d are the same hash: every stage has its own slice", k, i)
			}
		}
	}
	return nil
}

// EligibleStage is Eligible for one stage of a job: a split stage also
// needs the provider to advertise the stage's slice or the whole model.
func EligibleStage(r store.KV, params genesis.Params, height uint64, j *Job, stage uint16, addr types.Address) error {
	_, err := eligibleStage(r, params, height, j, stage, addr)
	return err
}

// eligibleStage is EligibleStage, also returning the reputation score it
// read (meaningful only when err is nil): the close ranks by it.
func eligibleStage(r store.KV, params genesis.Params, height uint64, j *Job, stage uint16, addr types.Address) (uint64, error) {
	p, score, err := eligible(r, params, height, j, addr)
	if err != nil {
		return 0, err
	}
	if j.Kind != KindSplit || int(stage) >= len(j.Slices) {
		return score, nil
	}
	if !slices.Contains(p.Models, j.Slices[stage]) && !slices.Contains(p.Models, j.Model) {
		return 0, types.ErrNotEligible.Wrapf("provider %s advertises neither stage %d's slice %x nor the whole model %x of job %d: add one to its models (ogpu tx provider update)",
			addr, stage, j.Slices[stage], j.Model, j.ID)
	}
	return score, nil
}

// SplitCommitment is what a split slot commits to with MsgCommitResult:
// sha256("ogpu/split/v1" | job | stage | chain | steps | hin | hout | salt
// | provider), integers big-endian (u64 job, u16 stage and chain, u32
// steps).
func SplitCommitment(job uint64, stage, chain uint16, steps uint32, hin, hout, salt types.Hash, provider types.Address) types.Hash {
	h := sha256.New()
	h.Write([]byte("ogpu/split/v1"))
	h.Write(be64(job))
	h.Write(be16(stage))
	h.Write(be16(chain))
	h.Write(binary.BigEndian.AppendUint32(nil, steps))
	h.Write(hin[:])
	h.Write(hout[:])
	h.Write(salt[:])
	h.Write(provider[:])
	return types.Hash(h.Sum(nil))
}

// MsgRevealTranscript opens a split slot's commitment: Steps frames, the
// final running hashes Hin (received) and Hout (sent).
type MsgRevealTranscript struct {
	Job   uint64
	Stage uint16
	Steps uint32
	Hin   types.Hash
	Hout  types.Hash
	Salt  types.Hash
}

// Raw encodes the message.
func (m *MsgRevealTranscript) Raw() types.RawMsg {
	return types.NewRawMsg(types.MsgTypeRevealTranscript, m)
}

// DecodeMsgRevealTranscript parses a MsgRevealTranscript payload.
func DecodeMsgRevealTranscript(data []byte) (*MsgRevealTranscript, error) {
	var m MsgRevealTranscript
	return &m, types.DecodeMsgPayload("reveal-transcript", data, &m)
}

// MsgProveHandoff proves a split slot's revealed input: Sig is its
// upstream's hand-off signature (the client's, for stage 0) over
// HandoffDigest(chain id, Job, Chain, Stage-1 or ClientStage, Steps, Hin).
type MsgProveHandoff struct {
	Job   uint64
	Stage uint16
	Chain uint16
	Steps uint32
	Hin   types.Hash
	Sig   []byte
}

// Raw encodes the message.
func (m *MsgProveHandoff) Raw() types.RawMsg { return types.NewRawMsg(types.MsgTypeProveHandoff, m) }

// DecodeMsgProveHandoff parses and checks a MsgProveHandoff payload.
func DecodeMsgProveHandoff(data []byte) (*MsgProveHandoff, error) {
	var m MsgProveHandoff
	if err := types.DecodeMsgPayload("prove-handoff", data, &m); err != nil {
		return nil, err
	}
	switch {
	case len(m.Sig) != 65:
		return nil, types.ErrInvalidMsg.Wrapf("prove-handoff: signature of %d bytes, want 65 ([R || S || V])", len(m.Sig))
	case m.Steps == 0 || m.Hin == (types.Hash{}):
		return nil, types.ErrInvalidMsg.Wrapf("prove-handoff: an empty transcript (0 steps or a zero hash) needs no proof")
	}
	return &m, nil
}

// ---- award ----

// splitSelect turns each stage's full ranking (winners then backups, as
// rank returns them) into a split award: stages in order, each takes the
// r best-ranked accounts that won no earlier stage (an account wins at
// most one slot of a split job, P6); the backups are the rest of its
// ranking less every winner; the clearing price is the first backup's bid
// (without one, as stagePrice: the lowest evicted bid, else the highest
// winning bid; in pool mode the cap).
func splitSelect(j *Job, awards []stageAward) {
	won := map[types.Address]bool{} // looked up only, never ranged over
	for s := range awards {
		all := append(slices.Clone(awards[s].winners), awards[s].backups...)
		var w []ranked
		for _, c := range all {
			if len(w) < int(j.Redundancy) && !won[c.provider] {
				w = append(w, c)
				won[c.provider] = true
			}
		}
		awards[s].winners, awards[s].backups = w, all
	}
	for s := range awards {
		var b []ranked
		for _, c := range awards[s].backups {
			if !won[c.provider] {
				b = append(b, c)
			}
		}
		awards[s].backups = b
		awards[s].price = j.MaxPrice.Clone()
		switch {
		case j.Mode != ModeAuction:
		case len(b) > 0:
			awards[s].price = b[0].price.Clone()
		case awards[s].evictedMin != nil:
			awards[s].price = awards[s].evictedMin.Clone() // as stagePrice
		case len(awards[s].winners) > 0:
			w := awards[s].winners
			awards[s].price = w[len(w)-1].price.Clone() // as stagePrice: the highest winning bid
		}
	}
}

// splitGap is the first stage with fewer than r winners, or -1.
func splitGap(j *Job, awards []stageAward) int {
	for s := range awards {
		if len(awards[s].winners) < int(j.Redundancy) {
			return s
		}
	}
	return -1
}

func splitGapReason(j *Job, s uint16, n int) string {
	return fmt.Sprintf("stage %d has %d eligible winners (an account wins one slot of a split job), and a split job needs %d at every stage: see ogpu query why-no-bids", s, n, j.Redundancy)
}

// chainOrder assigns a split stage's winners to replica chains: winner w
// gets chain index = its rank by sha256("ogpu/split/chain/v1" | award
// block hash | job | stage | w), so that no bid order or address choice
// puts an account in the chain it wants (P5).
func chainOrder(blockHash []byte, job uint64, stage uint16, winners []ranked) {
	key := func(a types.Address) []byte {
		h := sha256.New()
		h.Write([]byte("ogpu/split/chain/v1"))
		h.Write(blockHash)
		h.Write(be64(job))
		h.Write(be16(stage))
		h.Write(a[:])
		return h.Sum(nil)
	}
	slices.SortFunc(winners, func(a, b ranked) int {
		if c := bytes.Compare(key(a.provider), key(b.provider)); c != 0 {
			return c
		}
		return bytes.Compare(a.provider[:], b.provider[:])
	})
}

// ---- transcripts and hand-off proofs ----

// RevealTranscript opens a split slot's transcript commitment. The last
// reveal of the job (or a later proof) runs the scan when no input waits
// for a proof.
func (k *Keeper) RevealTranscript(from types.Address, m *MsgRevealTranscript) error {
	j, err := k.job(m.Job)
	if err != nil {
		return err
	}
	if j.Kind != KindSplit {
		return types.ErrInvalidMsg.Wrapf("job %d is a %s job: reveal its result with reveal-result (MsgRevealResult); transcripts are for %s jobs", j.ID, j.Kind, KindSplit)
	}
	if err := k.checkStage(j, m.Stage); err != nil {
		return err
	}
	if j.MaxTokens != 0 && j.PromptTokens != 0 && uint64(m.Steps) > j.PromptTokens+j.MaxTokens {
		return types.ErrInvalidMsg.Wrapf("reveal-transcript: %d frames, job %d has at most %d positions (prompt %d + max tokens %d) and a frame carries at least one",
			m.Steps, j.ID, j.PromptTokens+j.MaxTokens, j.PromptTokens, j.MaxTokens)
	}
	t, i, err := k.ver.RevealSlot(j.ID, m.Stage, from, k.ctx.Height)
	if err != nil {
		return err
	}
	if SplitCommitment(j.ID, m.Stage, uint16(i), m.Steps, m.Hin, m.Hout, m.Salt, from) != t.Slots[i].Commitment {
		return types.ErrCommitMismatch.Wrapf("hash(job %d, stage %d, chain %d, %d steps, hin %x, hout %x, salt, %s) is not the commitment %x",
			j.ID, m.Stage, i, m.Steps, m.Hin, m.Hout, from, t.Slots[i].Commitment)
	}
	sl := &t.Slots[i]
	sl.Revealed, sl.Result, sl.Hin, sl.Steps = true, m.Hout, m.Hin, m.Steps
	k.setTask(j, m.Stage, t)
	k.emit(EventTranscriptRevealed{Job: j.ID, Stage: m.Stage, Chain: uint16(i), Provider: from, Steps: m.Steps, Hin: m.Hin, Hout: m.Hout})
	if ts, ok := k.splitTasks(j); ok && k.transcriptsFinal(ts) {
		k.splitSettle(j, ts, false)
	}
	return nil
}

// handoffDeadline is the last height a split job's hand-off proofs are
// taken: its reveal deadline + dispute_blocks.
func (k *Keeper) handoffDeadline(t *verifier.Task) uint64 {
	return t.RevealDeadline + k.p.DisputeBlocks
}

// ProveHandoff records a split slot's proof of its revealed input. Proven
// against an upstream that revealed a different output for as many frames
// or fewer, the upstream equivocated (P2): it is slashed fraud_slash_bps
// and tombstoned now, with no vote, and leaves its stage's comparison.
func (k *Keeper) ProveHandoff(from types.Address, m *MsgProveHandoff) error {
	j, err := k.job(m.Job)
	if err != nil {
		return err
	}
	if j.Kind != KindSplit {
		return types.ErrInvalidMsg.Wrapf("job %d is a %s job: hand-off proofs are for %s jobs", j.ID, j.Kind, KindSplit)
	}
	if err := k.checkStage(j, m.Stage); err != nil {
		return err
	}
	if m.Chain >= j.Redundancy {
		return types.ErrInvalidMsg.Wrapf("job %d has replica chains 0..%d, not %d", j.ID, j.Redundancy-1, m.Chain)
	}
	ts, ok := k.splitTasks(j)
	if !ok {
		return types.ErrWrongPhase.Wrapf("job %d is %s and its stages are not executing: hand-off proofs are taken after the reveals and before the chain compares the stages", j.ID, j.State)
	}
	t := ts[m.Stage]
	sl := &t.Slots[m.Chain]
	s, c := int(m.Stage), int(m.Chain)
	switch {
	case k.ctx.Height > k.handoffDeadline(t):
		return types.ErrWrongPhase.Wrapf("hand-off proofs of job %d closed at height %d (now %d)", j.ID, k.handoffDeadline(t), k.ctx.Height)
	case sl.Provider != from || !sl.Live():
		return types.ErrUnauthorized.Wrapf("%s does not hold chain %d of job %d stage %d", from, m.Chain, j.ID, m.Stage)
	case !sl.Revealed:
		return types.ErrWrongPhase.Wrapf("reveal your transcript first (reveal-transcript): a proof backs the input you revealed")
	case sl.Proven:
		return types.ErrDuplicate.Wrapf("chain %d of job %d stage %d already proved its input", m.Chain, j.ID, m.Stage)
	case m.Steps != sl.Steps || m.Hin != sl.Hin:
		return types.ErrInvalidMsg.Wrapf("the proof is for %d steps and input %x, you revealed %d steps and input %x: prove the input you revealed", m.Steps, m.Hin, sl.Steps, sl.Hin)
	case !k.transcriptsFinal(ts):
		return types.ErrWrongPhase.Wrapf("hand-off proofs of job %d are taken once every slot has revealed or after height %d", j.ID, t.RevealDeadline)
	case splitInputs(ts)[s][c] == inConsistent:
		if s == 0 {
			return types.ErrInvalidMsg.Wrapf("every chain of job %d revealed the same stage-0 input: it needs no proof", j.ID)
		}
		return types.ErrInvalidMsg.Wrapf("your input equals what chain %d's stage %d revealed it sent: it needs no proof", m.Chain, s-1)
	}
	// The signature last: a recovery is the costliest check.
	upStage, want := uint16(ClientStage), j.Client
	if s > 0 {
		upStage, want = m.Stage-1, ts[s-1].Slots[c].Provider
	}
	signer, err := HandoffSigner(HandoffDigest(k.ctx.ChainID, j.ID, m.Chain, upStage, m.Steps, m.Hin), m.Sig)
	if err != nil {
		return types.ErrBadSignature.Wrapf("prove-handoff: %v", err)
	}
	if signer != want {
		sender := "the client"
		if s > 0 {
			sender = "stage " + strconv.Itoa(s-1)
		}
		return types.ErrBadSignature.Wrapf("prove-handoff: the hand-off signature over (chain id, job %d, chain %d, sent by %s, %d steps, %x) is by %s, not by the upstream %s",
			j.ID, m.Chain, sender, m.Steps, m.Hin, signer, want)
	}
	if k.ctx.Height > t.RevealDeadline {
		k.splitNoShows(j, ts) // a deferred reveal deadline: the same run
	}
	sl.Proven = true
	k.setTask(j, m.Stage, t)
	k.emit(EventHandoffProven{Job: j.ID, Stage: m.Stage, Chain: m.Chain, Provider: from, Steps: m.Steps, Hin: m.Hin, Signer: signer})
	if s > 0 {
		up := &ts[s-1].Slots[c]
		if up.Live() && up.Revealed && m.Steps >= up.Steps {
			// It signed this transcript and revealed another of as many
			// frames (or fewer than it signed): two claims, one position.
			k.emit(EventHandoffEquivocation{Job: j.ID, Stage: m.Stage - 1, Chain: m.Chain, Provider: up.Provider,
				SignedSteps: m.Steps, Signed: m.Hin, RevealedSteps: up.Steps, Revealed: up.Result})
			k.splitSlot(j, m.Stage-1, ts[s-1], c, SplitEquivocated)
			k.setTask(j, m.Stage-1, ts[s-1])
		}
	}
	k.setJob(j)
	k.splitSettle(j, ts, false)
	return nil
}

// splitTasks reads a split job's tasks; ok only if every stage's task
// exists and still executes (the scan has not run).
func (k *Keeper) splitTasks(j *Job) ([]*verifier.Task, bool) {
	if j.State != JobRunning {
		return nil, false
	}
	ts := make([]*verifier.Task, j.Stages)
	for s := range ts {
		t, ok := k.ver.GetTask(j.ID, uint16(s))
		if !ok || t.Status != verifier.TaskExecuting {
			return nil, false
		}
		ts[s] = t
	}
	return ts, true
}

// transcriptsFinal: every live slot revealed, or the reveal window closed.
func (k *Keeper) transcriptsFinal(ts []*verifier.Task) bool {
	if k.ctx.Height > ts[0].RevealDeadline {
		return true
	}
	for _, t := range ts {
		if !t.AllRevealed() {
			return false
		}
	}
	return true
}

// inputState is how a split slot's revealed input stands.
type inputState uint8

const (
	inNone         inputState = iota // not live or not revealed
	inConsistent                     // equals the upstream's revealed output (stage 0: every chain's input is the same)
	inProven                         // proven by the upstream's (client's) hand-off signature
	inInconsistent                   // differs from the upstream's revealed output (stage 0: from another chain's) and is not proven: P1
	inUnknown                        // the upstream revealed nothing and the input is not proven
)

// established: the slot is judged on its input.
func (s inputState) established() bool { return s == inConsistent || s == inProven }

// pending: the slot must prove its input by the handoff deadline.
func (s inputState) pending() bool { return s == inInconsistent || s == inUnknown }

// splitInputs classifies every slot's input, from the state before any
// slot is settled by the scan.
func splitInputs(ts []*verifier.Task) [][]inputState {
	out := make([][]inputState, len(ts))
	same0 := true
	var first *verifier.Slot
	for i := range ts[0].Slots {
		sl := &ts[0].Slots[i]
		if !sl.Live() || !sl.Revealed {
			continue
		}
		if first == nil {
			first = sl
		} else if sl.Steps != first.Steps || sl.Hin != first.Hin {
			same0 = false
		}
	}
	for s, t := range ts {
		out[s] = make([]inputState, len(t.Slots))
		for c := range t.Slots {
			sl := &t.Slots[c]
			if !sl.Live() || !sl.Revealed {
				continue
			}
			var st inputState
			switch {
			case s == 0 && same0:
				st = inConsistent
			case s == 0:
				st = inInconsistent
			case c >= len(ts[s-1].Slots):
				st = inUnknown
			default:
				up := &ts[s-1].Slots[c]
				switch {
				case up.Live() && up.Revealed && up.Steps == sl.Steps && up.Result == sl.Hin:
					st = inConsistent
				case up.Live() && up.Revealed:
					st = inInconsistent
				default:
					st = inUnknown
				}
			}
			if st.pending() && sl.Proven {
				st = inProven
			}
			out[s][c] = st
		}
	}
	return out
}

func splitPending(states [][]inputState) bool {
	for _, row := range states {
		for _, st := range row {
			if st.pending() {
				return true
			}
		}
	}
	return false
}

// splitNoShows marks every live slot that did not reveal a no-show (light
// slash, burned; its price refunded), as evaluate does at a reveal
// deadline.
func (k *Keeper) splitNoShows(j *Job, ts []*verifier.Task) {
	for s, t := range ts {
		changed := false
		for i := range t.Slots {
			if sl := &t.Slots[i]; sl.Live() && !sl.Revealed {
				k.noShow(j, uint16(s), t, i, "reveal")
				k.esc.Release(j.ID, j.Client, j.Prices[s])
				j.Refunded.Add(j.Refunded, j.Prices[s])
				changed = true
			}
		}
		if changed {
			k.setTask(j, uint16(s), t)
		}
	}
	k.setJob(j)
}

// splitRevealDeadline runs at a split job's reveal deadline: no-shows,
// then the scan, unless an input waits for a proof: then the scan runs at
// the handoff deadline (or when the last proof comes in).
func (k *Keeper) splitRevealDeadline(j *Job, height uint64) {
	ts, ok := k.splitTasks(j)
	if !ok || ts[0].RevealDeadline != height {
		return
	}
	k.splitNoShows(j, ts)
	states := splitInputs(ts)
	if !splitPending(states) {
		k.splitSettle(j, ts, false)
		return
	}
	by := k.handoffDeadline(ts[0])
	var waiting []string
	for s, row := range states {
		for c, st := range row {
			if st.pending() {
				waiting = append(waiting, strconv.Itoa(s)+"/"+strconv.Itoa(c))
			}
		}
	}
	k.schedule(by, j.ID, stageNone, deadlineHandoff)
	k.emit(EventSplitInputsPending{Job: j.ID, Slots: waiting, ProveBy: by})
}

// splitHandoffDeadline runs the scan at a split job's handoff deadline:
// inputs still unproven are judged now.
func (k *Keeper) splitHandoffDeadline(j *Job, height uint64) {
	ts, ok := k.splitTasks(j)
	if !ok || k.handoffDeadline(ts[0]) != height {
		return
	}
	k.splitNoShows(j, ts) // nothing when the reveal deadline ran
	k.splitSettle(j, ts, true)
}

// Outcomes of split slots settled on their own (EventSplitSlotSettled).
const (
	// (Before AppVersion 8 a slot with nothing to compare with was paid
	// "unverified", and one after a disputed stage "downstream_unverified":
	// review 2's M-H4 and M-L2. Such a slot is now audited or unpaid:
	// splitJudge.)
	// SplitInputLie: its input differs from what its upstream revealed
	// (stage 0: from another chain's) and it did not prove it: slashed
	// fraud_slash_bps, tombstoned, unpaid (P1).
	SplitInputLie = "input_lie"
	// SplitInputUnproven: its upstream revealed nothing and it did not
	// prove its input: unpaid, not slashed (nothing shows a lie).
	SplitInputUnproven = "input_unproven"
	// SplitEquivocated: its downstream proved it signed a transcript other
	// than the one it revealed: slashed fraud_slash_bps, tombstoned,
	// unpaid (P2, P3).
	SplitEquivocated = "equivocated"
	// SplitNotCompared: its input is not the one its stage compared or
	// audited (splitJudge); nobody checks it: unpaid, not slashed.
	SplitNotCompared = "not_compared"
	// SplitDownstreamOfLoser: an earlier stage of its chain revealed a
	// result the validators' verdict rejected (or the vote was not
	// decided): it computed on an input nobody can vouch for: unpaid, not
	// slashed.
	SplitDownstreamOfLoser = "downstream_of_loser"
	// SplitClientInput: the client signed two different prompts (P8) and
	// this slot's chain computed on the one its stage did not compare:
	// paid its price by the client that ordered it (not verified, no
	// reputation), so that equivocating buys a client no free work.
	SplitClientInput = "client_input"
)

// splitSlot settles slot c of stage on its own (it leaves the stage's
// comparison); the caller writes the task.
func (k *Keeper) splitSlot(j *Job, stage uint16, t *verifier.Task, c int, outcome string) {
	price := j.Prices[stage]
	sl := &t.Slots[c]
	paid := new(uint256.Int)
	switch outcome {
	case SplitClientInput:
		k.esc.Release(j.ID, sl.Provider, price)
		j.Paid.Add(j.Paid, price)
		paid = price.Clone()
		k.emit(EventProviderPaid{Provider: sl.Provider, Job: j.ID, Stage: stage, Amount: price.Clone(), Via: PaidViaReservation})
	case SplitInputLie, SplitEquivocated:
		k.esc.Release(j.ID, j.Client, price)
		j.Refunded.Add(j.Refunded, price)
		why := "input not proven (P1)"
		if outcome == SplitEquivocated {
			why = "signed a hand-off other than its revealed output (P2)"
		}
		k.fraudSlash(j, stage, sl.Provider, "fraud: "+why) // deterrence.go
		k.jailProvider(sl.Provider, k.ctx.Height+k.p.ProviderJailBlocks, true, why+" in job "+strconv.FormatUint(j.ID, 10))
		k.ver.UpdateReputation(sl.Provider, func(r *verifier.Reputation) { r.Done++; r.Lost++ })
	default: // SplitInputUnproven, SplitNotCompared, SplitDownstreamOfLoser
		k.esc.Release(j.ID, j.Client, price)
		j.Refunded.Add(j.Refunded, price)
		k.ver.UpdateReputation(sl.Provider, func(r *verifier.Reputation) { r.Done++ })
	}
	sl.Settled = true
	k.emit(EventSplitSlotSettled{Job: j.ID, Stage: stage, Chain: uint16(c), Provider: sl.Provider, Outcome: outcome, Paid: paid})
}

// splitSettle is the scan (docs/design-notes.md, "On chain"): with every
// transcript final and no input waiting for a proof (or final: the
// handoff deadline passed), stages are judged from 0 (splitJudge). It
// returns false (and does nothing) while an input waits for a proof.
func (k *Keeper) splitSettle(j *Job, ts []*verifier.Task, final bool) bool {
	states := splitInputs(ts)
	if !final && splitPending(states) {
		return false
	}
	// P8: two different stage-0 inputs, both signed by the client.
	var signed []types.Hash
	for c := range ts[0].Slots {
		if sl := &ts[0].Slots[c]; states[0][c] == inProven && !slices.Contains(signed, inputKey(sl)) {
			signed = append(signed, inputKey(sl))
		}
	}
	if len(signed) > 1 {
		k.emit(EventClientEquivocated{Job: j.ID, Inputs: uint64(len(signed))})
	}
	k.splitJudge(j, ts, states, 0, nil, len(signed) > 1)
	k.setJob(j)
	return true
}

// splitJudge judges stages from..end of a split job, each in turn. Each
// live slot whose input is not established settles on its own
// (input_lie or input_unproven); so does each slot of a chain outside
// keep (nil keeps every chain): downstream_of_loser, unpaid. The stage
// groups the other slots by input (steps, Hin):
//
//   - the first group whose outputs differ is disputed (validators vote
//     for the Hout; the verdict pays and slashes that group), and every
//     later stage is held (TaskHeld) until that verdict (splitRelease);
//   - else the largest group (first by chain on a tie) is compared: with
//     r agreeing slots it confirms as an agreed task; with fewer (a
//     partner chain knocked out, a no-show, an input only one slot has)
//     it is audited: the validators replay it before it is paid
//     (AppVersion 8, review 2's M-H4: it was paid "unverified");
//   - slots in any other group settle on their own, not_compared:
//     unpaid, not slashed (nothing compares them; before AppVersion 8
//     they were paid unverified), unless the client signed two prompts
//     (clientTwoInputs, P8) and the slot's chain computed on the one not
//     compared: client_input, paid by the client that ordered it.
//
// Nothing in a split job is paid without r agreeing slots or a vote.
func (k *Keeper) splitJudge(j *Job, ts []*verifier.Task, states [][]inputState, from int, keep func(c int) bool, clientTwoInputs bool) {
	diverged := false
	// clientChain[c]: chain c computed on a second prompt the client
	// signed (P8): its slots outside the compared group are the client's
	// doing, paid as client_input.
	clientChain := make([]bool, j.Redundancy)
	for si := from; si < len(ts); si++ {
		t := ts[si]
		s := uint16(si)
		var est []int
		for c := range t.Slots {
			switch st := states[si][c]; {
			case !t.Slots[c].Live() || st == inNone:
			case st == inInconsistent:
				k.splitSlot(j, s, t, c, SplitInputLie)
			case st == inUnknown:
				k.splitSlot(j, s, t, c, SplitInputUnproven)
			case keep != nil && !keep(c):
				k.splitSlot(j, s, t, c, SplitDownstreamOfLoser)
			default:
				est = append(est, c)
			}
		}
		if diverged {
			t.Status = verifier.TaskHeld
			k.setTask(j, s, t)
			continue
		}
		groups := groupByInput(t, est)
		cmp, conflict := -1, false
		for g := range groups {
			if len(distinctOutputs(t, groups[g])) > 1 {
				cmp, conflict = g, true
				break
			}
		}
		if cmp < 0 {
			for g := range groups {
				if cmp < 0 || len(groups[g]) > len(groups[cmp]) {
					cmp = g
				}
			}
		}
		for g := range groups {
			if g == cmp {
				continue
			}
			for _, c := range groups[g] {
				outcome := SplitNotCompared
				if clientTwoInputs && c < len(clientChain) && (clientChain[c] || (si == 0 && states[0][c] == inProven)) {
					outcome, clientChain[c] = SplitClientInput, true
				}
				k.splitSlot(j, s, t, c, outcome)
			}
		}
		switch {
		case cmp < 0:
			k.settle(j, s, t, "no_results", types.Hash{})
		case conflict:
			diverged = true
			in := &t.Slots[groups[cmp][0]]
			k.emit(EventSplitDiverged{Job: j.ID, Stage: s, Steps: in.Steps, Hin: in.Hin})
			k.openVote(j, s, t, verifier.TaskDisputed, t.Revealed())
		case len(groups[cmp]) < int(j.Redundancy):
			k.openAudit(j, s, t, verifier.AuditSplit, t.Slots[groups[cmp][0]].Result)
		default:
			k.confirm(j, s, t, t.Slots[groups[cmp][0]].Result)
		}
	}
}

// splitRelease runs when a disputed split stage d settles: the stages
// held after it are judged now, keeping only the replica chains whose
// stage-d slot revealed the verdict (the others computed on an input the
// validators rejected, or none was decided: downstream_of_loser).
func (k *Keeper) splitRelease(j *Job, d uint16, decided bool, verdict types.Hash) {
	ts := make([]*verifier.Task, j.Stages)
	held := false
	for s := range ts {
		t, ok := k.ver.GetTask(j.ID, uint16(s))
		if !ok {
			return
		}
		ts[s] = t
		held = held || (s > int(d) && t.Status == verifier.TaskHeld)
	}
	if !held {
		return
	}
	up := ts[d]
	keep := func(c int) bool {
		return decided && c < len(up.Slots) && up.Slots[c].Revealed && up.Slots[c].Result == verdict
	}
	for s := int(d) + 1; s < len(ts); s++ {
		ts[s].Status = verifier.TaskExecuting // judged as the scan would have
	}
	k.splitJudge(j, ts, splitInputs(ts), int(d)+1, keep, false)
	k.setJob(j)
}

// inputKey is a slot's input (steps, Hin) as one comparable hash.
func inputKey(sl *verifier.Slot) types.Hash {
	return sha256.Sum256(append(binary.BigEndian.AppendUint32(nil, sl.Steps), sl.Hin[:]...))
}

// groupByInput groups slot indexes by input, groups in the order of their
// first slot.
func groupByInput(t *verifier.Task, idx []int) [][]int {
	var keys []types.Hash
	var out [][]int
	for _, c := range idx {
		key := inputKey(&t.Slots[c])
		g := slices.Index(keys, key)
		if g < 0 {
			keys, out = append(keys, key), append(out, nil)
			g = len(out) - 1
		}
		out[g] = append(out[g], c)
	}
	return out
}

// distinctOutputs lists the different outputs (Hout) of slots idx. Slots
// of one group share their steps, so Hout alone tells outputs apart.
func distinctOutputs(t *verifier.Task, idx []int) []types.Hash {
	var out []types.Hash
	for _, c := range idx {
		if r := t.Slots[c].Result; !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}
