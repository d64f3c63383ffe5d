package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/ogpu-network/ogpu/finetune"
	"github.com/ogpu-network/ogpu/runtime/llm/train"
	"github.com/ogpu-network/ogpu/types"
)

// FinetuneOutput is what `ogpu model finetune` prints with -o json.
type FinetuneOutput struct {
	Model     string     `json:"model"`
	Class     string     `json:"class"`
	Steps     int        `json:"steps"`
	EpochLoss []float64  `json:"epoch_loss"`
	ValLoss   []float64  `json:"val_loss,omitempty"`
	Base      train.Hash `json:"base"`
	Final     train.Hash `json:"final"`
	Root      types.Hash `json:"root"`
	Sample    string     `json:"sample"`
}

// newModelFinetuneCmd is `ogpu model finetune`: the fine-tune a provider
// runs for a job, on this machine, with what it would commit.
func newModelFinetuneCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "finetune",
		Short: "Fine-tune a GGUF model's LM head on a text file here, as a provider runs a fine-tune job, and print what it would commit",
		Long: `Trains the LM head (output.weight, output_norm.weight) of --model on the UTF-8 text in --data,
one optimizer step per datapoint in a fresh llama.cpp context, in a supervised worker process.
It prints the loss of each epoch, the checkpoint hash of the base and final trained tensors, and
the checkpoint tree's root over every step's hash (what a provider commits for a fine-tune job),
and writes the fine-tuned GGUF to --out. Other trainable sets wait for llama.cpp #24305.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			model, _ := f.GetString("model")
			dataFile, _ := f.GetString("data")
			out, _ := f.GetString("out")
			if model == "" || dataFile == "" {
				return fmt.Errorf("--model FILE.gguf and --data FILE.txt are required")
			}
			data, err := os.ReadFile(dataFile)
			if err != nil {
				return fmt.Errorf("--data: %w", err)
			}
			p := train.Params{Model: model, Data: data, Trainable: "head"}
			p.Epochs, _ = f.GetInt("epochs")
			p.LRMicro, _ = f.GetUint32("lr-micro")
			p.NCtx, _ = f.GetInt("ctx")
			p.Stride, _ = f.GetInt("stride")
			p.Seed, _ = f.GetUint64("seed")
			p.Threads, _ = f.GetInt("threads")
			p.Validation, _ = f.GetInt("validation")
			if err := p.Validate(); err != nil {
				return err
			}
			quietLlama("warn")
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			ctx, stop := waitCtx(cmd)
			defer stop()
			errw := cmd.ErrOrStderr()
			res, err := train.Run(ctx, p, out, &train.Options{Progress: func(pr train.Progress) {
				if pr.Step == 0 {
					fmt.Fprintf(errw, "epoch %d: loss %.4f, validation %.4f\n", pr.Epoch, pr.Loss, pr.ValLoss)
				}
			}})
			if err != nil {
				return err
			}
			o := FinetuneOutput{Model: res.Model, Class: res.Class, Steps: len(res.Hashes) - 1, EpochLoss: res.EpochLoss, ValLoss: res.ValLoss,
				Base: res.Hashes[0], Final: res.Final, Root: finetune.RootOf(res.Hashes), Sample: res.Sample}
			return output(cmd, o, func(w io.Writer) {
				fmt.Fprintf(w, "fine-tuned %s in %d steps: %s\n  class: %s\n  base:  %s\n  final: %s\n  root:  %x (over %d checkpoint hashes)\n  sample: %q\n",
					filepath.Base(model), o.Steps, o.Model, o.Class, o.Base, o.Final, o.Root[:], len(res.Hashes), o.Sample)
			})
		},
	}
	f := cmd.Flags()
	f.String("model", "", "base GGUF model (its output matrix must not be tied to the embeddings)")
	f.String("data", "", "UTF-8 text file to train on")
	f.String("out", "finetune-out", "folder for the fine-tuned model.gguf")
	f.Int("epochs", 3, "passes over the data")
	f.Uint32("lr-micro", 3000, "learning rate in millionths (3000 = 3e-3)")
	f.Int("ctx", 64, "tokens per datapoint (a multiple of 32)")
	f.Int("stride", 32, "tokens between datapoint starts")
	f.Uint64("seed", 1, "data order seed")
	f.Int("threads", 1, "CPU threads (results do not depend on it)")
	f.Int("validation", 0, "datapoints held out at the end and evaluated after each epoch")
	return cmd
}
