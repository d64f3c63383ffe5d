package market

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/finetune"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// Fine-tune jobs (issue 16; protocol-threats §3).
//
// A fine-tune job (kind "finetune", MsgPostJob with FinetuneTerms) sells
// one training run: Redundancy providers fine-tune Model (the base GGUF
// blob) on Input (the dataset blob: UTF-8 text of exactly DatasetSize
// bytes) with the terms' hyper-parameters, in the training determinism
// class Req.Class (which every slot and the validators share, T9; a
// provider publishes its own as ProviderInfo.TrainClass). One stage,
// sold by sealed-bid auction like an inference job, with the same
// windows.
//
//   - The data order's seed is FinetuneSeed(job seal, hash of the award
//     block): fixed after the award, chosen by nobody (T10). It is on the
//     job (TrainSeed) from the award on.
//   - A slot commits ResultCommitment(FinetuneResult(root, final), salt,
//     provider) as for any job (commitments bind the committer, T13), and
//     reveals with MsgRevealFinetune: the root of its checkpoint tree
//     (package finetune, N+1 leaves), its final hash, and proofs that the
//     tree opens leaf 0 to the job's Base and leaf N to the final (T2).
//     A reveal whose proofs fail is refused: the slot is a no-show at the
//     reveal deadline.
//   - Equal results settle "agreed" after the canary window, as any job.
//     Results that differ only in their trees, under one final hash,
//     agree on the model: every revealed slot is paid (audits of agreed
//     jobs, T4, are not built yet). Otherwise the task goes to the
//     step-bisection games (TaskGame): slots grouped by claim, a knockout
//     bracket of games, each bisected to one step that the validators
//     re-execute (package finetune). A game's losers are slashed
//     fraud_slash_bps and tombstoned when it is decided (silence in a
//     game costs the same, T6), the client compensated at most the slot's
//     price (what it paid for the disproven work, §4 rule 4); when the bracket is done the surviving
//     slots are paid and the others' payments refunded ("game"), or, on a
//     class failure (no 2/3 among the validators), every slot is refunded
//     and nobody more is slashed ("class_failure", T9).
//   - At posting, the job's life plus the longest bracket its slots can
//     play (MaxBracketBlocks(r, 1, N): every slot its own root under
//     repeated finals) must stay below unbonding_blocks, so that every
//     slot's stake answers for the games (T5).

// KindFinetune is a fine-tune job.
const KindFinetune = "finetune"

// TrainableHead is the one trainable set the pinned llama.cpp trains
// correctly: output.weight and output_norm.weight (runtime/llm/train).
const TrainableHead = "head"

// Bounds of FinetuneTerms: those of runtime/llm/train (its tests check
// that they agree).
const (
	MaxFinetuneEpochs     = 1000
	MaxFinetuneLRMicro    = 1_000_000
	MinFinetuneCtx        = 64 // llama.cpp raises n_batch to 64 (GGML_KQ_MASK_PAD)
	MaxFinetuneCtx        = 4096
	MaxFinetuneValidation = 1 << 20
)

// FinetuneTerms are a fine-tune job's terms, fixed at posting. Integers
// only: the learning rate is in millionths.
type FinetuneTerms struct {
	// Base is the canonical hash of the base model's trained tensors
	// (leaf 0 of every checkpoint tree; train.HashCheckpoint).
	Base types.Hash
	// DatasetSize is the dataset blob's size in bytes.
	DatasetSize uint64
	Epochs      uint64
	LRMicro     uint64
	// Ctx is tokens per datapoint (a multiple of 32), Stride the tokens
	// between datapoint starts, Validation the datapoints held out.
	Ctx, Stride, Validation uint64
	// Steps is N: epochs × trained datapoints, as train.PlanJob counts
	// them with the base model's tokenizer. A provider whose count
	// differs reports the input (T11).
	Steps uint64
	// Trainable is the trained tensor set: TrainableHead.
	Trainable string
}

