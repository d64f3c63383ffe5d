package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ogpu-network/ogpu/he"
	"github.com/ogpu-network/ogpu/he/example"
	"github.com/ogpu-network/ogpu/runtime/llm"
)

// Files of an HE key directory.
const (
	heSecretKeyFile = "secret.key"
	heEvalKeysFile  = "eval.keys"
)

// heKeyDir is where the CKKS keys of a preset and vector width live by
// default: HOME/he/<preset>-w<2^logSlots>.
func heKeyDir(home, preset string, logSlots int) string {
	return filepath.Join(expandHome(home), "he", fmt.Sprintf("%s-w%d", preset, 1<<logSlots))
}

// HEKeysOutput describes a key directory.
type HEKeysOutput struct {
	Dir            string `json:"dir"`
	Preset         string `json:"preset"`
	LogSlots       int    `json:"log_slots"`
	KeyID          string `json:"key_id"`
	SecretKey      string `json:"secret_key"`
	SecretKeyBytes int64  `json:"secret_key_bytes"`
	EvalKeys       string `json:"eval_keys"`
	EvalKeysBytes  int64  `json:"eval_keys_bytes"`
	// EvalKeysSHA256 is the hash of the evaluation key blob: providers
	// cache it under this hash.
	EvalKeysSHA256 string `json:"eval_keys_sha256"`
	Created        bool   `json:"created"`
}

func (o *HEKeysOutput) print(w io.Writer) {
	verb := "keys in"
	if o.Created {
		verb = "created keys in"
	}
	fmt.Fprintf(w, "%s %s\n", verb, o.Dir)
	fmt.Fprintf(w, "  key id:       %s (preset %s, vectors of %d values)\n", o.KeyID, o.Preset, 1<<o.LogSlots)
	fmt.Fprintf(w, "  secret key:   %s (%s; keep it: only it decrypts)\n", o.SecretKey, sizeString(o.SecretKeyBytes))
	fmt.Fprintf(w, "  eval keys:    %s (%s; public, sent to providers once)\n", o.EvalKeys, sizeString(o.EvalKeysBytes))
	fmt.Fprintf(w, "  eval sha256:  %s\n", o.EvalKeysSHA256)
}

