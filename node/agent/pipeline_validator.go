package agent

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/types"
)

// Bounds on the blobs of a pipeline job the validator fetches. The model
// is bounded by the job's ModelSize; a ciphertext by maxPush, the bound
// the push protocol puts on the same blobs (a fresh N14 ciphertext is
// about 2 MB); evaluation keys by maxEvalKeysBlob (N14 keys for 8 slots
// are 52 MB, for the most slots he allows a few times that).
const (
	maxPipelineInputBlob = 4 << 10
	maxEvalKeysBlob      = 1 << 30
)

// reexecutePipeline re-executes disputed stage s of pipeline job j and
// returns the hash of its output: CKKS evaluation is deterministic, so the
// honest output is bit for bit what the validator computes from the agreed
// input (the client's ciphertext for stage 0, the settled result of stage
// s-1 after it). Every blob is fetched no larger than the job allows
// before the shared loaders find it in the store.
func (v *Validator) reexecutePipeline(ctx context.Context, j *chain.JobView, s int) (types.Hash, error) {
	if err := v.prefetchPipeline(ctx, j, s); err != nil {
		return types.Hash{}, err
	}
	parts, err := loadPipelineParts(ctx, v.Host, v.Chain, v.Store, j)
	if err != nil {
		return types.Hash{}, err
	}
	input := stageInput(j, parts.In, s)
	switch {
	case input == (types.Hash{}):
		return types.Hash{}, fmt.Errorf("job %d stage %d: stage %d has not settled, there is no agreed input", j.ID, s, s-1)
	case s == 0:
		err = fetchFromParties(ctx, v.Host, v.Chain, v.Store, j, input)
	default:
		err = fetchVerdict(ctx, v.Host, v.Chain, v.Store, j, s-1, input)
	}
	if err != nil {
		return types.Hash{}, err
	}
	inBytes, err := v.Store.Get(input)
	if err != nil {
		return types.Hash{}, err
	}
	ev, err := parts.evaluator(v.Store, parts.Model)
	if err != nil {
		return types.Hash{}, err
	}
	t0 := time.Now()
	out, err := evalStage(ev, s, inBytes)
	if err != nil {
		return types.Hash{}, fmt.Errorf("re-execute job %d stage %d: %w", j.ID, s, err)
	}
	mine := types.Hash(sha256.Sum256(out))
	v.Logger.Info("re-executed the disputed stage", "job", j.ID, "stage", s, "input", fmt.Sprintf("%x", input[:8]),
		"output", fmt.Sprintf("%x", mine[:8]), "took", time.Since(t0).Round(time.Millisecond))
	return mine, nil
}

// prefetchPipeline fetches, each within its bound, the blobs stage s of j
// needs and the store lacks: the input manifest, the model (ModelSize),
// the evaluation keys and the stage's input ciphertext. Peers: the client
// and the job's providers; for a later stage's input, the providers of
// the previous stage that revealed it.
func (v *Validator) prefetchPipeline(ctx context.Context, j *chain.JobView, s int) error {
	var parties []peer.ID
	for _, a := range slotProviders(j) {
		if pid, err := connectProvider(ctx, v.Host, v.Chain, a); err == nil {
			parties = append(parties, pid)
		}
	}
	parties = append(peersOf(v.Host, j.Client), parties...)
	get := func(h types.Hash, limit int64, what string, peers []peer.ID) error {
		if v.Store.Has(h) {
			return nil
		}
		if _, err := v.Host.Fetch(ctx, h, p2p.FetchOptions{Peers: peers, MaxSize: limit}); err != nil {
			return fmt.Errorf("job %d: cannot fetch its %s %x (at most %d bytes): %w", j.ID, what, h[:8], limit, err)
		}
		return nil
	}
	if err := get(j.Input, maxPipelineInputBlob, "input manifest", parties); err != nil {
		return err
	}
	bz, err := v.Store.Get(j.Input)
	if err != nil {
		return err
	}
	in, err := DecodePipelineInput(bz)
	if err != nil {
		return err
	}
	if in.Model != j.Model {
		return fmt.Errorf("job %d's input names model %x, the job %x", j.ID, in.Model[:8], j.Model[:8])
	}
	if j.ModelSize == 0 || j.ModelSize > uint64(blobstore.MaxSize) {
		if !v.Store.Has(j.Model) {
			return fmt.Errorf("job %d declares a model size of %d bytes: the validator fetches no model of unknown or impossible size", j.ID, j.ModelSize)
		}
	} else if err := get(j.Model, int64(j.ModelSize), "model", parties); err != nil {
		return err
	}
	if err := get(in.Keys, maxEvalKeysBlob, "evaluation keys", parties); err != nil {
		return err
	}
	input := stageInput(j, in, s)
	switch {
	case input == (types.Hash{}):
		return nil // reexecutePipeline explains
	case s == 0:
		return get(input, maxPush, "input ciphertext", parties)
	}
	var peers []peer.ID
	for _, sl := range j.Tasks[s-1].Slots {
		if sl.Result != nil && *sl.Result == input {
			if pid, err := connectProvider(ctx, v.Host, v.Chain, sl.Provider); err == nil {
				peers = append(peers, pid)
			}
		}
	}
	return get(input, maxPush, fmt.Sprintf("stage %d input ciphertext", s), peers)
}
