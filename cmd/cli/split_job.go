package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/types"
)

// splitRanges reads --stages/--at/--ctx for an inference job on model
// (agent.ChooseSplit): nil runs the whole model.
func splitRanges(ctx context.Context, cmd *cobra.Command, model string, redundancy uint16) ([]llm.LayerRange, error) {
	f := cmd.Flags()
	stages, _ := f.GetInt("stages")
	atStr, _ := f.GetString("at")
	ctxSize, _ := f.GetInt("ctx")
	at, err := llm.ParseCuts(atStr)
	if err != nil {
		return nil, fmt.Errorf("--at: %w", err)
	}
	c, err := dialNode(cmd)
	if err != nil {
		return nil, err
	}
	ranges, note, err := agent.ChooseSplit(ctx, c, model, stages, at, int(redundancy), ctxSize)
	if note != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "%s (choose with --stages)\n", note)
	}
	return ranges, err
}

// runSplitJob runs inference job j on model cut at ranges.
func runSplitJob(ctx context.Context, cmd *cobra.Command, model string, ranges []llm.LayerRange, j agent.LLMJob) error {
	ctxSize, _ := cmd.Flags().GetInt("ctx")
	cl, closeFn, err := clientSession(cmd, ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	progress, onText, done := streamText(cmd, j.Prompt)
	res, err := cl.RunSplitModel(ctx, model, ranges, agent.SplitJob{
		Prompt: j.Prompt, MaxTokens: j.MaxTokens, Redundancy: j.Redundancy,
		MaxPrice: j.MaxPrice, Req: j.Req, Windows: j.Windows, ContextSize: ctxSize,
	}, progress, onText)
	done()
	if res != nil && jsonOutput(cmd) {
		if oerr := output(cmd, res, nil); oerr != nil {
			return oerr
		}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "split job %d: stages settled %v; paid %s to providers, refunded %s, compensation %s; %d blocks, %s (first token %s, then %s)\n",
		res.Job, res.Outcomes, types.FormatAmount(res.Paid), types.FormatAmount(res.Refunded), types.FormatAmount(res.Compensated),
		res.Completed-res.Posted, res.Elapsed.Round(time.Millisecond), res.TTFT.Round(time.Millisecond), res.Decode.Round(time.Millisecond))
	return nil
}
