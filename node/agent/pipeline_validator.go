package agent

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/types"
)

// verifyPipeline re-executes disputed stage s of pipeline job j: CKKS
// evaluation is deterministic, so the honest output is the one whose hash
// the validator reproduces from the agreed input (the client's ciphertext
// for stage 0, the settled result of stage s-1 after it).
func (v *Validator) verifyPipeline(ctx context.Context, j *chain.JobView, s int) ([]Verdict, error) {
	parts, err := loadPipelineParts(ctx, v.Host, v.Chain, v.Store, j)
	if err != nil {
		return nil, err
	}
	input := stageInput(j, parts.In, s)
	switch {
	case input == (types.Hash{}):
		return nil, fmt.Errorf("job %d stage %d: stage %d has not settled, there is no agreed input", j.ID, s, s-1)
	case s == 0:
		err = fetchFromParties(ctx, v.Host, v.Chain, v.Store, j, input)
	default:
		err = fetchVerdict(ctx, v.Host, v.Chain, v.Store, j, s-1, input)
	}
	if err != nil {
		return nil, err
	}
	inBytes, err := v.Store.Get(input)
	if err != nil {
		return nil, err
	}
	ev, err := parts.evaluator(v.Store, parts.Model)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	out, err := evalStage(ev, s, inBytes)
	if err != nil {
		return nil, fmt.Errorf("re-execute job %d stage %d: %w", j.ID, s, err)
	}
	mine := types.Hash(sha256.Sum256(out))
	v.Logger.Info("re-executed the disputed stage", "job", j.ID, "stage", s, "input", fmt.Sprintf("%x", input[:8]),
		"output", fmt.Sprintf("%x", mine[:8]), "took", time.Since(t0).Round(time.Millisecond))
	var verdicts []Verdict
	seen := map[types.Hash]bool{}
	for _, sl := range j.Tasks[s].Slots {
		if sl.Result == nil || seen[*sl.Result] {
			continue
		}
		seen[*sl.Result] = true
		vd := Verdict{Result: *sl.Result, Provider: sl.Provider}
		if *sl.Result != mine {
			vd.Err = fmt.Errorf("re-executing stage %d gives %x, the provider revealed %x", s, mine[:8], sl.Result[:8])
			v.Logger.Info("output is not the stage's result", "job", j.ID, "stage", s, "provider", sl.Provider.Hex(), "revealed", fmt.Sprintf("%x", sl.Result[:8]))
		} else {
			v.Logger.Info("output verified", "job", j.ID, "stage", s, "provider", sl.Provider.Hex())
		}
		verdicts = append(verdicts, vd)
	}
	return verdicts, nil
}
