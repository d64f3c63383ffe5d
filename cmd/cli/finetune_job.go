package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ogpu-network/ogpu/internal/progress"
	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/types"
)

// addFinetuneFlags adds the flags of `ogpu job run --kind finetune` (the
// shared ones, --model, --ctx, --redundancy, --max-price, windows, are the
// job command's).
func addFinetuneFlags(f interface {
	String(name, value, usage string) *string
	Int(name string, value int, usage string) *int
	Uint32(name string, value uint32, usage string) *uint32
}) {
	f.String("data", "", "finetune: UTF-8 text file to train on (served to the winning providers only)")
	f.Int("epochs", agent.DefaultFinetuneEpochs, "finetune: passes over the data")
	f.Uint32("lr-micro", agent.DefaultFinetuneLRMicro, "finetune: learning rate in millionths (3000 = 3e-3)")
	f.Int("stride", agent.DefaultFinetuneStride, "finetune: tokens between datapoint starts (1..--ctx)")
	f.Int("validation", 0, "finetune: datapoints held out at the end and evaluated after each epoch")
	f.String("out", ".", "finetune: folder for the fine-tuned model (finetune-JOB.gguf)")
	f.String("sample", "", "finetune: a prompt to generate from with the verified model (greedy, here), to see what it learned")
}

// finetuneJobFromFlags reads `ogpu job run --kind finetune`'s flags into a
// job and checks it here (the runtime's checks, the step count), before
// any node is dialed.
func finetuneJobFromFlags(cmd *cobra.Command) (agent.FinetuneJob, error) {
	f := cmd.Flags()
	var j agent.FinetuneJob
	if pool, _ := f.GetBool("pool"); pool {
		return j, errors.New("--pool: a fine-tune job is sold by sealed-bid auction; drop --pool")
	}
	if s, _ := f.GetInt("stages"); s > 1 {
		return j, errors.New("--stages: a fine-tune job has one stage (every provider trains the whole head); drop --stages")
	}
	j.Base, _ = f.GetString("model")
	dataFile, _ := f.GetString("data")
	switch {
	case j.Base == "" || dataFile == "":
		return j, errors.New("a fine-tune job needs --model BASE.gguf (an F32 model whose output matrix is not tied to the embeddings) and --data FILE (UTF-8 text)")
	}
	if st, err := os.Stat(j.Base); err != nil || st.IsDir() {
		return j, fmt.Errorf("--model %q: a fine-tune job needs the base model's GGUF file here (its tokenizer plans the steps, its head is hashed as the first checkpoint)", j.Base)
	}
	data, err := os.ReadFile(dataFile)
	if err != nil {
		return j, fmt.Errorf("--data: %w", err)
	}
	j.Data = data
	j.Epochs, _ = f.GetInt("epochs")
	j.LRMicro, _ = f.GetUint32("lr-micro")
	j.Stride, _ = f.GetInt("stride")
	j.Validation, _ = f.GetInt("validation")
	j.Ctx = agent.DefaultFinetuneCtx
	if f.Changed("ctx") {
		j.Ctx, _ = f.GetInt("ctx")
	}
	// 0 means "the default" to the library: a user's 0 is a mistake.
	switch {
	case j.Epochs < 1:
		return j, fmt.Errorf("--epochs %d: want at least 1", j.Epochs)
	case j.LRMicro < 1:
		return j, fmt.Errorf("--lr-micro %d: want 1..1000000 (the learning rate in millionths: 3000 is 3e-3)", j.LRMicro)
	case j.Ctx < 1:
		return j, fmt.Errorf("--ctx %d: want a multiple of 32 (tokens per datapoint)", j.Ctx)
	case j.Stride < 1:
		return j, fmt.Errorf("--stride %d: want 1..--ctx", j.Stride)
	case j.Validation < 0:
		return j, fmt.Errorf("--validation %d: want 0 or more datapoints", j.Validation)
	}
	if prompt, _ := f.GetString("sample"); prompt != "" {
		if n, _ := f.GetInt("sample-tokens"); n < 1 {
			return j, fmt.Errorf("--sample-tokens %d: want at least 1", n)
		}
	}
	if j.Redundancy, j.MaxPrice, _, j.Windows, err = jobTerms(cmd); err != nil {
		return j, err
	}
	if !f.Changed("execute-blocks") {
		j.Windows.Execute = 0 // sized from the step count (agent.FinetuneWindows)
	}
	j.Class, _ = f.GetString("class")
	j.Attributes, _ = f.GetStringArray("require")
	j.OutDir, _ = f.GetString("out")
	quietLlama("warn")
	if _, err := agent.CheckFinetune(j); err != nil {
		return j, err
	}
	return j, nil
}