func sizeString(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// generateHEKeys makes a key pair and writes it to dir: eval.keys first,
// then secret.key (mode 0600), each through a temporary file, so a
// secret.key on disk always has its evaluation keys beside it.
func generateHEKeys(dir, preset string, logSlots int) (*he.SecretKey, *HEKeysOutput, error) {
	sk, ek, err := he.GenerateKeys(preset, logSlots)
	if err != nil {
		return nil, nil, err
	}
	evalBytes, err := ek.Marshal()
	if err != nil {
		return nil, nil, err
	}
	skBytes, err := sk.Marshal()
	if err != nil {
		return nil, nil, err
	}
	defer clear(skBytes)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	out := &HEKeysOutput{Dir: dir, Preset: preset, LogSlots: logSlots, KeyID: sk.ID.String(),
		SecretKey: filepath.Join(dir, heSecretKeyFile), EvalKeys: filepath.Join(dir, heEvalKeysFile),
		SecretKeyBytes: int64(len(skBytes)), EvalKeysBytes: int64(len(evalBytes)),
		EvalKeysSHA256: fmt.Sprintf("%x", sha256.Sum256(evalBytes)), Created: true}
	if err := writeFileAtomic(out.EvalKeys, evalBytes, 0o644); err != nil {
		return nil, nil, err
	}
	if err := writeFileAtomic(out.SecretKey, skBytes, 0o600); err != nil {
		return nil, nil, err
	}
	return sk, out, nil
}

// loadHEKeys reads the key pair in dir, checking that its evaluation keys
// belong to its secret key.
func loadHEKeys(dir string) (*he.SecretKey, *HEKeysOutput, error) {
	skPath, evalPath := filepath.Join(dir, heSecretKeyFile), filepath.Join(dir, heEvalKeysFile)
	sk, err := readSecretKey(skPath)
	if err != nil {
		return nil, nil, err
	}
	evalBytes, err := os.ReadFile(evalPath)
	if err != nil {
		return nil, nil, fmt.Errorf("%s has no evaluation keys beside it (%w): restore %s, or move the key directory away and run `ogpu he keygen` again", skPath, err, heEvalKeysFile)
	}
	kind, preset, id, err := he.Peek(evalBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", evalPath, err)
	}
	if kind != he.KindEvalKeys || preset != sk.Params.Name || id != sk.ID {
		return nil, nil, fmt.Errorf("%s is a %s for preset %s under key %s, not the evaluation keys of %s (key %s, preset %s)",
			evalPath, kind, preset, id, skPath, sk.ID, sk.Params.Name)
	}
	st, err := os.Stat(skPath)
	if err != nil {
		return nil, nil, err
	}
	return sk, &HEKeysOutput{Dir: dir, Preset: sk.Params.Name, LogSlots: sk.LogSlots, KeyID: sk.ID.String(),
		SecretKey: skPath, EvalKeys: evalPath, SecretKeyBytes: st.Size(), EvalKeysBytes: int64(len(evalBytes)),
		EvalKeysSHA256: fmt.Sprintf("%x", sha256.Sum256(evalBytes))}, nil
}

// loadOrCreateHEKeys returns the secret key of preset and width in HOME's
// key directory and the path of its evaluation keys, creating both (and
// saying so on w) when the directory has none.
func loadOrCreateHEKeys(home, preset string, logSlots int, w io.Writer) (*he.SecretKey, string, error) {
	dir := heKeyDir(home, preset, logSlots)
	if _, err := os.Stat(filepath.Join(dir, heSecretKeyFile)); errors.Is(err, os.ErrNotExist) {
		sk, out, err := generateHEKeys(dir, preset, logSlots)
		if err != nil {
			return nil, "", err
		}
		out.print(w)
		return sk, out.EvalKeys, nil
	}
	sk, out, err := loadHEKeys(dir)
	if err != nil {
		return nil, "", err
	}
	if sk.Params.Name != preset || sk.LogSlots != logSlots {
		return nil, "", fmt.Errorf("%s holds a key for preset %s and vectors of %d values, not %s and %d: move it away", out.SecretKey, sk.Params.Name, 1<<sk.LogSlots, preset, 1<<logSlots)
	}
	return sk, out.EvalKeys, nil
}

func readSecretKey(path string) (*he.SecretKey, error) {
	bz, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the secret key: %w", err)
	}
	defer clear(bz)
	sk, err := he.UnmarshalSecretKey(bz)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return sk, nil
}

func readCiphertext(path string) (*he.Ciphertext, []byte, error) {
	bz, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read the ciphertext: %w", err)
	}
	ct, err := he.UnmarshalCiphertext(bz)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return ct, bz, nil
}

// writeFileAtomic writes data to a temporary file beside path and renames
// it over path.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return nil
}

// parseValues reads flag's value in: a JSON array of numbers, or a file
// holding one.
func parseValues(flag, in string) ([]float64, error) {
	data := []byte(strings.TrimSpace(in))
	src := flag
	if !bytes.HasPrefix(data, []byte("[")) {
		bz, err := os.ReadFile(in)
		if err != nil {
			return nil, fmt.Errorf("%s %q is neither a JSON array of numbers nor a readable file: %w", flag, in, err)
		}
		data, src = bz, in
	}
	var vals []float64
	if err := json.Unmarshal(data, &vals); err != nil {
		if lower := strings.ToLower(string(data)); strings.Contains(lower, "nan") || strings.Contains(lower, "inf") {
			return nil, fmt.Errorf("%s: only finite numbers can be encrypted (JSON has no NaN or Infinity): %w", src, err)
		}
		return nil, fmt.Errorf("%s is not a JSON array of numbers, e.g. [0.5, -1, 2]: %w", src, err)
	}
	if len(vals) == 0 {
		return nil, fmt.Errorf("%s is an empty array: give at least one value", src)
	}
	for i, v := range vals {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%s: value %d is %v: only finite numbers can be encrypted", src, i, v)
		}
	}
	return vals, nil
}

func newHECmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "he",
		Short: "CKKS keys, encryption and decryption for encrypted pipeline jobs",
		Long: `Homomorphic encryption (CKKS) for encrypted pipeline jobs. The secret key
never leaves this machine; its evaluation keys (eval.keys) are public and are
what providers need to compute on the ciphertexts. Keys live by default in
HOME/he/<preset>-w<width>.`,
	}
	cmd.AddCommand(newHEKeygenCmd(), newHEEncryptCmd(), newHEDecryptCmd(), newHEInspectCmd())
	return cmd
}

func newHEKeygenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keygen",
		Short: "Create a CKKS key pair: secret.key (0600) and the public eval.keys",
		Long: `Create a CKKS secret key and its evaluation keys (relinearization and the
rotation keys a dense layer of the vector width needs) in --out, by default
HOME/he/<preset>-w<2^log-slots>. An existing secret.key is kept unless
--force: ciphertexts under it could no longer be decrypted.

Presets:` + presetHelp(),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			preset, _ := f.GetString("preset")
			logSlots, _ := f.GetInt("log-slots")
			dir, _ := f.GetString("out")
			if dir == "" {
				home, _ := f.GetString("home")
				dir = heKeyDir(home, preset, logSlots)
			}
			if force, _ := f.GetBool("force"); !force {
				path := filepath.Join(dir, heSecretKeyFile)
				if _, err := os.Stat(path); err == nil {
					what := "a secret key"
					if sk, err := readSecretKey(path); err == nil {
						what = "the secret key " + sk.ID.String()
					}
					return fmt.Errorf("%s already holds %s: overwriting it makes its ciphertexts undecryptable; pass --force to replace it, or --out DIR for another directory", path, what)
				}
			}
			_, out, err := generateHEKeys(dir, preset, logSlots)
			if err != nil {
				return err
			}
			return output(cmd, out, func(w io.Writer) { out.print(w) })
		},
	}
	f := cmd.Flags()
	f.String("preset", "N14", "CKKS parameter preset: "+strings.Join(he.PresetNames(), ", "))
	f.Int("log-slots", 3, fmt.Sprintf("log2 of the vector width (0 to %d): 3 is vectors of 8 values", he.MaxLogSlots))
	f.String("out", "", "key directory (default HOME/he/<preset>-w<2^log-slots>)")
	f.Bool("force", false, "replace an existing secret key")
	return cmd
}

func presetHelp() string {
	var b strings.Builder
	for _, name := range he.PresetNames() {
		if p, err := he.NewParams(name); err == nil {
			fmt.Fprintf(&b, "\n  %s", p)
		}
	}
	return b.String()
}

// HEEncryptOutput describes a written ciphertext.
type HEEncryptOutput struct {
	File   string `json:"file"`
	Values int    `json:"values"`
	Width  int    `json:"width"`
	Preset string `json:"preset"`
	KeyID  string `json:"key_id"`
	Bytes  int    `json:"bytes"`
	SHA256 string `json:"sha256"`
}

func newHEEncryptCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "encrypt",
		Short: "Encrypt a vector of numbers under a secret key",
		Long: `Encrypt --in, a JSON array of at most 2^log-slots finite numbers (given
inline, e.g. --in '[0.5, -1, 2]', or as a file holding one; the rest of the
vector is zero) under the secret key --key, and write the ciphertext to --out.
` + "`ogpu model train-example --input-out FILE`" + ` writes such a file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			keyPath, _ := f.GetString("key")
			in, _ := f.GetString("in")
			outPath, _ := f.GetString("out")
			vals, err := parseValues("--in", in)
			if err != nil {
				return err
			}
			sk, err := readSecretKey(keyPath)
			if err != nil {
				return err
			}
			ct, err := sk.Encrypt(vals)
			if err != nil {
				return err
			}
			bz, err := ct.Marshal()
			if err != nil {
				return err
			}
			if err := writeFileAtomic(outPath, bz, 0o644); err != nil {
				return err
			}
			out := HEEncryptOutput{File: outPath, Values: len(vals), Width: 1 << sk.LogSlots, Preset: sk.Params.Name,
				KeyID: sk.ID.String(), Bytes: len(bz), SHA256: fmt.Sprintf("%x", sha256.Sum256(bz))}
			return output(cmd, out, func(w io.Writer) {
				fmt.Fprintf(w, "encrypted %d of %d values under key %s (%s) to %s\n", out.Values, out.Width, out.KeyID, out.Preset, out.File)
				fmt.Fprintf(w, "  %s, sha256 %s\n", sizeString(int64(out.Bytes)), out.SHA256)
			})
		},
	}
	f := cmd.Flags()
	f.String("key", "", "secret key file (from ogpu he keygen)")
	f.String("in", "", "values: a JSON array of numbers, or a file holding one")
	f.String("out", "", "ciphertext file to write")
	for _, name := range []string{"key", "in", "out"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

// HEDecryptOutput is a decrypted vector, with the model's reading of it.
type HEDecryptOutput struct {
	Values     []float64 `json:"values"`
	Labels     []string  `json:"labels,omitempty"`
	Prediction *int      `json:"prediction,omitempty"`
	Label      string    `json:"label,omitempty"`
}

func newHEDecryptCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "decrypt",
		Short: "Decrypt a ciphertext with a secret key; with --model, read it as the model's output",
		Long: `Decrypt the ciphertext --in with the secret key --key and print its first --n
values (default: all of them, or the model's outputs with --model). With
--model, the values are the model's output: each is printed with its label
and the prediction is the largest. CKKS is approximate: values carry an error
around 1e-6.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			keyPath, _ := f.GetString("key")
			inPath, _ := f.GetString("in")
			modelPath, _ := f.GetString("model")
			n, _ := f.GetInt("n")
			sk, err := readSecretKey(keyPath)
			if err != nil {
				return err
			}
			ct, _, err := readCiphertext(inPath)
			if err != nil {
				return err
			}
			var m *he.Model
			if modelPath != "" {
				if m, err = he.LoadModel(modelPath); err != nil {
					return err
				}
				if m.Preset != ct.Params.Name {
					return fmt.Errorf("the ciphertext uses preset %s, model %s uses %s: it is not this model's output", ct.Params.Name, modelPath, m.Preset)
				}
				p, err := he.NewParams(m.Preset)
				if err != nil {
					return err
				}
				if want := m.InputLevel(p, len(m.Stages)); ct.Level() != want {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: the ciphertext is at level %d, the output of model %s is at level %d: it may not be this model's output\n", ct.Level(), m.Name, want)
				}
				if !f.Changed("n") {
					n = m.Outputs()
				}
			} else if !f.Changed("n") {
				n = 1 << ct.LogSlots()
			}
			vals, err := sk.Decrypt(ct, n)
			if err != nil {
				return err
			}
			out := HEDecryptOutput{Values: vals}
			if m != nil && len(vals) > 0 {
				p := example.Argmax(vals)
				out.Prediction, out.Labels = &p, m.Labels
				if p < len(m.Labels) {
					out.Label = m.Labels[p]
				}
			}
			return output(cmd, out, func(w io.Writer) {
				for i, v := range vals {
					name := fmt.Sprint(i)
					if i < len(out.Labels) {
						name = out.Labels[i]
					}
					fmt.Fprintf(w, "%-12s %.6f\n", name, v)
				}
				if p := out.Prediction; p != nil {
					if out.Label != "" {
						fmt.Fprintf(w, "prediction: %s (output %d)\n", out.Label, *p)
					} else {
						fmt.Fprintf(w, "prediction: output %d\n", *p)
					}
				}
			})
		},
	}
	f := cmd.Flags()
	f.String("key", "", "secret key file (from ogpu he keygen)")
	f.String("in", "", "ciphertext file")
	f.Int("n", 0, "values to print (default: the vector width, or the model's outputs)")
	f.String("model", "", "pipeline model file whose output the ciphertext is: print labels and the prediction")
	_ = cmd.MarkFlagRequired("key")
	_ = cmd.MarkFlagRequired("in")
	return cmd
}

