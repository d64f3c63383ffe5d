package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/holiman/uint256"
	"github.com/spf13/cobra"

	"github.com/ogpu-network/ogpu/he"
	"github.com/ogpu-network/ogpu/he/example"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/types"
)

// jobTerms reads the flags every job kind shares: redundancy, price cap,
// requirements and windows.
func jobTerms(cmd *cobra.Command) (r uint16, maxPrice *uint256.Int, req market.Requirements, w market.Windows, err error) {
	f := cmd.Flags()
	r, _ = f.GetUint16("redundancy")
	price, _ := f.GetString("max-price")
	if maxPrice, err = parsePositiveAmount("max price", price); err != nil {
		return
	}
	req = market.Requirements{MinStake: types.OGPU(0)}
	req.Attributes, _ = f.GetStringArray("require")
	req.Class, _ = f.GetString("class")
	w.Bid, _ = f.GetUint64("bid-blocks")
	w.Reveal, _ = f.GetUint64("reveal-blocks")
	w.Execute, _ = f.GetUint64("execute-blocks")
	w.Verify, _ = f.GetUint64("verify-blocks")
	return
}

// pipelineInput reads --input: a ciphertext file, or a JSON array of
// numbers (or a file holding one) to encrypt.
func pipelineInput(in string) (values []float64, ct []byte, err error) {
	if data, err := os.ReadFile(in); err == nil && bytes.HasPrefix(data, []byte("OGPUHE")) {
		if _, _, _, err := he.Peek(data); err != nil {
			return nil, nil, fmt.Errorf("--input %s: %w", in, err)
		}
		return nil, data, nil
	}
	values, err = parseValues("--input", in)
	return values, nil, err
}

// PipelineJobOutput is what ogpu job run --kind pipeline prints as JSON.
type PipelineJobOutput struct {
	*agent.PipelineResult
	Prediction      int       `json:"prediction"`
	Label           string    `json:"label,omitempty"`
	Plaintext       []float64 `json:"plaintext,omitempty"`
	PlainPrediction *int      `json:"plaintext_prediction,omitempty"`
	MaxAbsError     *float64  `json:"max_abs_error,omitempty"`
}

func runPipelineJob(ctx context.Context, cmd *cobra.Command) error {
	f := cmd.Flags()
	modelPath, _ := f.GetString("model")
	inputPath, _ := f.GetString("input")
	if modelPath == "" || inputPath == "" {
		return errors.New("a pipeline job needs --model (a pipeline model file, e.g. from ogpu model train-example) and --input (a JSON array of numbers or a ciphertext file)")
	}
	m, err := he.LoadModel(modelPath)
	if err != nil {
		return err
	}
	values, ct, err := pipelineInput(inputPath)
	if err != nil {
		return err
	}
	if values != nil && len(values) != m.Inputs {
		return fmt.Errorf("--input has %d values, model %s takes %d", len(values), m.Name, m.Inputs)
	}
	errw := cmd.ErrOrStderr()
	var sk *he.SecretKey
	var evalPath string
	if dir, _ := f.GetString("he-keys"); dir != "" {
		var info *HEKeysOutput
		if sk, info, err = loadHEKeys(expandHome(dir)); err != nil {
			return err
		}
		evalPath = info.EvalKeys
	} else {
		home, _ := f.GetString("home")
		if sk, evalPath, err = loadOrCreateHEKeys(home, m.Preset, m.LogSlots, errw); err != nil {
			return err
		}
	}
	ekb, err := os.ReadFile(evalPath)
	if err != nil {
		return err
	}
	j := agent.PipelineJob{Model: m, Key: sk, EvalKeys: ekb, Input: values, Ciphertext: ct}
	if j.Redundancy, j.MaxPrice, j.Req, j.Windows, err = jobTerms(cmd); err != nil {
		return err
	}
	j.Short, _ = cmd.Flags().GetString("short")
	cl, closeFn, err := clientSession(cmd, ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	res, err := cl.RunPipeline(ctx, j, func(format string, a ...any) { fmt.Fprintf(errw, format+"\n", a...) })
	if err != nil {
		return err
	}
	out := &PipelineJobOutput{PipelineResult: res, Prediction: example.Argmax(res.Output)}
	if out.Prediction < len(m.Labels) {
		out.Label = m.Labels[out.Prediction]
	}
	if values != nil {
		plain, _ := m.Forward(values)
		p := example.Argmax(plain)
		e := example.MaxAbsDiff(plain, res.Output)
		out.Plaintext, out.PlainPrediction, out.MaxAbsError = plain, &p, &e
	}
	if jsonOutput(cmd) {
		return output(cmd, out, nil)
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "decrypted output:  %s → class %s\n", example.FormatVector(res.Output), classString(m, out.Prediction))
	if values != nil {
		agree := "agree"
		if *out.PlainPrediction != out.Prediction {
			agree = "DISAGREE"
		}
		fmt.Fprintf(w, "plaintext model:   %s → class %s (%s; max difference %.2g)\n", example.FormatVector(out.Plaintext),
			classString(m, *out.PlainPrediction), agree, *out.MaxAbsError)
	}
	fmt.Fprintf(w, "job %d: %d stages verified; paid %s, refunded %s, validator fee %s; %d blocks, %s\n", res.Job, len(res.Stages),
		types.FormatAmount(res.Paid), types.FormatAmount(res.Refunded), types.FormatAmount(res.ValidatorFee),
		res.Completed-res.Posted, res.Elapsed.Round(1e6))
	return nil
}

func classString(m *he.Model, c int) string {
	if c < len(m.Labels) {
		return fmt.Sprintf("%d (%s)", c, m.Labels[c])
	}
	return fmt.Sprint(c)
}

// pipelineResult fetches pipeline job id's final ciphertext and decrypts
// it with the client's key.
func pipelineResult(ctx context.Context, cmd *cobra.Command, cl *agent.Client, id uint64) error {
	m, ct, err := cl.FetchPipelineOutput(ctx, id)
	if err != nil {
		return err
	}
	if path, _ := cmd.Flags().GetString("save"); path != "" {
		if err := os.WriteFile(path, ct, 0o644); err != nil {
			return err
		}
	}
	dir, _ := cmd.Flags().GetString("he-keys")
	if dir == "" {
		home, _ := cmd.Flags().GetString("home")
		dir = heKeyDir(home, m.Preset, m.LogSlots)
	}
	sk, _, err := loadHEKeys(expandHome(dir))
	if err != nil {
		return err
	}
	values, err := agent.DecryptOutput(sk, m, ct)
	if err != nil {
		return err
	}
	c := example.Argmax(values)
	res := map[string]any{"job": id, "output": values, "prediction": c}
	if c < len(m.Labels) {
		res["label"] = m.Labels[c]
	}
	return output(cmd, res, func(w io.Writer) {
		fmt.Fprintf(w, "decrypted output: %s → class %s\n", example.FormatVector(values), classString(m, c))
	})
}