// validateFinetunePost checks a fine-tune post's shape; PostJob checks the
// parameters (validateFinetuneParams).
func validateFinetunePost(m *MsgPostJob) error {
	t := m.Finetune
	switch {
	case m.Stages != 1:
		return fmt.Errorf("a fine-tune job has one stage")
	case m.Mode != ModeAuction:
		return fmt.Errorf("a fine-tune job is sold by auction")
	case m.Input == (types.Hash{}):
		return fmt.Errorf("a fine-tune job needs its dataset: input is the dataset blob's hash")
	case m.Req.Class == "":
		return fmt.Errorf("a fine-tune job names its training determinism class (requirements: class; ogpu model finetune prints it): every slot and the validators must reproduce it bit for bit")
	case t.Trainable != TrainableHead:
		return fmt.Errorf("trainable set %q: only %q (output.weight, output_norm.weight) trains correctly on the pinned llama.cpp; the others wait for the fix of llama.cpp #24305 in a maintained binding", t.Trainable, TrainableHead)
	case t.Base == (types.Hash{}):
		return fmt.Errorf("base hash is missing: the hash of the base model's trained tensors (ogpu model finetune prints it)")
	case t.DatasetSize == 0:
		return fmt.Errorf("dataset size must be positive")
	case t.Epochs == 0 || t.Epochs > MaxFinetuneEpochs:
		return fmt.Errorf("epochs %d: want 1..%d", t.Epochs, MaxFinetuneEpochs)
	case t.LRMicro == 0 || t.LRMicro > MaxFinetuneLRMicro:
		return fmt.Errorf("learning rate %d millionths: want 1..%d", t.LRMicro, MaxFinetuneLRMicro)
	case t.Ctx < MinFinetuneCtx || t.Ctx > MaxFinetuneCtx || t.Ctx%32 != 0:
		return fmt.Errorf("context %d: want a multiple of 32 from %d to %d", t.Ctx, MinFinetuneCtx, MaxFinetuneCtx)
	case t.Stride == 0 || t.Stride > t.Ctx:
		return fmt.Errorf("stride %d: want 1..context (%d)", t.Stride, t.Ctx)
	case t.Validation > MaxFinetuneValidation:
		return fmt.Errorf("validation %d datapoints: at most %d", t.Validation, MaxFinetuneValidation)
	case t.Steps == 0:
		return fmt.Errorf("steps must be positive (epochs × trained datapoints)")
	case t.Steps%t.Epochs != 0:
		return fmt.Errorf("steps %d is not a multiple of epochs %d: each epoch trains the same datapoints", t.Steps, t.Epochs)
	}
	return nil
}

// checkFinetuneLife checks a fine-tune post against the chain's
// parameters: fine-tune jobs on, the dataset and step count within
// bounds, and the job's life plus its longest bracket of games below
// unbonding_blocks.
func (k *Keeper) checkFinetuneLife(m *MsgPostJob, life uint64) error {
	fp := k.p.Finetune
	if fp == nil {
		return types.ErrInvalidMsg.Wrapf("post-job: this chain takes no fine-tune jobs (params.market.finetune is not set)")
	}
	t := m.Finetune
	switch {
	case t.DatasetSize > fp.MaxDatasetBytes:
		return types.ErrInvalidMsg.Wrapf("post-job: dataset of %d bytes: at most %d (params.market.finetune.max_dataset_bytes)", t.DatasetSize, fp.MaxDatasetBytes)
	case t.Steps > fp.MaxSteps:
		return types.ErrInvalidMsg.Wrapf("post-job: %d steps: at most %d (params.market.finetune.max_steps)", t.Steps, fp.MaxSteps)
	}
	games := finetune.Params(*fp).MaxBracketBlocks(uint64(m.Redundancy), 1, t.Steps)
	if total := life + games; total >= k.ctx.Params.Staking.UnbondingBlocks {
		return types.ErrInvalidMsg.Wrapf("post-job: the job's life (%d blocks) and the longest bracket of step-bisection games its %d slots can play (%d blocks) = %d must stay below unbonding_blocks (%d), so that every slot's stake answers for the games: fewer steps, fewer replicas or shorter windows",
			life, m.Redundancy, games, total, k.ctx.Params.Staking.UnbondingBlocks)
	}
	return nil
}

// FinetuneSeed is the data-order seed of a fine-tune job awarded in the
// block with hash blockHash: the first 8 bytes, big-endian, of
// sha256("ogpu/ftseed/v1" | seal | blockHash).
func FinetuneSeed(seal types.Hash, blockHash []byte) uint64 {
	h := sha256.New()
	h.Write([]byte("ogpu/ftseed/v1"))
	h.Write(seal[:])
	h.Write(blockHash)
	return binary.BigEndian.Uint64(h.Sum(nil)[:8])
}

