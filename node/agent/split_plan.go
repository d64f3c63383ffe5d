package agent

import (
	"context"
	"strings"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/runtime/llm"
)

// ProviderMemory is the memory every registered, unjailed provider
// advertises (its ram/ attribute, e.g. ram/16Gi), for planning a split
// (llm.PlanStages). Providers without one are left out.
func ProviderMemory(ctx context.Context, c *node.Client) ([]uint64, error) {
	pvs, err := c.Providers(ctx)
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, p := range pvs {
		if p.Jailed || p.Tombstoned {
			continue
		}
		for _, a := range p.Attributes {
			if q, ok := strings.CutPrefix(a, "ram/"); ok {
				if n, err := market.ParseQuantity(q); err == nil {
					out = append(out, n)
					break
				}
			}
		}
	}
	return out, nil
}

// PrepareSplit cuts the model file into dir at ranges and returns the
// manifest. Slicing is deterministic, so the slice hashes are the ones
// providers that cut the same model the same way (ogpu model split)
// advertise.
func PrepareSplit(modelPath, dir string, ranges []llm.LayerRange) (*llm.SplitManifest, error) {
	info, err := llm.Inspect(modelPath)
	if err != nil {
		return nil, err
	}
	files, err := llm.WriteSlices(modelPath, dir, ranges)
	if err != nil {
		return nil, err
	}
	return llm.NewSplitManifest(info, files), nil
}