// HEInspectOutput says what an HE file is.
type HEInspectOutput struct {
	File     string `json:"file"`
	Kind     string `json:"kind"`
	Preset   string `json:"preset"`
	KeyID    string `json:"key_id"`
	Bytes    int    `json:"bytes"`
	SHA256   string `json:"sha256"`
	Level    *int   `json:"level,omitempty"`
	LogSlots *int   `json:"log_slots,omitempty"`
}

func newHEInspectCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "inspect FILE",
		Short: "Say what an HE file is: kind, preset, key id, size (checksum verified)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			bz, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			kind, preset, id, err := he.Peek(bz)
			if err != nil {
				if _, merr := he.ParseModel(bz); merr == nil {
					return fmt.Errorf("%s is a pipeline model, not an HE file: use ogpu model inspect", args[0])
				}
				return fmt.Errorf("%s: %w", args[0], err)
			}
			out := HEInspectOutput{File: args[0], Kind: kind.String(), Preset: preset, KeyID: id.String(), Bytes: len(bz),
				SHA256: fmt.Sprintf("%x", sha256.Sum256(bz))}
			switch kind {
			case he.KindCiphertext:
				ct, err := he.UnmarshalCiphertext(bz)
				if err != nil {
					return fmt.Errorf("%s: %w", args[0], err)
				}
				lvl, ls := ct.Level(), ct.LogSlots()
				out.Level, out.LogSlots = &lvl, &ls
			case he.KindSecretKey:
				sk, err := he.UnmarshalSecretKey(bz)
				clear(bz)
				if err != nil {
					return fmt.Errorf("%s: %w", args[0], err)
				}
				ls := sk.LogSlots
				out.LogSlots = &ls
			}
			return output(cmd, out, func(w io.Writer) {
				fmt.Fprintf(w, "%s: %s\n", out.File, out.Kind)
				fmt.Fprintf(w, "  preset:  %s\n", out.Preset)
				fmt.Fprintf(w, "  key id:  %s\n", out.KeyID)
				if out.LogSlots != nil {
					fmt.Fprintf(w, "  width:   %d values\n", 1<<*out.LogSlots)
				}
				if out.Level != nil {
					fmt.Fprintf(w, "  level:   %d (rescalings left)\n", *out.Level)
				}
				fmt.Fprintf(w, "  size:    %s\n", sizeString(int64(out.Bytes)))
				fmt.Fprintf(w, "  sha256:  %s\n", out.SHA256)
			})
		},
	}
}

// ---- ogpu model

func newModelCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "model", Short: "Models: inspect a GGUF LLM or a pipeline model, split an LLM by layers, train the example classifier"}
	cmd.AddCommand(newModelTrainExampleCmd(), newModelInspectCmd(), newModelSplitCmd(), newModelFinetuneCmd())
	return cmd
}

// ModelStageOutput describes one stage of a model.
type ModelStageOutput struct {
	Name       string `json:"name"`
	Inputs     int    `json:"inputs"`
	Outputs    int    `json:"outputs"`
	Dense      bool   `json:"dense"`
	Bias       bool   `json:"bias"`
	Activation string `json:"activation,omitempty"`
	Depth      int    `json:"depth"`
}

// ModelOutput describes a model file.
type ModelOutput struct {
	File        string             `json:"file"`
	Name        string             `json:"name"`
	SHA256      string             `json:"sha256"`
	Bytes       int                `json:"bytes"`
	Preset      string             `json:"preset"`
	Width       int                `json:"width"`
	Inputs      int                `json:"inputs"`
	Labels      []string           `json:"labels,omitempty"`
	Stages      []ModelStageOutput `json:"stages"`
	Depth       int                `json:"depth"`
	PresetDepth int                `json:"preset_depth"`
	Fits        bool               `json:"fits"`
	Problem     string             `json:"problem,omitempty"`
}

func describeActivation(a *he.Activation) string {
	if a == nil {
		return ""
	}
	if a.Kind == he.ActChebyshev {
		return fmt.Sprintf("chebyshev %s over [%v, %v], degree %d", a.Function, a.Interval[0], a.Interval[1], a.Degree())
	}
	return fmt.Sprintf("polynomial degree %d: %s", a.Degree(), polynomialString(a.Coeffs))
}

