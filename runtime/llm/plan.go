package llm

import (
	"errors"
	"fmt"
	"slices"
)

// PlanStages chooses how to run the model info on providers whose memory
// (bytes each can give a job) is memories, with redundancy replicas of
// every stage, a context of contextSize tokens and batch rows: never split
// what fits — one stage (the whole model, nil ranges) when redundancy
// providers can hold it; else the fewest stages, cut evenly (the longest
// stages, as `ogpu model split --stages K` cuts them), such that
// redundancy × K providers can each hold one stage. The bound is
// EstimateStageMemory's; a provider is counted once (one account, one slot
// of a split job).
func PlanStages(info *ModelInfo, memories []uint64, redundancy, contextSize, batch int) ([]LayerRange, error) {
	if redundancy < 1 {
		return nil, fmt.Errorf("redundancy %d: want >= 1", redundancy)
	}
	if len(memories) == 0 {
		return nil, errors.New("no provider advertises its memory")
	}
	mem := slices.Clone(memories)
	slices.SortFunc(mem, func(a, b uint64) int { // largest first
		switch {
		case a > b:
			return -1
		case a < b:
			return 1
		}
		return 0
	})
	whole := EstimateStageMemory(info, LayerRange{From: 0, To: info.Layers, Of: info.Layers}, contextSize, batch)
	if len(mem) >= redundancy && mem[redundancy-1] >= whole.Total {
		return nil, nil
	}
	for k := 2; k <= info.Layers; k++ {
		need := k * redundancy
		if need > len(mem) {
			break
		}
		ranges, err := Cuts(info.Layers, k, nil)
		if err != nil {
			return nil, err
		}
		var most uint64
		for _, r := range ranges {
			most = max(most, EstimateStageMemory(info, r, contextSize, batch).Total)
		}
		if mem[need-1] >= most {
			return ranges, nil
		}
	}
	return nil, fmt.Errorf("the model needs %d bytes whole; %d providers advertising %d bytes at most cannot hold it in %d replicas even one layer per stage", whole.Total, len(mem), mem[0], redundancy)
}
