package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ogpu-network/ogpu/runtime/llm"
)

// SplitStageOutput is one stage of a split plan or manifest.
type SplitStageOutput struct {
	Stage  int             `json:"stage"`
	From   int             `json:"from"`
	To     int             `json:"to"`
	Slice  string          `json:"slice,omitempty"`
	File   string          `json:"file,omitempty"`
	Size   int64           `json:"size,omitempty"`
	Memory llm.StageMemory `json:"memory"`
}

// SplitOutput describes a model and how it splits.
type SplitOutput struct {
	Model        string             `json:"model"`
	SHA256       string             `json:"sha256"`
	Architecture string             `json:"architecture"`
	Layers       int                `json:"layers"`
	NEmbd        int                `json:"n_embd"`
	NVocab       int                `json:"n_vocab"`
	Whole        llm.StageMemory    `json:"whole_memory"`
	Manifest     string             `json:"manifest,omitempty"`
	Stages       []SplitStageOutput `json:"stages,omitempty"`
	ContextSize  int                `json:"context_size"`
	BatchSize    int                `json:"batch_size"`
}

func (o *SplitOutput) print(w io.Writer) {
	fmt.Fprintf(w, "model %s\n  sha256 %s\n  %s, %d layers, n_embd %d, vocabulary %d\n", o.Model, o.SHA256, o.Architecture, o.Layers, o.NEmbd, o.NVocab)
	fmt.Fprintf(w, "  memory whole (context %d, batch %d): %s (weights %s, KV %s, output %s)\n", o.ContextSize, o.BatchSize,
		mib(o.Whole.Total), mib(o.Whole.Weights), mib(o.Whole.KV), mib(o.Whole.Output))
	for _, s := range o.Stages {
		fmt.Fprintf(w, "stage %d: layers %d..%d  memory %s (weights %s, KV %s, output %s)\n", s.Stage, s.From, s.To-1,
			mib(s.Memory.Total), mib(s.Memory.Weights), mib(s.Memory.KV), mib(s.Memory.Output))
		if s.File != "" {
			fmt.Fprintf(w, "  %s  %d bytes  sha256 %s\n", s.File, s.Size, s.Slice)
		}
	}
	if o.Manifest != "" {
		fmt.Fprintf(w, "manifest %s\n", o.Manifest)
	}
}

// mib formats a byte count.
func mib(b uint64) string {
	if b < 1<<20 {
		return fmt.Sprintf("%.1f KiB", float64(b)/1024)
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

// parseCuts reads --at 2,4.
func parseCuts(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var at []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("--at %q: %q is not a layer number", s, f)
		}
		at = append(at, n)
	}
	return at, nil
}

// splitPlan describes model info cut by stages/at (no cut when stages is 0).
func splitPlan(info *llm.ModelInfo, stages int, at []int, ctx, batch int) (*SplitOutput, error) {
	out := &SplitOutput{Model: info.Path, SHA256: fmt.Sprintf("%x", info.Hash), Architecture: info.Architecture,
		Layers: info.Layers, NEmbd: info.NEmbd, NVocab: info.NVocab, ContextSize: ctx, BatchSize: batch,
		Whole: llm.EstimateStageMemory(info, llm.LayerRange{From: 0, To: info.Layers, Of: info.Layers}, ctx, batch)}
	if stages == 0 && len(at) == 0 {
		return out, nil
	}
	if stages == 0 {
		stages = len(at) + 1
	}
	ranges, err := llm.Cuts(info.Layers, stages, at)
	if err != nil {
		return nil, err
	}
	for i, r := range ranges {
		out.Stages = append(out.Stages, SplitStageOutput{Stage: i, From: r.From, To: r.To, Memory: llm.EstimateStageMemory(info, r, ctx, batch)})
	}
	return out, nil
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
			f := cmd.Flags()
			stages, _ := f.GetInt("stages")
			atStr, _ := f.GetString("at")
			dir, _ := f.GetString("out")
			ctx, _ := f.GetInt("ctx")
			batch, _ := f.GetInt("batch")
			at, err := parseCuts(atStr)
			if err != nil {
				return err
			}
			if stages == 0 && len(at) == 0 {
				return fmt.Errorf("say how to cut: --stages K, --at L1,L2,... or both")
			}
			info, err := llm.Inspect(args[0])
			if err != nil {
				return err
			}
			plan, err := splitPlan(info, stages, at, ctx, batch)
			if err != nil {
				return err
			}
			if dir == "" {
				dir = filepath.Dir(args[0])
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			var ranges []llm.LayerRange
			for _, s := range plan.Stages {
				ranges = append(ranges, llm.LayerRange{From: s.From, To: s.To, Of: info.Layers})
			}
			files, err := llm.WriteSlices(args[0], dir, ranges)
			if err != nil {
				return err
			}
			m := llm.NewSplitManifest(info, files)
			plan.Manifest = filepath.Join(dir, fmt.Sprintf("%s.split-%d.json", strings.TrimSuffix(filepath.Base(args[0]), ".gguf"), len(files)))
			if err := m.Write(plan.Manifest); err != nil {
				return err
			}
			for i := range plan.Stages {
				plan.Stages[i].File, plan.Stages[i].Slice, plan.Stages[i].Size = files[i].Path, m.Stages[i].Slice, files[i].Size
			}
			return output(cmd, plan, func(w io.Writer) { plan.print(w) })
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
	f := cmd.Flags()
	stages, _ := f.GetInt("stages")
	atStr, _ := f.GetString("at")
	ctx, _ := f.GetInt("ctx")
	batch, _ := f.GetInt("batch")
	at, err := parseCuts(atStr)
	if err != nil {
		return err
	}
	info, err := llm.Inspect(path)
	if err != nil {
		return err
	}
	plan, err := splitPlan(info, stages, at, ctx, batch)
	if err != nil {
		return err
	}
	return output(cmd, plan, func(w io.Writer) {
		plan.print(w)
		if info.Slice != nil {
			fmt.Fprintf(w, "this file is a slice: layers %v of model %s\n", info.Slice, info.SliceOf)
		}
	})
}

// isGGUF reports whether the file at path starts with the GGUF magic.
func isGGUF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var b [4]byte
	_, err = io.ReadFull(f, b[:])
	return err == nil && string(b[:]) == "GGUF"
}
