package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ogpu-network/ogpu/he"
	"github.com/ogpu-network/ogpu/he/example"
)

// heRun runs ogpu with --home home and fails the test on an error.
func heRun(t *testing.T, home string, args ...string) string {
	t.Helper()
	out, err := runCLI(t, append([]string{"--home", home}, args...)...)
	if err != nil {
		t.Fatalf("ogpu %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// heFails runs ogpu and wants an error mentioning want.
func heFails(t *testing.T, home, want string, args ...string) {
	t.Helper()
	out, err := runCLI(t, append([]string{"--home", home}, args...)...)
	if err == nil {
		t.Fatalf("ogpu %s succeeded, want an error about %q:\n%s", strings.Join(args, " "), want, out)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("ogpu %s: error %q does not mention %q", strings.Join(args, " "), err, want)
	}
}

func heJSON[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%v in output:\n%s", err, s)
	}
	return v
}

func heKeygen(t *testing.T, home string, args ...string) HEKeysOutput {
	t.Helper()
	return heJSON[HEKeysOutput](t, heRun(t, home, append([]string{"he", "keygen", "--preset", "N13", "-o", "json"}, args...)...))
}

func TestHeKeygenEncryptDecrypt(t *testing.T) {
	home := t.TempDir()
	k := heKeygen(t, home)
	if k.Dir != heKeyDir(home, "N13", 3) || k.SecretKey != filepath.Join(k.Dir, "secret.key") || !k.Created {
		t.Fatalf("keygen wrote %+v, want the default directory %s", k, heKeyDir(home, "N13", 3))
	}
	st, err := os.Stat(k.SecretKey)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 || st.Size() != k.SecretKeyBytes {
		t.Fatalf("secret.key: mode %v, %d bytes; want 0600 and %d", st.Mode().Perm(), st.Size(), k.SecretKeyBytes)
	}
	evalBytes, err := os.ReadFile(k.EvalKeys)
	if err != nil {
		t.Fatal(err)
	}
	if sum := fmt.Sprintf("%x", sha256.Sum256(evalBytes)); sum != k.EvalKeysSHA256 || int64(len(evalBytes)) != k.EvalKeysBytes {
		t.Fatalf("eval.keys hashes to %s (%d bytes), keygen said %s (%d)", sum, len(evalBytes), k.EvalKeysSHA256, k.EvalKeysBytes)
	}
	if _, err := he.UnmarshalEvalKeys(evalBytes); err != nil {
		t.Fatal(err)
	}
	t.Logf("N13 keys: secret %d bytes, eval %d bytes", k.SecretKeyBytes, k.EvalKeysBytes)

	// A second keygen keeps the key; --force replaces it.
	secret, _ := os.ReadFile(k.SecretKey)
	heFails(t, home, "--force", "he", "keygen", "--preset", "N13")
	if again, _ := os.ReadFile(k.SecretKey); !bytes.Equal(again, secret) {
		t.Fatal("a refused keygen changed secret.key")
	}
	if k2 := heKeygen(t, home, "--force"); k2.KeyID == k.KeyID {
		t.Fatal("keygen --force kept the key id")
	} else {
		k = k2
	}

	dir := t.TempDir()
	ct := filepath.Join(dir, "x.ct")
	enc := heJSON[HEEncryptOutput](t, heRun(t, home, "he", "encrypt", "--key", k.SecretKey, "--in", "[1, -2, 0.5, 3.25]", "--out", ct, "-o", "json"))
	if enc.Values != 4 || enc.Width != 8 || enc.KeyID != k.KeyID || enc.Preset != "N13" {
		t.Fatalf("encrypt: %+v", enc)
	}
	dec := heJSON[HEDecryptOutput](t, heRun(t, home, "he", "decrypt", "--key", k.SecretKey, "--in", ct, "-o", "json"))
	want := []float64{1, -2, 0.5, 3.25, 0, 0, 0, 0}
	if len(dec.Values) != len(want) || dec.Prediction != nil {
		t.Fatalf("decrypt: %+v", dec)
	}
	for i := range want {
		if math.Abs(dec.Values[i]-want[i]) > 1e-4 {
			t.Fatalf("value %d decrypts to %v, want %v", i, dec.Values[i], want[i])
		}
	}
	if dec := heJSON[HEDecryptOutput](t, heRun(t, home, "he", "decrypt", "--key", k.SecretKey, "--in", ct, "--n", "2", "-o", "json")); len(dec.Values) != 2 {
		t.Fatalf("--n 2 printed %d values", len(dec.Values))
	}

	// --in may name a file holding the array.
	in := filepath.Join(dir, "in.json")
	if err := os.WriteFile(in, []byte("[0.25, 0.75]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	heRun(t, home, "he", "encrypt", "--key", k.SecretKey, "--in", in, "--out", ct)
	text := heRun(t, home, "he", "decrypt", "--key", k.SecretKey, "--in", ct, "--n", "2")
	if !strings.Contains(text, "0.250000") || !strings.Contains(text, "0.750000") {
		t.Fatalf("decrypt of the file's values:\n%s", text)
	}

	for _, c := range []struct{ file, kind string }{{ct, "ciphertext"}, {k.SecretKey, "secret key"}, {k.EvalKeys, "evaluation key set"}} {
		got := heJSON[HEInspectOutput](t, heRun(t, home, "he", "inspect", c.file, "-o", "json"))
		if got.Kind != c.kind || got.Preset != "N13" || got.KeyID != k.KeyID {
			t.Fatalf("inspect %s: %+v, want a %s under %s", c.file, got, c.kind, k.KeyID)
		}
		if c.kind == "ciphertext" && (got.Level == nil || *got.Level != 4 || *got.LogSlots != 3) {
			t.Fatalf("inspect of a fresh ciphertext: %+v, want level 4 and 8 slots", got)
		}
	}
}

func TestHeEncryptBadInput(t *testing.T) {
	home := t.TempDir()
	k := heKeygen(t, home)
	out := filepath.Join(t.TempDir(), "x.ct")
	cases := []struct{ name, in, want string }{
		{"truncated json", "[1, 2", "not a JSON array of numbers"},
		{"object", `{"x": 1}`, "neither a JSON array"},
		{"strings", `["a"]`, "not a JSON array of numbers"},
		{"empty", "[]", "empty array"},
		{"nan", "[1, NaN]", "only finite numbers"},
		{"infinity", "[Infinity]", "only finite numbers"},
		{"overflow", "[1e400]", "not a JSON array of numbers"},
		{"too many", "[1,2,3,4,5,6,7,8,9]", "9 values do not fit a key of width 8"},
		{"missing file", filepath.Join(t.TempDir(), "none.json"), "neither a JSON array of numbers nor a readable file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			heFails(t, home, c.want, "he", "encrypt", "--key", k.SecretKey, "--in", c.in, "--out", out)
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Fatalf("a refused encrypt wrote %s", out)
			}
		})
	}
	heFails(t, home, "not a secret key", "he", "encrypt", "--key", k.EvalKeys, "--in", "[1]", "--out", out)
	heFails(t, home, "required flag", "he", "encrypt", "--key", k.SecretKey, "--in", "[1]")
}

func TestHeWrongKeyAndCorruptedFiles(t *testing.T) {
	home := t.TempDir()
	dir := t.TempDir()
	a := heKeygen(t, home, "--out", filepath.Join(dir, "a"))
	b := heKeygen(t, home, "--out", filepath.Join(dir, "b"))
	ct := filepath.Join(dir, "x.ct")
	heRun(t, home, "he", "encrypt", "--key", a.SecretKey, "--in", "[1, 2, 3]", "--out", ct)

	heFails(t, home, "use the key that encrypted the input", "he", "decrypt", "--key", b.SecretKey, "--in", ct)
	heFails(t, home, "not a ciphertext", "he", "decrypt", "--key", a.SecretKey, "--in", a.SecretKey)

	good, err := os.ReadFile(ct)
	if err != nil {
		t.Fatal(err)
	}
	corrupt := func(name string, bz []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, bz, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/2] ^= 0x40
	bad := corrupt("flipped.ct", flipped)
	heFails(t, home, "corrupted", "he", "decrypt", "--key", a.SecretKey, "--in", bad)
	heFails(t, home, "corrupted", "he", "inspect", bad)
	short := corrupt("short.ct", good[:len(good)-100])
	heFails(t, home, "truncated", "he", "decrypt", "--key", a.SecretKey, "--in", short)
	junk := corrupt("junk.ct", []byte("hello, world"))
	heFails(t, home, "no \"OGPUHE\" header", "he", "inspect", junk)

	skBytes, _ := os.ReadFile(a.SecretKey)
	skBytes[len(skBytes)-40] ^= 1
	heFails(t, home, "corrupted", "he", "decrypt", "--key", corrupt("bad.key", skBytes), "--in", ct)
}

func TestHeLoadOrCreateKeys(t *testing.T) {
	home := t.TempDir()
	var log bytes.Buffer
	sk, evalPath, err := loadOrCreateHEKeys(home, "N13", 3, &log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "created keys in "+heKeyDir(home, "N13", 3)) {
		t.Fatalf("creating keys printed:\n%s", log.String())
	}
	if evalPath != filepath.Join(heKeyDir(home, "N13", 3), "eval.keys") {
		t.Fatalf("eval keys at %s", evalPath)
	}
	log.Reset()
	sk2, evalPath2, err := loadOrCreateHEKeys(home, "N13", 3, &log)
	if err != nil {
		t.Fatal(err)
	}
	if sk2.ID != sk.ID || evalPath2 != evalPath || log.Len() != 0 {
		t.Fatalf("second call: key %s (first %s), printed %q", sk2.ID, sk.ID, log.String())
	}
	// Evaluation keys of another key beside this secret key are refused.
	other := heKeygen(t, home, "--out", filepath.Join(t.TempDir(), "other"))
	bz, err := os.ReadFile(other.EvalKeys)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(evalPath, bz, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadOrCreateHEKeys(home, "N13", 3, &log); err == nil || !strings.Contains(err.Error(), "not the evaluation keys of") {
		t.Fatalf("mismatched eval.keys: %v", err)
	}
	os.Remove(evalPath)
	if _, _, err := loadOrCreateHEKeys(home, "N13", 3, &log); err == nil || !strings.Contains(err.Error(), "no evaluation keys beside it") {
		t.Fatalf("missing eval.keys: %v", err)
	}
}

// train-example writes a valid model whose encrypted output decrypts to
// the plaintext prediction.
func TestModelTrainExample(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	model, test, input := filepath.Join(dir, "model.json"), filepath.Join(dir, "test.json"), filepath.Join(dir, "x.json")
	res := heJSON[TrainExampleOutput](t, heRun(t, home, "model", "train-example", "--preset", "N13", "--seed", "3",
		"--out", model, "--test-out", test, "--input-out", input, "--row", "2", "--encrypted", "2", "-o", "json"))
	t.Logf("train %.3f test %.3f linear %.3f encrypted %+v", res.TrainAccuracy, res.TestAccuracy, res.LinearBaseline, *res.Encrypted)
	if res.TestAccuracy < res.LinearBaseline+0.3 {
		t.Fatalf("test accuracy %.3f vs linear %.3f", res.TestAccuracy, res.LinearBaseline)
	}
	if e := res.Encrypted; e.Examples != 2 || e.Agree != 2 || e.EncryptedAccuracy != e.PlaintextAccuracy || !(e.MaxAbsError < 1e-3) {
		t.Fatalf("encrypted run: %+v", e)
	}
	raw, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	m, err := he.ParseModel(raw)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%x", sha256.Sum256(raw)) != res.Model.SHA256 || len(m.Stages) != 2 || m.Preset != "N13" || !res.Model.Fits {
		t.Fatalf("model file: %d stages on %s, reported %+v", len(m.Stages), m.Preset, res.Model)
	}
	// The same seed writes the same file.
	again := filepath.Join(dir, "again.json")
	heRun(t, home, "model", "train-example", "--preset", "N13", "--seed", "3", "--out", again)
	if bz, _ := os.ReadFile(again); !bytes.Equal(bz, raw) {
		t.Fatal("train-example with the same seed wrote a different model")
	}

	var ds example.Dataset
	bz, _ := os.ReadFile(test)
	if err := json.Unmarshal(bz, &ds); err != nil || ds.Validate() != nil || ds.Len() != res.TestExamples {
		t.Fatalf("test set file: %v, %v, %d examples", err, ds.Validate(), ds.Len())
	}
	var x []float64
	bz, _ = os.ReadFile(input)
	if err := json.Unmarshal(bz, &x); err != nil || len(x) != example.Features {
		t.Fatalf("input file: %v, %v", err, x)
	}
	for i := range x {
		if x[i] != ds.X[2][i] {
			t.Fatalf("input file feature %d is %v, test row 2 has %v", i, x[i], ds.X[2][i])
		}
	}

	info := heJSON[ModelOutput](t, heRun(t, home, "model", "inspect", model, "-o", "json"))
	if !info.Fits || info.Depth != 4 || info.PresetDepth != 4 || len(info.Stages) != 2 || info.Stages[0].Depth != 3 || info.SHA256 != res.Model.SHA256 {
		t.Fatalf("model inspect: %+v", info)
	}

	// The input encrypted by the CLI, each stage evaluated as a provider
	// would, and the output decrypted with --model: the plaintext prediction.
	keys := heKeygen(t, home)
	ctPath := filepath.Join(dir, "x.ct")
	heRun(t, home, "he", "encrypt", "--key", keys.SecretKey, "--in", input, "--out", ctPath)
	evalBytes, _ := os.ReadFile(keys.EvalKeys)
	ek, err := he.UnmarshalEvalKeys(evalBytes)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := he.NewEvaluator(m, ek)
	if err != nil {
		t.Fatal(err)
	}
	bz, _ = os.ReadFile(ctPath)
	ct, err := he.UnmarshalCiphertext(bz)
	if err != nil {
		t.Fatal(err)
	}
	for s := range ev.Stages() {
		if ct, err = ev.EvalStage(s, ct); err != nil {
			t.Fatal(err)
		}
	}
	if bz, err = ct.Marshal(); err != nil {
		t.Fatal(err)
	}
	outPath := filepath.Join(dir, "y.ct")
	if err := os.WriteFile(outPath, bz, 0o644); err != nil {
		t.Fatal(err)
	}
	dec := heJSON[HEDecryptOutput](t, heRun(t, home, "he", "decrypt", "--key", keys.SecretKey, "--in", outPath, "--model", model, "-o", "json"))
	plain, _ := m.Forward(x)
	if dec.Prediction == nil || *dec.Prediction != example.Argmax(plain) || dec.Label != m.Labels[example.Argmax(plain)] || len(dec.Values) != 4 {
		t.Fatalf("decrypt --model: %+v, plaintext outputs %v", dec, plain)
	}
	text := heRun(t, home, "he", "decrypt", "--key", keys.SecretKey, "--in", outPath, "--model", model)
	if !strings.Contains(text, "prediction: "+dec.Label) {
		t.Fatalf("decrypt --model text:\n%s", text)
	}

	// Too deep for its preset: inspect describes it and fails naming the
	// stage that overflows.
	m.Stages = append([]he.Stage{m.Stages[0]}, m.Stages...)
	m.Stages[1].Dense.Weights = m.Stages[0].Dense.Weights // 8→8 again
	deep, _ := m.Marshal()
	deepPath := filepath.Join(dir, "deep.json")
	if err := os.WriteFile(deepPath, deep, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "--home", home, "model", "inspect", deepPath)
	if err == nil || !strings.Contains(out, "fits:     no: he: the model is too deep for preset N13 (depth 4): stage 1") {
		t.Fatalf("inspect of a too-deep model: %v\n%s", err, out)
	}
	heFails(t, home, "pipeline model, not an HE file", "he", "inspect", model)
}

func TestModelTrainExampleBadFlags(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	model := filepath.Join(dir, "model.json")
	heFails(t, home, "the test set has examples 0 to 499", "model", "train-example", "--preset", "N13", "--out", model, "--input-out", filepath.Join(dir, "x.json"), "--row", "500")
	heFails(t, home, "unknown parameter preset", "model", "train-example", "--preset", "N12", "--out", model)
	heFails(t, home, "--encrypted -1", "model", "train-example", "--preset", "N13", "--out", model, "--encrypted", "-1")
	if _, err := os.Stat(model); !os.IsNotExist(err) {
		t.Fatal("a refused train-example wrote the model")
	}
}

// TestPipelineJobRunRefusals: ogpu job run --kind pipeline refuses bad
// models and inputs before it unlocks a key or dials anything.
func TestPipelineJobRunRefusals(t *testing.T) {
	home := t.TempDir()
	model := filepath.Join(home, "model.json")
	heRun(t, home, "model", "train-example", "--preset", "N13", "--epochs", "1", "--out", model)
	ct := filepath.Join(home, "x.ct")
	key := heKeygen(t, home, "--preset", "N13", "--log-slots", "3")
	heRun(t, home, "he", "encrypt", "--key", key.SecretKey, "--in", "[1,2]", "--out", ct)
	bz, err := os.ReadFile(ct)
	if err != nil {
		t.Fatal(err)
	}
	bz[len(bz)/2] ^= 1
	corrupt := filepath.Join(home, "corrupt.ct")
	if err := os.WriteFile(corrupt, bz, 0o600); err != nil {
		t.Fatal(err)
	}
	run := []string{"job", "run", "--kind", "pipeline", "--from", "alice", "--node", "http://127.0.0.1:1"}
	heFails(t, home, "use inference, pipeline or finetune", "job", "run", "--kind", "batch", "--from", "alice")
	heFails(t, home, "needs --model", append(run, "--input", "[1]")...)
	heFails(t, home, "--input has 3 values, model ogpu-example-classifier takes 8", append(run, "--model", model, "--input", "[1,2,3]")...)
	heFails(t, home, "not a JSON array of numbers", append(run, "--model", model, "--input", "[1,")...)
	heFails(t, home, "checksum mismatch", append(run, "--model", model, "--input", corrupt)...)
	heFails(t, home, "no such file", append(run, "--model", filepath.Join(home, "none.json"), "--input", "[1]")...)
}