// FinetuneResult is the result a fine-tune slot commits to:
// sha256("ogpu-finetune" | root | final).
func FinetuneResult(root, final types.Hash) types.Hash {
	h := sha256.New()
	h.Write([]byte("ogpu-finetune"))
	h.Write(root[:])
	h.Write(final[:])
	return types.Hash(h.Sum(nil))
}

// MsgRevealFinetune opens a fine-tune slot's result commitment: the
// committed result is FinetuneResult(Root, Final), and the proofs open
// leaf 0 of the tree under Root to the job's base hash and leaf N to Final.
type MsgRevealFinetune struct {
	Job        uint64
	Stage      uint16
	Salt       types.Hash
	Root       types.Hash
	Final      types.Hash
	ProofBase  []types.Hash
	ProofFinal []types.Hash
}

// Raw encodes the message.
func (m *MsgRevealFinetune) Raw() types.RawMsg {
	return types.NewRawMsg(types.MsgTypeRevealFinetune, m)
}

// Hashes is the sha256 computations verifying m costs: both proofs and
// their leaves (what its gas pays).
func (m *MsgRevealFinetune) Hashes() uint64 {
	return uint64(len(m.ProofBase)+len(m.ProofFinal)) + 4
}

// DecodeMsgRevealFinetune parses and checks a MsgRevealFinetune payload.
func DecodeMsgRevealFinetune(data []byte) (*MsgRevealFinetune, error) {
	var m MsgRevealFinetune
	if err := types.DecodeMsgPayload("reveal-finetune", data, &m); err != nil {
		return nil, err
	}
	switch {
	case m.Root == (types.Hash{}) || m.Final == (types.Hash{}):
		return nil, types.ErrInvalidMsg.Wrapf("reveal-finetune: root and final hash must be set")
	case len(m.ProofBase) > finetune.MaxProofLen || len(m.ProofFinal) > finetune.MaxProofLen:
		return nil, types.ErrInvalidMsg.Wrapf("reveal-finetune: proofs have at most %d hashes", finetune.MaxProofLen)
	}
	return &m, nil
}

// FinetuneClaim is what a revealed fine-tune result stands for.
type FinetuneClaim struct {
	Root  types.Hash
	Final types.Hash
}

// finetuneClaimKey: 0x29 | job(8) | stage(2) | result(32) -> rlp(FinetuneClaim).
func finetuneClaimKey(job uint64, stage uint16, result types.Hash) []byte {
	return cat([]byte{prefixFinetuneClaim}, be64(job), be16(stage), result[:])
}

// GetFinetuneClaim returns the root and final hash behind a revealed
// fine-tune result.
func GetFinetuneClaim(r store.Reader, job uint64, stage uint16, result types.Hash) (FinetuneClaim, bool) {
	bz := r.Get(finetuneClaimKey(job, stage, result))
	if bz == nil {
		return FinetuneClaim{}, false
	}
	var c FinetuneClaim
	decode(bz, &c, "fine-tune claim")
	return c, true
}

// RevealFinetune opens a fine-tune slot's commitment; the last reveal
// settles the task or starts its games.
func (k *Keeper) RevealFinetune(from types.Address, m *MsgRevealFinetune) error {
	j, err := k.job(m.Job)
	if err != nil {
		return err
	}
	if err := k.checkStage(j, m.Stage); err != nil {
		return err
	}
	if j.Kind != KindFinetune {
		return types.ErrInvalidMsg.Wrapf("job %d is a %s job: reveal its result with reveal-result (MsgRevealResult)", j.ID, j.Kind)
	}
	t := j.Finetune
	n := t.Steps + 1
	if !finetune.Verify(m.Root, n, 0, t.Base, m.ProofBase) {
		return types.ErrCommitMismatch.Wrapf("reveal-finetune: the proof does not open leaf 0 of root %x to job %d's base hash %x (a tree of %d leaves): the tree must start at the base model", m.Root, j.ID, t.Base, n)
	}
	if !finetune.Verify(m.Root, n, t.Steps, m.Final, m.ProofFinal) {
		return types.ErrCommitMismatch.Wrapf("reveal-finetune: the proof does not open leaf %d of root %x to the final hash %x: the tree must end at the final model", t.Steps, m.Root, m.Final)
	}
	result := FinetuneResult(m.Root, m.Final)
	task, err := k.ver.Reveal(m.Job, m.Stage, from, result, m.Salt, k.ctx.Height)
	if err != nil {
		return err
	}
	k.kv.Set(finetuneClaimKey(j.ID, m.Stage, result), encode(&FinetuneClaim{Root: m.Root, Final: m.Final}))
	k.emit(EventResultRevealed{Job: m.Job, Stage: m.Stage, Provider: from, Result: result})
	k.emit(EventFinetuneRevealed{Job: m.Job, Stage: m.Stage, Provider: from, Root: m.Root, Final: m.Final})
	k.evaluate(j, m.Stage, task, false)
	return nil
}

