package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/types"
)

// planSplit reads --stages/--at for an inference job on model (a file or a
// hash): nil ranges run the whole model.
func planSplit(ctx context.Context, cmd *cobra.Command, model string, redundancy uint16) ([]llm.LayerRange, error) {
	f := cmd.Flags()
	stages, _ := f.GetInt("stages")
	atStr, _ := f.GetString("at")
	at, err := parseCuts(atStr)
	if err != nil {
		return nil, err
	}
	if stages == 0 && len(at) > 0 {
		stages = len(at) + 1
	}
	st, statErr := os.Stat(model)
	isFile := statErr == nil && !st.IsDir() && isGGUF(model)
	switch {
	case stages == 1:
		return nil, nil
	case stages > 1 && !isFile:
		return nil, fmt.Errorf("--stages %d needs --model to be the GGUF file: the client cuts it (deterministically) to name the slices, and tokenizes with it", stages)
	case !isFile:
		return nil, nil
	}
	info, err := llm.Inspect(model)
	if err != nil {
		return nil, err
	}
	if stages > 1 {
		return llm.Cuts(info.Layers, stages, at)
	}
	c, err := dialNode(cmd)
	if err != nil {
		return nil, err
	}
	mems, err := agent.ProviderMemory(ctx, c)
	if err != nil {
		return nil, err
	}
	ctxSize, _ := f.GetInt("ctx")
	ranges, err := llm.PlanStages(info, mems, int(redundancy), ctxSize, llm.DefaultBatchSize)
	if err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "cannot plan a split (%v): running the whole model; choose with --stages\n", err)
		return nil, nil
	}
	if ranges != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "the model does not fit %d providers whole: split into %d stages (choose with --stages)\n", redundancy, len(ranges))
	}
	return ranges, nil
}

// runSplitJob runs inference job j on model cut at ranges.
func runSplitJob(ctx context.Context, cmd *cobra.Command, model string, ranges []llm.LayerRange, j agent.LLMJob) error {
	dir, err := os.MkdirTemp("", "ogpu-split-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	m, err := agent.PrepareSplit(model, dir, ranges)
	if err != nil {
		return err
	}
	v, err := llm.LoadVocab(model)
	if err != nil {
		return err
	}
	defer v.Close()
	ctxSize, _ := cmd.Flags().GetInt("ctx")
	cl, closeFn, err := clientSession(cmd, ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	errw := cmd.ErrOrStderr()
	for i, s := range m.Stages {
		fmt.Fprintf(errw, "stage %d: layers %d..%d, slice %s\n", i, s.From, s.To-1, s.Slice)
	}
	progress, onText, done := streamText(cmd, j.Prompt)
	res, err := cl.RunSplit(ctx, agent.SplitJob{
		Manifest: m, Vocab: v, Prompt: j.Prompt, MaxTokens: j.MaxTokens, Redundancy: j.Redundancy,
		MaxPrice: j.MaxPrice, Req: j.Req, Windows: j.Windows, ContextSize: ctxSize,
	}, progress, onText)
	done()
	asJSON := jsonOutput(cmd)
	if res != nil && asJSON {
		if oerr := output(cmd, res, nil); oerr != nil {
			return oerr
		}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(errw, "split job %d: stages settled %v; paid %s to providers, refunded %s, compensation %s; %d blocks, %s (first token %s, then %s)\n",
		res.Job, res.Outcomes, types.FormatAmount(res.Paid), types.FormatAmount(res.Refunded), types.FormatAmount(res.Compensated),
		res.Completed-res.Posted, res.Elapsed.Round(time.Millisecond), res.TTFT.Round(time.Millisecond), res.Decode.Round(time.Millisecond))
	return nil
}
