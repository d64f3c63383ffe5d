package agent

import (
	"context"
	"fmt"
	"os"
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

// ChooseSplit decides how an inference job on model (a GGUF file or a
// hash) runs: nil ranges run the whole model. stages 1 is the whole model;
// stages ≥ 2 (or cut points at) a split of the file, which the client needs
// to name the slices and to tokenize; stages 0 plans from the providers'
// advertised memory (llm.PlanStages: never split what fits), and where no
// plan exists, runs the whole model and says why in note.
func ChooseSplit(ctx context.Context, c *node.Client, model string, stages int, at []int, redundancy, contextSize int) (ranges []llm.LayerRange, note string, err error) {
	if stages == 0 && len(at) > 0 {
		stages = len(at) + 1
	}
	st, statErr := os.Stat(model)
	isFile := statErr == nil && !st.IsDir() && llm.IsGGUF(model)
	switch {
	case stages == 1:
		return nil, "", nil
	case stages > 1 && !isFile:
		return nil, "", fmt.Errorf("%d stages need the model as a GGUF file: the client cuts it (deterministically) to name the slices, and tokenizes with it", stages)
	case !isFile:
		return nil, "", nil
	}
	info, err := llm.Inspect(model)
	if err != nil {
		return nil, "", err
	}
	if stages > 1 {
		ranges, err = llm.Cuts(info.Layers, stages, at)
		return ranges, "", err
	}
	mems, err := ProviderMemory(ctx, c)
	if err != nil {
		return nil, "", err
	}
	ranges, err = llm.PlanStages(info, mems, redundancy, contextSize, llm.DefaultBatchSize)
	switch {
	case err != nil:
		return nil, fmt.Sprintf("cannot plan a split (%v): running the whole model", err), nil
	case ranges != nil:
		return ranges, fmt.Sprintf("the model does not fit %d providers whole: split into %d stages", redundancy, len(ranges)), nil
	}
	return nil, "", nil
}

// RunSplitModel runs j (Manifest and Vocab left empty) on the model file
// cut at ranges: it slices the model into a temporary folder (the same
// bytes providers serve), loads its vocabulary and runs the split job.
func (c *Client) RunSplitModel(ctx context.Context, model string, ranges []llm.LayerRange, j SplitJob, progress Progress, onText func(string)) (*SplitResult, error) {
	dir, err := os.MkdirTemp("", "ogpu-split-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if j.Manifest, err = PrepareSplit(model, dir, ranges); err != nil {
		return nil, err
	}
	if j.Vocab, err = llm.LoadVocab(model); err != nil {
		return nil, err
	}
	defer j.Vocab.Close()
	if progress != nil {
		for i, s := range j.Manifest.Stages {
			progress("stage %d: layers %d..%d, slice %s", i, s.From, s.To-1, s.Slice)
		}
	}
	return c.RunSplit(ctx, j, progress, onText)
}