// games is the keeper of the step-bisection games, over the market's
// block (nil when the chain takes no fine-tune jobs).
func (k *Keeper) games() *finetune.Keeper {
	if k.p.Finetune == nil {
		return nil
	}
	return finetune.NewKeeper(finetune.Context{KV: k.kv, Height: k.ctx.Height, Events: k.ctx.Events,
		Params: finetune.Params(*k.p.Finetune), Chain: k.ctx.Params})
}

// openGames decides a fine-tune task whose revealed results differ: under
// one final hash the slots agree on the model and are all paid; otherwise
// the bracket of games starts, one group per claim.
func (k *Keeper) openGames(j *Job, stage uint16, t *verifier.Task, results []types.Hash) {
	spec := finetune.Spec{Job: j.ID, Stage: stage, Steps: j.Finetune.Steps, Base: j.Finetune.Base}
	var revealed []types.Address
	var finals []types.Hash
	for _, r := range results {
		c, ok := GetFinetuneClaim(k.kv, j.ID, stage, r)
		if !ok {
			panic(fmt.Errorf("market: job %d stage %d: revealed result %x without its claim", j.ID, stage, r))
		}
		g := finetune.GroupSpec{Root: c.Root, Final: c.Final}
		for i := range t.Slots {
			if s := &t.Slots[i]; s.Live() && s.Revealed && s.Result == r {
				g.Slots = append(g.Slots, s.Provider)
				revealed = append(revealed, s.Provider)
			}
		}
		spec.Groups = append(spec.Groups, g)
		if !slices.Contains(finals, c.Final) {
			finals = append(finals, c.Final)
		}
	}
	if len(finals) == 1 && len(revealed) < int(j.Redundancy) {
		// Fewer than r trainers reached the one final (short.go).
		k.settle(j, stage, t, OutcomeUnverified, types.Hash{})
		return
	}
	if len(finals) == 1 {
		k.settleGames(j, stage, t, revealed, "agreed_final")
		return
	}
	ft := k.games()
	if ft == nil {
		k.settleGames(j, stage, t, nil, "unresolved")
		return
	}
	if _, err := ft.OpenGame(spec); err != nil {
		// Not reached: the post bounded the steps and the award the
		// groups (r ≤ max_redundancy ≤ 64). Refund rather than halt.
		k.settleGames(j, stage, t, nil, "unresolved")
		return
	}
	t.Status = verifier.TaskGame
	k.setTask(j, stage, t)
}

// OpenCheckpoints plays a round of a fine-tune game (relayable: from is
// only recorded).
func (k *Keeper) OpenCheckpoints(from types.Address, m *finetune.MsgOpenCheckpoints) error {
	ft, err := k.gameKeeper(m.Job)
	if err != nil {
		return err
	}
	return ft.OpenCheckpoints(from, m)
}

// SealGameVote records a validator's sealed verdict on a game's last step.
func (k *Keeper) SealGameVote(from types.Address, m *finetune.MsgSealGameVote) error {
	ft, err := k.gameKeeper(m.Job)
	if err != nil {
		return err
	}
	return ft.SealVote(from, m)
}