func polynomialString(coeffs []string) string {
	var terms []string
	for k, c := range coeffs {
		switch k {
		case 0:
			terms = append(terms, c)
		case 1:
			terms = append(terms, c+"·x")
		default:
			terms = append(terms, fmt.Sprintf("%s·x^%d", c, k))
		}
	}
	return strings.Join(terms, " + ")
}

// describeModel reads a model's shape without trusting it: it works on a
// model that failed validation, to show where it does not fit.
func describeModel(file string, raw []byte, m *he.Model) *ModelOutput {
	out := &ModelOutput{File: file, Name: m.Name, SHA256: fmt.Sprintf("%x", sha256.Sum256(raw)), Bytes: len(raw),
		Preset: m.Preset, Width: 1 << max(0, min(m.LogSlots, 30)), Inputs: m.Inputs, Labels: m.Labels}
	if p, err := he.NewParams(m.Preset); err == nil {
		out.PresetDepth = p.Depth()
	}
	in := m.Inputs
	for i := range m.Stages {
		s := &m.Stages[i]
		so := ModelStageOutput{Name: s.Name, Inputs: in, Outputs: s.Outputs(in), Dense: s.Dense != nil,
			Activation: describeActivation(s.Activation), Depth: s.Depth()}
		so.Bias = s.Dense != nil && len(s.Dense.Bias) > 0
		out.Stages = append(out.Stages, so)
		out.Depth += so.Depth
		in = so.Outputs
	}
	return out
}

func (o *ModelOutput) print(w io.Writer) {
	fmt.Fprintf(w, "model %s (%s)\n", o.Name, o.File)
	fmt.Fprintf(w, "  sha256:   %s (%s)\n", o.SHA256, sizeString(int64(o.Bytes)))
	fmt.Fprintf(w, "  preset:   %s, vectors of %d values, %d inputs\n", o.Preset, o.Width, o.Inputs)
	if len(o.Labels) > 0 {
		fmt.Fprintf(w, "  labels:   %s\n", strings.Join(o.Labels, ", "))
	}
	for i, s := range o.Stages {
		var parts []string
		if s.Dense {
			d := fmt.Sprintf("dense %d→%d", s.Inputs, s.Outputs)
			if s.Bias {
				d += " + bias"
			}
			parts = append(parts, d)
		}
		if s.Activation != "" {
			parts = append(parts, s.Activation)
		}
		fmt.Fprintf(w, "  stage %d:  %-8s %s (depth %d)\n", i, s.Name, strings.Join(parts, ", "), s.Depth)
	}
	fmt.Fprintf(w, "  depth:    %d of preset %s's %d\n", o.Depth, o.Preset, o.PresetDepth)
	if o.Fits {
		fmt.Fprintln(w, "  fits:     yes")
	} else {
		fmt.Fprintf(w, "  fits:     no: %s\n", o.Problem)
	}
}

func newModelInspectCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "inspect FILE",
		Short: "Describe a GGUF LLM (memory whole and per stage) or a pipeline model",
		Long: `Describe a model file by its sha256 (its identity on the network).

A GGUF LLM (or slice): architecture, layers, width, vocabulary and the memory
llama.cpp needs for it; with --stages K or --at L1,L2 also the memory each
stage of that split needs.

A pipeline model: preset, stages with their shapes, activations and depths,
and whether it fits the preset's depth. A model that does not validate is
described as far as it can be, with the reason, and the command fails.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if llm.IsGGUF(args[0]) {
				return inspectLLM(cmd, args[0])
			}
			raw, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			var m he.Model
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&m); err != nil {
				return fmt.Errorf("%s is not a pipeline model file: %w", args[0], err)
			}
			verr := m.Validate()
			var de *he.DepthError
			if verr != nil && !errors.As(verr, &de) {
				return fmt.Errorf("%s: %w", args[0], verr)
			}
			out := describeModel(args[0], raw, &m)
			out.Fits = verr == nil
			if verr != nil {
				out.Problem = verr.Error()
			}
			if err := output(cmd, out, func(w io.Writer) { out.print(w) }); err != nil {
				return err
			}
			if verr != nil {
				return fmt.Errorf("%s does not fit preset %s", args[0], m.Preset)
			}
			return nil
		},
	}
	cmd.Flags().Int("stages", 0, "GGUF: show the memory of each stage of an even split into K stages")
	cmd.Flags().String("at", "", "GGUF: show the memory of each stage of the split at these layers")
	addMemoryFlags(cmd)
	return cmd
}

// EncryptedResult compares the first N test examples in plaintext and
// through every stage on ciphertexts.
type EncryptedResult struct {
	Examples          int     `json:"examples"`
	PlaintextAccuracy float64 `json:"plaintext_accuracy"`
	EncryptedAccuracy float64 `json:"encrypted_accuracy"`
	Agree             int     `json:"agree"`
	MaxAbsError       float64 `json:"max_abs_error"`
}

// TrainExampleOutput is what train-example made and measured.
type TrainExampleOutput struct {
	Model            *ModelOutput `json:"model"`
	Seed             uint64       `json:"seed"`
	TrainExamples    int          `json:"train_examples"`
	TestExamples     int          `json:"test_examples"`
	TrainAccuracy    float64      `json:"train_accuracy"`
	TestAccuracy     float64      `json:"test_accuracy"`
	LinearBaseline   float64      `json:"linear_baseline"`
	MaxPreActivation float64      `json:"max_pre_activation"`
	Bound            float64      `json:"pre_activation_bound"`
	TestOut          string       `json:"test_out,omitempty"`
	InputOut         string       `json:"input_out,omitempty"`
	InputRow         int          `json:"input_row"`
	InputLabel       string       `json:"input_label,omitempty"`
	// Encrypted is set with --encrypted N.
	Encrypted *EncryptedResult `json:"encrypted,omitempty"`
}

func newModelTrainExampleCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "train-example",
		Short: "Train the example classifier on generated data and write it as a pipeline model",
		Long: `Generate the example data set from --seed (8 features in [-1, 1], 4 classes:
whether x0 and x1 have the same sign, and whether (x2, x3, x4) is inside a
ball or in the shell around it; no linear model separates them), train the
classifier in Go, and write it to --out as a pipeline model: on N14, two
stages of dense 8→8 with the activation x/2 + x²/8, then dense 8→4 (depth
3+3+1 = 7, all of N14's); on N13, one hidden stage. The same seed writes the
same file.

Prints the model's sha256, its stages and depth, plaintext train and test
accuracy next to a linear model's, and with --encrypted N the accuracy of the
first N test examples run through every stage on ciphertexts (fresh keys),
the plaintext accuracy on the same N and the largest decryption error.

--test-out FILE writes the test set as {"x": [[...], ...], "y": [...]};
--input-out FILE writes test example --row as a JSON array of its 8 features,
ready for ` + "`ogpu he encrypt --in FILE`" + ` or ` + "`ogpu job run --input FILE`" + `.`,
		Args: cobra.NoArgs,
		RunE: runModelTrainExample,
	}
	f := cmd.Flags()
	f.String("out", "model.json", "model file to write")
	f.Uint64("seed", 1, "seed of the data, the initial weights and the batch order")
	f.String("preset", "N14", "CKKS preset: N14 (two hidden stages) or N13 (one)")
	f.Int("epochs", 0, "training epochs (default 100)")
	f.String("test-out", "", "write the test set as JSON {\"x\": [[...]], \"y\": [...]}")
	f.String("input-out", "", "write test example --row's features as a JSON array")
	f.Int("row", 0, "test example written by --input-out")
	f.Int("encrypted", 0, "also run the first N test examples on ciphertexts and report their accuracy and error")
	return cmd
}

func runModelTrainExample(cmd *cobra.Command, _ []string) error {
	f := cmd.Flags()
	outPath, _ := f.GetString("out")
	seed, _ := f.GetUint64("seed")
	preset, _ := f.GetString("preset")
	epochs, _ := f.GetInt("epochs")
	testOut, _ := f.GetString("test-out")
	inputOut, _ := f.GetString("input-out")
	row, _ := f.GetInt("row")
	nEnc, _ := f.GetInt("encrypted")
	opts := example.Options{Seed: seed, Preset: preset, Epochs: epochs}
	// Checked before training: flags that cannot be honoured change nothing.
	switch {
	case epochs < 0:
		return fmt.Errorf("--epochs %d: want a positive number (0 for the default)", epochs)
	case inputOut != "" && row < 0:
		return fmt.Errorf("--row %d: want a test example index from 0", row)
	case nEnc < 0:
		return fmt.Errorf("--encrypted %d: want a number of test examples", nEnc)
	}
	m, rep, err := example.Train(opts)
	if err != nil {
		return err
	}
	switch {
	case inputOut != "" && row >= rep.Test.Len():
		return fmt.Errorf("--row %d: the test set has examples 0 to %d", row, rep.Test.Len()-1)
	case nEnc > rep.Test.Len():
		return fmt.Errorf("--encrypted %d: the test set has %d examples", nEnc, rep.Test.Len())
	}
	raw, err := m.Marshal()
	if err != nil {
		return err
	}
	out := TrainExampleOutput{Model: describeModel(outPath, raw, m), Seed: seed,
		TrainExamples: rep.Train.Len(), TestExamples: rep.Test.Len(),
		TrainAccuracy: rep.TrainAccuracy, TestAccuracy: rep.TestAccuracy, LinearBaseline: rep.LinearBaseline,
		MaxPreActivation: rep.MaxPreActivation, Bound: rep.Bound, TestOut: testOut, InputOut: inputOut, InputRow: row}
	out.Model.Fits = true
	if nEnc > 0 {
		first, _, err := rep.Test.Split(nEnc)
		if err != nil {
			return err
		}
		e := &EncryptedResult{Examples: nEnc}
		if e.PlaintextAccuracy, err = example.Accuracy(m, first); err != nil {
			return err
		}
		if e.EncryptedAccuracy, e.MaxAbsError, e.Agree, err = example.EncryptedAccuracy(m, rep.Test, nEnc); err != nil {
			return err
		}
		out.Encrypted = e
	}
	if err := writeFileAtomic(outPath, raw, 0o644); err != nil {
		return err
	}
	if testOut != "" {
		bz, err := json.Marshal(rep.Test)
		if err != nil {
			return err
		}
		if err := writeFileAtomic(testOut, append(bz, '\n'), 0o644); err != nil {
			return err
		}
	}
	if inputOut != "" {
		bz, err := json.Marshal(rep.Test.X[row])
		if err != nil {
			return err
		}
		if err := writeFileAtomic(inputOut, append(bz, '\n'), 0o644); err != nil {
			return err
		}
		out.InputLabel = example.Labels[rep.Test.Y[row]]
	}
	return output(cmd, out, func(w io.Writer) {
		fmt.Fprintf(w, "wrote %s\n", outPath)
		out.Model.print(w)
		fmt.Fprintf(w, "trained on %d examples (seed %d), tested on %d:\n", out.TrainExamples, seed, out.TestExamples)
		fmt.Fprintf(w, "  plaintext accuracy:  train %.1f%%, test %.1f%%\n", 100*out.TrainAccuracy, 100*out.TestAccuracy)
		fmt.Fprintf(w, "  linear baseline:     test %.1f%% (chance %.0f%%)\n", 100*out.LinearBaseline, 100.0/example.Classes)
		fmt.Fprintf(w, "  pre-activations:     up to %.2f in magnitude (training bound %v)\n", out.MaxPreActivation, out.Bound)
		if e := out.Encrypted; e != nil {
			fmt.Fprintf(w, "  first %d test examples: encrypted accuracy %.1f%%, plaintext %.1f%%, %d/%d predictions agree, max |error| %.2g\n",
				e.Examples, 100*e.EncryptedAccuracy, 100*e.PlaintextAccuracy, e.Agree, e.Examples, e.MaxAbsError)
		}
		if testOut != "" {
			fmt.Fprintf(w, "test set written to %s\n", testOut)
		}
		if inputOut != "" {
			fmt.Fprintf(w, "test example %d (%s) written to %s\n", row, out.InputLabel, inputOut)
		}
	})
}
