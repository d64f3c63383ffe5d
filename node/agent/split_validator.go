package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/runtime/stagehost"
	"github.com/ogpu-network/ogpu/split"
	"github.com/ogpu-network/ogpu/types"
)

// reexecuteSplit re-executes the disputed or audited stage of split job
// j: it fetches the stage's input transcript from a provider of the
// stage's compared group (its slots revealed the same input, so any of
// them will do; slots settled on their own are outside the vote),
// checks it as the stage's receiver did (the upstream's signature on
// every frame, steps, positions, sizes) and that it is the input they
// revealed, fetches the stage's slice, replays the transcript through it
// in a supervised worker in the job's determinism class, and returns the
// running hash of the frames an honest stage sends: the Hout to vote for.
func (v *Validator) reexecuteSplit(ctx context.Context, j *chain.JobView, stage int) (types.Hash, error) {
	if stage >= len(j.Slices) {
		return types.Hash{}, fmt.Errorf("job %d has no slice for stage %d", j.ID, stage)
	}
	chainID, err := v.Chain.ChainID(ctx)
	if err != nil {
		return types.Hash{}, err
	}
	var errs []error
	for c, s := range j.Tasks[stage].Slots {
		// A slot settled on its own (input_unproven, not_compared, ...)
		// is outside the vote: replay only the disputed or audited group.
		if s.Hin == nil || s.Result == nil || s.NoShow || s.Settled {
			continue
		}
		h, err := v.replaySlot(ctx, j, chainID, stage, uint16(c), s)
		if err == nil {
			return h, nil
		}
		v.Logger.Warn("cannot replay a split slot", "job", j.ID, "stage", stage, "chain", c, "err", err)
		errs = append(errs, fmt.Errorf("chain %d: %w", c, err))
	}
	return types.Hash{}, fmt.Errorf("no transcript of job %d stage %d could be replayed: %w", j.ID, stage, errors.Join(errs...))
}

// replaySlot replays the input transcript of slot chainIdx.
func (v *Validator) replaySlot(ctx context.Context, j *chain.JobView, chainID string, stage int, chainIdx uint16, s chain.SlotView) (types.Hash, error) {
	pid, err := connectProvider(ctx, v.Host, v.Chain, s.Provider)
	if err != nil {
		return types.Hash{}, err
	}
	tr, err := FetchTranscript(ctx, v.Host, pid, j.ID, uint16(stage), chainIdx)
	if err != nil {
		return types.Hash{}, err
	}
	upstream := j.Client
	if stage > 0 {
		up := j.Tasks[stage-1].Slots
		if int(chainIdx) >= len(up) {
			return types.Hash{}, fmt.Errorf("no upstream slot %d", chainIdx)
		}
		upstream = up[chainIdx].Provider
	}
	slice := j.Slices[stage]
	if !v.Store.Has(slice) {
		// A slice is smaller than its model, plus a zero placeholder of
		// the embeddings at most as large.
		if _, err := v.Host.Fetch(ctx, slice, p2p.FetchOptions{Peers: append(peersOf(v.Host, s.Provider), pid), MaxSize: 2 * int64(j.ModelSize)}); err != nil {
			return types.Hash{}, fmt.Errorf("fetch slice %x of stage %d: %w", slice[:8], stage, err)
		}
	}
	path, err := v.Store.Path(slice)
	if err != nil {
		return types.Hash{}, err
	}
	var classes []string
	for _, sl := range j.Tasks[stage].Slots {
		if p, err := v.Chain.Provider(ctx, sl.Provider); err == nil {
			classes = append(classes, p.Class)
		}
	}
	o, err := classOptions(v.LLM, targetClass(j.Req.Class, classes))
	if err != nil {
		return types.Hash{}, err
	}
	w, err := stagehost.Start(stagehost.Config{Slice: path, Options: o})
	if err != nil {
		return types.Hash{}, err
	}
	defer w.Close()
	info := w.Info()
	c, err := split.Replay(bytes.NewReader(tr), split.ReplayConfig{
		ChainID: chainID, Job: j.ID, Chain: chainIdx, Stage: uint16(stage), Stages: j.Stages,
		Upstream: upstream, Limits: splitLimits(o, info.NEmbd, info.NVocab),
	}, &workerForwarder{w: w, nEmbd: info.NEmbd})
	if err != nil {
		return types.Hash{}, err
	}
	if c.Hin != *s.Hin || c.T != s.Steps {
		return types.Hash{}, fmt.Errorf("the transcript served (%d frames, %x) is not the input the slot revealed (%d frames, %x)", c.T, c.Hin[:8], s.Steps, s.Hin[:8])
	}
	v.Logger.Info("replayed a split stage on its input transcript", "job", j.ID, "stage", stage, "chain", chainIdx, "frames", c.T,
		"hout", fmt.Sprintf("%x", c.Hout[:8]))
	return c.Hout, nil
}