// FinetuneJobOutput is what `ogpu job run --kind finetune` prints with -o
// json.
type FinetuneJobOutput struct {
	*agent.FinetuneResult
	// Sample is the model's greedy continuation of --sample.
	Sample string `json:"sample,omitempty"`
}

// FinetuneModelOutput is what `ogpu job result` prints for a fine-tune job
// with -o json.
type FinetuneModelOutput struct {
	*agent.FetchedModel
	Sample string `json:"sample,omitempty"`
}

// finetuneSample is --sample's greedy continuation with the model at path
// ("" without --sample).
func finetuneSample(ctx context.Context, cmd *cobra.Command, path string) (string, error) {
	prompt, _ := cmd.Flags().GetString("sample")
	if prompt == "" {
		return "", nil
	}
	n, _ := cmd.Flags().GetInt("sample-tokens")
	return agent.SampleModel(ctx, path, prompt, n)
}

func runFinetuneJob(ctx context.Context, cmd *cobra.Command) error {
	j, err := finetuneJobFromFlags(cmd)
	if err != nil {
		return err
	}
	cl, closeFn, err := clientSession(cmd, ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	bar := progress.NewTraining(cmd.ErrOrStderr())
	j.OnStep = bar.Step
	res, err := cl.RunFinetune(ctx, j, bar.Line, bar.Epoch)
	bar.End()
	if err != nil {
		return err
	}
	sample, err := finetuneSample(ctx, cmd, res.Model)
	if err != nil {
		return err
	}
	prompt, _ := cmd.Flags().GetString("sample")
	return output(cmd, FinetuneJobOutput{res, sample}, func(w io.Writer) {
		fmt.Fprintf(w, "fine-tuned model: %s\n", res.Model)
		if prompt != "" {
			fmt.Fprintf(w, "%s%s\n", prompt, sample)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "job %d %s: %d steps, final hash %x, fetched from %s and verified\n", res.Job, res.Outcome, res.Plan.Steps, res.Final, res.From.Hex())
		if len(res.EpochLoss) > 0 {
			loss := make([]string, len(res.EpochLoss))
			for i, l := range res.EpochLoss {
				loss[i] = fmt.Sprintf("%.4f", l)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "loss per epoch (reported by %s): %s\n", res.StreamedFrom.Hex(), strings.Join(loss, " → "))
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "paid %s to providers, refunded %s, compensation %s, validator fee %s; %d blocks, %s\n",
			types.FormatAmount(res.Paid), types.FormatAmount(res.Refunded), types.FormatAmount(res.Compensated),
			types.FormatAmount(res.ValidatorFee), res.Completed-res.Posted, res.Elapsed.Round(time.Millisecond))
	})
}

// finetuneResult is `ogpu job result ID` for a fine-tune job: fetch the
// model from the paid providers, verify it, write it to --out.
func finetuneResult(ctx context.Context, cmd *cobra.Command, cl *agent.Client, id uint64) error {
	out, _ := cmd.Flags().GetString("out")
	if out == "" {
		out = fmt.Sprintf("finetune-%d.gguf", id)
	}
	m, err := cl.FetchFinetuneModel(ctx, id, out)
	if err != nil {
		return err
	}
	sample, err := finetuneSample(ctx, cmd, m.Path)
	if err != nil {
		return err
	}
	prompt, _ := cmd.Flags().GetString("sample")
	return output(cmd, FinetuneModelOutput{m, sample}, func(w io.Writer) {
		fmt.Fprintf(w, "%s\n", m.Path)
		if prompt != "" {
			fmt.Fprintf(w, "%s%s\n", prompt, sample)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "job %d: fine-tuned model from %s, trained tensors hash %x (the paid final), file %x\n", id, m.From.Hex(), m.Final, m.Hash)
	})
}
