package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/finetune"
	"github.com/ogpu-network/ogpu/node/ftwork"
	"github.com/ogpu-network/ogpu/runtime/llm/train"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// The validator's side of fine-tune jobs. When a step-bisection game
// comes down to one step (finetune_game_ended), each validator of its
// voter set fetches the base model and the dataset, the agreed checkpoint
// θ_lo from any slot of the game (both groups claimed it, T8), checks it
// against h_lo, re-executes the one step in the job's class and votes the
// hash after it (sealed, then opened). If no party serves θ_lo before the
// sealing ends it votes ftwork.Withheld, which matches no claim: both
// groups lose. For an input check of a fine-tune job it checks the dataset
// against the job's terms (size, UTF-8, step count, base hash).

// errDatasetMissing: no party served a fine-tune job's dataset.
var errDatasetMissing = errors.New("dataset not available")

// gameMargin is how many blocks before the sealing ends the validator
// stops fetching θ_lo and votes what it has.
const gameMargin = 2

// handleGame re-executes the disputed step of game d and votes.
func (v *Validator) handleGame(ctx context.Context, d dispute) {
	hStar, err := v.ReexecuteGameStep(ctx, d.Job, d.Stage, d.Match)
	if err != nil {
		if ctx.Err() == nil {
			v.Logger.Error("fine-tune game check failed", "job", d.Job, "match", d.Match, "err", err)
		}
		return
	}
	vctx, cancel := untilHeight(ctx, v.Chain, d.Deadline)
	defer cancel()
	salt := voteSalt(v.Key, "game", hStar[:], d.Job, uint64(d.Stage), uint64(d.Match), d.Deadline)
	me := v.sender.Address()
	seal := &finetune.MsgSealGameVote{Job: d.Job, Stage: d.Stage, Match: d.Match, Commitment: finetune.GameVoteCommitment(d.Job, d.Stage, d.Match, hStar, salt, me)}
	open := &finetune.MsgOpenGameVote{Job: d.Job, Stage: d.Stage, Match: d.Match, HStar: hStar, Salt: salt}
	if err := v.sealAndOpen(vctx, d.Job, d.Stage, seal.Raw(), open.Raw(), fmt.Sprintf("fine-tune job %d game %d h* %x", d.Job, d.Match, hStar[:8])); err != nil && ctx.Err() == nil {
		v.Logger.Error("fine-tune game vote failed", "job", d.Job, "match", d.Match, "err", err)
	}
}