// OpenGameVote opens a validator's verdict; the last opening decides the
// game.
func (k *Keeper) OpenGameVote(from types.Address, m *finetune.MsgOpenGameVote) error {
	ft, err := k.gameKeeper(m.Job)
	if err != nil {
		return err
	}
	d, err := ft.OpenVote(from, m)
	if err != nil {
		return err
	}
	if d != nil {
		k.gameDecided(d)
	}
	return nil
}

// gameKeeper returns the games' keeper for a message about job id.
func (k *Keeper) gameKeeper(id uint64) (*finetune.Keeper, error) {
	j, err := k.job(id)
	if err != nil {
		return nil, err
	}
	ft := k.games()
	if j.Kind != KindFinetune || ft == nil {
		return nil, types.ErrInvalidMsg.Wrapf("job %d is a %s job: it has no fine-tune games", j.ID, j.Kind)
	}
	return ft, nil
}

// gamesEndBlock works the games' deadlines due at this height.
func (k *Keeper) gamesEndBlock() {
	ft := k.games()
	if ft == nil {
		return
	}
	for _, d := range ft.EndBlock() {
		k.gameDecided(&d)
	}
}

// gameDecided applies a decided game: its losers are slashed
// fraud_slash_bps (compensation to the client) and tombstoned; when the
// stage's bracket is done, the task settles.
func (k *Keeper) gameDecided(d *finetune.Decided) {
	j, t, ok, err := k.jobTask(d.Job, d.Stage)
	if err != nil || !ok || t.Status != verifier.TaskGame {
		return // not reached: a game exists only for a task in TaskGame
	}
	for _, l := range d.Losers {
		why := "lost the fine-tune game of job " + strconv.FormatUint(j.ID, 10)
		if d.Outcome == finetune.OutcomeTimeout {
			why += " (silent in a round)"
		} else {
			why += " at step " + strconv.FormatUint(d.Step, 10)
		}
		// §4 rule 4: the client is compensated at most what it paid for
		// the disproven work (the slot's price); the rest is burned.
		res := k.esc.SlashCapped(l, k.p.FraudSlashBps, j.Client, k.p.CompensationBps, j.Prices[d.Stage])
		j.Compensated.Add(j.Compensated, res.Compensation)
		k.emit(EventSlashed{Account: l, Job: j.ID, Stage: d.Stage, Amount: res.Slashed, Compensation: res.Compensation, Burned: res.Burned, Reason: "fraud: fine-tune game " + d.Outcome})
		k.jailProvider(l, k.ctx.Height+k.p.ProviderJailBlocks, true, why)
	}
	k.setJob(j)
	if d.Done {
		survivors := d.Survivors
		outcome := "game"
		if d.ClassFailure {
			survivors, outcome = nil, "class_failure"
		}
		k.settleGames(j, d.Stage, t, survivors, outcome)
	}
}

// settleGames settles a fine-tune task whose results differed: the live
// revealed slots in pay are paid the clearing price, every other live
// slot's payment goes back to the client. The losers of games were
// slashed as each game was decided. The stage's validator fee share goes
// to the fee pool (voters with the verdict are not paid yet).
func (k *Keeper) settleGames(j *Job, stage uint16, t *verifier.Task, pay []types.Address, outcome string) {
	price := j.Prices[stage]
	paid, refund := new(uint256.Int), new(uint256.Int)
	var verdict types.Hash
	for i := range t.Slots {
		s := &t.Slots[i]
		if !s.Live() {
			continue
		}
		if s.Revealed && slices.Contains(pay, s.Provider) {
			k.esc.Release(j.ID, s.Provider, price)
			paid.Add(paid, price)
			verdict = s.Result
			k.emit(EventProviderPaid{Provider: s.Provider, Job: j.ID, Stage: stage, Amount: price.Clone(), Via: PaidViaJob})
			k.ver.UpdateReputation(s.Provider, func(r *verifier.Reputation) { r.CreditAgreed(price, k.p.MinReputationPayment) })
			continue
		}
		k.esc.Release(j.ID, j.Client, price)
		refund.Add(refund, price)
		if s.Revealed {
			lost := outcome == "game"
			k.ver.UpdateReputation(s.Provider, func(r *verifier.Reputation) {
				r.Done++
				if lost {
					r.Lost++
				}
			})
		}
	}
	k.payStageFee(j, t)
	k.closeTask(j, stage, t, outcome, verdict, paid, refund, !paid.IsZero())
}
