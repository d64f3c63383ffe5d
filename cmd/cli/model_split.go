package cli

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/ogpu-network/ogpu/runtime/llm"
)

// printPlan writes a model's split plan (llm.PlanCut) as text.
func printPlan(w io.Writer, o *llm.SplitPlan) {
	fmt.Fprintf(w, "model %s\n  sha256 %s\n  %s, %d layers, n_embd %d, vocabulary %d\n", o.Model, o.SHA256, o.Architecture, o.Layers, o.NEmbd, o.NVocab)
	fmt.Fprintf(w, "  memory whole (context %d, batch %d): %s\n", o.ContextSize, o.BatchSize, memString(o.Whole))
	for _, s := range o.Stages {
		fmt.Fprintf(w, "stage %d: layers %d..%d  memory %s\n", s.Stage, s.From, s.To-1, memString(s.Memory))
		if s.File != "" {
			fmt.Fprintf(w, "  %s  %d bytes  sha256 %s\n", s.File, s.Size, s.Slice)
		}
	}
	if o.Manifest != "" {
		fmt.Fprintf(w, "manifest %s\n", o.Manifest)
	}
}

func memString(m llm.StageMemory) string {
	mib := func(b uint64) string {
		if b < 1<<20 {
			return fmt.Sprintf("%.1f KiB", float64(b)/1024)
		}
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%s (weights %s, KV %s, output %s)", mib(m.Total), mib(m.Weights), mib(m.KV), mib(m.Output))
}

// planFlags reads --stages, --at, --ctx and --batch into a plan of path.
func planFlags(cmd *cobra.Command, path string) (*llm.SplitPlan, *llm.ModelInfo, error) {
	f := cmd.Flags()
	stages, _ := f.GetInt("stages")
	atStr, _ := f.GetString("at")
	ctx, _ := f.GetInt("ctx")
	batch, _ := f.GetInt("batch")
	at, err := llm.ParseCuts(atStr)
	if err != nil {
		return nil, nil, fmt.Errorf("--at: %w", err)
	}
	info, err := llm.Inspect(path)
	if err != nil {
		return nil, nil, err
	}
	plan, err := llm.PlanCut(info, stages, at, ctx, batch)
	return plan, info, err
}

func newModelSplitCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "split MODEL.gguf --stages K [--at 2,4]",
		Short: "Cut an LLM into per-stage slices by layers, for split inference",
		Long: `Cut a GGUF model into K slice files, each holding only its layers, and write
a manifest (model hash, slice hashes, layer ranges, n_embd, architecture,
determinism class). Slicing is deterministic: the same model and cut give the
same files and hashes on every machine, so a slice is a content-addressed
blob that providers fetch and check like a model. Without --at the layers are
shared evenly. Only architectures proven bit-exact when split are accepted.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			plan, _, err := planFlags(cmd, args[0])
			if err != nil {
				return err
			}
			if len(plan.Stages) == 0 {
				return fmt.Errorf("say how to cut: --stages K, --at L1,L2,... or both")
			}
			dir, _ := cmd.Flags().GetString("out")
			if dir == "" {
				dir = filepath.Dir(args[0])
			}
			if _, err := plan.Write(dir); err != nil {
				return err
			}
			return output(cmd, plan, func(w io.Writer) { printPlan(w, plan) })
		},
	}
	f := cmd.Flags()
	f.Int("stages", 0, "number of stages")
	f.String("at", "", "cut points: the first layer of every stage after the first, e.g. 2,4")
	f.String("out", "", "directory for the slices and the manifest (default: the model's)")
	addMemoryFlags(cmd)
	return cmd
}

func addMemoryFlags(cmd *cobra.Command) {
	cmd.Flags().Int("ctx", llm.DefaultContextSize, "context size (tokens) for the memory estimate")
	cmd.Flags().Int("batch", llm.DefaultBatchSize, "batch size for the memory estimate")
}

// inspectLLM describes a GGUF model or slice, and with --stages/--at the
// memory each stage of that cut would need.
func inspectLLM(cmd *cobra.Command, path string) error {
	plan, info, err := planFlags(cmd, path)
	if err != nil {
		return err
	}
	return output(cmd, plan, func(w io.Writer) {
		printPlan(w, plan)
		if info.Slice != nil {
			fmt.Fprintf(w, "this file is a slice: layers %v of model %s\n", info.Slice, info.SliceOf)
		}
	})
}