// ReexecuteGameStep computes h*, the hash after the disputed step of game
// match of job's stage, from the agreed checkpoint; ftwork.Withheld when
// no party served that checkpoint before the sealing ends. It refuses
// (an error, no vote) when this validator is not in the game's voter set.
func (v *Validator) ReexecuteGameStep(ctx context.Context, job uint64, stage, match uint16) (types.Hash, error) {
	g, err := gameOf(ctx, v.Chain, job, stage, match)
	if err != nil {
		return types.Hash{}, err
	}
	switch {
	case g.Status != finetune.StatusReexecute:
		return types.Hash{}, fmt.Errorf("the game of job %d match %d is %s, not awaiting its verdict", job, match, g.Status)
	case g.VoterPower(v.Address()) == 0:
		return types.Hash{}, fmt.Errorf("%s is not in the voter set of the game of job %d match %d", v.Address().Hex(), job, match)
	}
	by := g.SealBy
	if by > gameMargin {
		by -= gameMargin
	}
	work, cancel := untilHeight(ctx, v.Chain, by)
	defer cancel()
	j, err := v.Chain.Job(work, job)
	if err != nil {
		return types.Hash{}, err
	}
	var peers []peer.ID
	for _, gr := range g.Groups {
		for _, a := range gr.Slots {
			if pid, err := connectProvider(work, v.Host, v.Chain, a); err == nil {
				peers = append(peers, pid)
			}
		}
	}
	p, err := v.finetuneParams(work, j, peers)
	if err != nil {
		return types.Hash{}, err
	}
	hLo := g.Groups[0].HLo
	t0 := time.Now()
	dir, err := os.MkdirTemp("", "ogpu-ftcheck-")
	if err != nil {
		return types.Hash{}, err
	}
	defer os.RemoveAll(dir)
	try := func(ckpt string) (types.Hash, error) { return ftwork.CheckStep(work, p, ckpt, g.Lo, hLo) }
	if g.Lo == 0 {
		// θ_0 is the base model, which the validator holds.
		h, err := try(p.Model)
		if err != nil {
			return types.Hash{}, err
		}
		v.Logger.Info("re-executed one fine-tune step", "job", job, "match", match, "step", g.Hi, "took", time.Since(t0).Round(time.Millisecond), "h_star", fmt.Sprintf("%x", h[:8]))
		return h, nil
	}
	var last error
	for i, pid := range peers {
		path := filepath.Join(dir, fmt.Sprintf("theta-%d.bin", i))
		if err := FetchCheckpoint(work, v.Host, pid, job, stage, g.Lo, path); err != nil {
			last = err
			continue
		}
		h, err := try(path)
		if errors.Is(err, ftwork.ErrWrongCheckpoint) {
			last = err
			v.Logger.Warn("a party served a checkpoint that is not θ_lo", "job", job, "peer", pid, "err", err)
			continue
		}
		if err != nil {
			return types.Hash{}, err
		}
		v.Logger.Info("re-executed one fine-tune step", "job", job, "match", match, "step", g.Hi, "took", time.Since(t0).Round(time.Millisecond), "h_star", fmt.Sprintf("%x", h[:8]))
		return h, nil
	}
	if ctx.Err() != nil {
		return types.Hash{}, ctx.Err()
	}
	// T8: both groups claimed θ_lo; neither produced it in time.
	v.Logger.Warn("no party served the agreed checkpoint: voting withheld (both groups lose)", "job", job, "match", match, "step", g.Lo, "last_err", last)
	return ftwork.Withheld, nil
}

// finetuneParams fetches fine-tune job j's base model and dataset and
// returns its training parameters.
func (v *Validator) finetuneParams(ctx context.Context, j *chain.JobView, peers []peer.ID) (train.Params, error) {
	if j.Finetune == nil {
		return train.Params{}, fmt.Errorf("job %d is a %s job, not fine-tune", j.ID, j.Kind)
	}
	if err := v.fetchModel(ctx, j, peers); err != nil {
		return train.Params{}, err
	}
	base, err := v.Store.Path(j.Model)
	if err != nil {
		return train.Params{}, err
	}
	if err := fetchFromPartiesMax(ctx, v.Host, v.Chain, v.Store, j, j.Input, int64(j.Finetune.DatasetSize)); err != nil {
		return train.Params{}, fmt.Errorf("%w: the dataset of job %d: %v", errDatasetMissing, j.ID, err)
	}
	data, err := v.Store.Get(j.Input)
	if err != nil {
		return train.Params{}, err
	}
	return ftwork.Params(j.Finetune, j.TrainSeed, base, data, v.LLM.Threads)
}

// judgeFinetuneInput checks a fine-tune job's dataset against its terms
// (T11): InputBad when it is missing, not the declared size, not UTF-8, or
// does not give the declared step count from the declared base.
func (v *Validator) judgeFinetuneInput(ctx context.Context, j *chain.JobView) (types.Hash, string, []types.Hash) {
	p, err := v.finetuneParams(ctx, j, v.slotPeers(ctx, j))
	if err == nil {
		err = ftwork.Check(j.Finetune, p)
	}
	switch {
	case err == nil:
		return verifier.InputAvailable, "the dataset is what the job declares", []types.Hash{j.Input}
	case errors.Is(err, ftwork.ErrBadInput), errors.Is(err, errDatasetMissing):
		return verifier.InputBad, err.Error(), nil
	}
	return verifier.Abstain, err.Error(), nil
}
