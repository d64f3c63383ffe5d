package he

import (
	"crypto/sha256"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/he/hefloat"
	"github.com/tuneinsight/lattigo/v5/ring"
)

// The files a provider gets, as the determinism fixture writes them for a
// child process.
const (
	helperDirEnv  = "OGPU_HE_HELPER_DIR"
	modelFile     = "model.json"
	evalKeysFile  = "evalkeys.bin"
	inputFile     = "input.bin"
	hashesFile    = "hashes.txt"
	gomaxprocFile = "gomaxprocs.txt"
)

// determinismModels cover every kind of stage: dense with bias, monomial
// activations, a Chebyshev activation folded into a dense layer, one on
// its own with a fractional and one with an integer change of interval.
func determinismModels(t testing.TB) []*Model {
	r := rand.New(rand.NewPCG(3, 3))
	return []*Model{
		buildModel(t, r, "N13", 3, 8, stageSpec{6, chebyshev(t, "sigmoid", -2, 2, 3)}, stageSpec{out: 3}),
		buildModel(t, r, "N13", 4, 16, stageSpec{act: chebyshev(t, "tanh", -1, 1, 1)}, stageSpec{16, randomPolynomial(r, 1)}),
		buildModel(t, r, "N14", 3, 8, stageSpec{8, randomPolynomial(r, 2)}, stageSpec{act: chebyshev(t, "tanh", -2, 2, 3)}, stageSpec{out: 2}),
	}
}

// writeProviderFiles writes what a provider receives: the model file, the
// evaluation key blob and the input ciphertext.
func writeProviderFiles(t *testing.T, dir string, m *Model, ek *EvalKeys, in *Ciphertext) {
	t.Helper()
	mb, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	kb, err := ek.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for name, bz := range map[string][]byte{modelFile: mb, evalKeysFile: kb, inputFile: marshalCT(t, in)} {
		if err := os.WriteFile(filepath.Join(dir, name), bz, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// evalProviderFiles decodes the provider files in dir and returns the
// hashes of every stage's output.
func evalProviderFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := LoadModel(filepath.Join(dir, modelFile))
	if err != nil {
		t.Fatal(err)
	}
	kb, err := os.ReadFile(filepath.Join(dir, evalKeysFile))
	if err != nil {
		t.Fatal(err)
	}
	ek, err := UnmarshalEvalKeys(kb)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := os.ReadFile(filepath.Join(dir, inputFile))
	if err != nil {
		t.Fatal(err)
	}
	in, err := UnmarshalCiphertext(cb)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := NewEvaluator(m, ek)
	if err != nil {
		t.Fatal(err)
	}
	return hashes(t, runStages(t, ev, in))
}

// TestHelperProcessStages is not a test: TestStageOutputsDeterministic
// runs the test binary again with only this function and helperDirEnv
// set, to evaluate the stages in another process.
func TestHelperProcessStages(t *testing.T) {
	dir := os.Getenv(helperDirEnv)
	if dir == "" {
		t.Skip("helper process for TestStageOutputsDeterministic")
	}
	h := evalProviderFiles(t, dir)
	if err := os.WriteFile(filepath.Join(dir, hashesFile), []byte(strings.Join(h, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, gomaxprocFile), []byte(strconv.Itoa(runtime.GOMAXPROCS(0))), 0o600); err != nil {
		t.Fatal(err)
	}
}

// runHelper evaluates the provider files in dir in a child process with
// GOMAXPROCS set to procs (empty: the default) and returns its hashes and
// the GOMAXPROCS it ran with.
func runHelper(t *testing.T, dir, procs string) ([]string, string) {
	return runHelperBinary(t, dir, procs, os.Args[0])
}

// runHelperBinary is runHelper with another test binary of this package,
// run through argv (e.g. an emulator and the binary).
func runHelperBinary(t *testing.T, dir, procs string, argv ...string) ([]string, string) {
	t.Helper()
	for _, f := range []string{hashesFile, gomaxprocFile} {
		os.Remove(filepath.Join(dir, f))
	}
	args := append(argv[1:len(argv):len(argv)], "-test.run=^TestHelperProcessStages$", "-test.count=1")
	cmd := exec.Command(argv[0], args...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOMAXPROCS=") && !strings.HasPrefix(kv, helperDirEnv+"=") {
			env = append(env, kv)
		}
	}
	env = append(env, helperDirEnv+"="+dir)
	if procs != "" {
		env = append(env, "GOMAXPROCS="+procs)
	}
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helper process: %v\n%s", err, out)
	}
	hb, err := os.ReadFile(filepath.Join(dir, hashesFile))
	if err != nil {
		t.Fatalf("helper process wrote no hashes: %v", err)
	}
	pb, err := os.ReadFile(filepath.Join(dir, gomaxprocFile))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(hb), "\n"), string(pb)
}

func sameHashes(t *testing.T, what string, want, got []string) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: %d stage outputs, want %d", what, len(got), len(want))
	}
	for i := range want {
		if want[i] != got[i] {
			t.Fatalf("%s: stage %d output hashes to %.16s…, the first run's to %.16s…", what, i, got[i], want[i])
		}
	}
}

// TestStageOutputsDeterministic: the same input ciphertext, evaluation
// keys and model give the same output bytes (sha256 of Ciphertext.Marshal)
// at every stage: with the same evaluator again, with a fresh one, with
// GOMAXPROCS=1, and in other processes (GOMAXPROCS=1 and the default)
// that decode the files a provider receives.
func TestStageOutputsDeterministic(t *testing.T) {
	for _, m := range determinismModels(t) {
		t.Run(fmt.Sprintf("%s/w%d/%d-stages", m.Preset, 1<<m.LogSlots, len(m.Stages)), func(t *testing.T) {
			sk, ek := testKeys(t, m.Preset, m.LogSlots)
			in, err := sk.Encrypt(randomInput(rand.New(rand.NewPCG(9, 9)), m.Inputs))
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			writeProviderFiles(t, dir, m, ek, in)

			ev, err := NewEvaluator(m, ek)
			if err != nil {
				t.Fatal(err)
			}
			first := hashes(t, runStages(t, ev, in))
			for i := range first {
				for j := 0; j < i; j++ {
					if first[i] == first[j] {
						t.Fatalf("stages %d and %d give the same bytes: the test would not see a stage skipped", j, i)
					}
				}
			}
			sameHashes(t, "same evaluator, second run", first, hashes(t, runStages(t, ev, in)))

			ev2, err := NewEvaluator(m, ek)
			if err != nil {
				t.Fatal(err)
			}
			sameHashes(t, "fresh evaluator", first, hashes(t, runStages(t, ev2, in)))

			prev := runtime.GOMAXPROCS(1)
			h1 := hashes(t, runStages(t, ev2, in))
			runtime.GOMAXPROCS(prev)
			sameHashes(t, "GOMAXPROCS=1", first, h1)

			sameHashes(t, "decoded provider files", first, evalProviderFiles(t, dir))

			for _, procs := range []string{"1", ""} {
				got, ran := runHelper(t, dir, procs)
				if procs != "" && ran != procs {
					t.Fatalf("helper ran with GOMAXPROCS %s, want %s", ran, procs)
				}
				sameHashes(t, "child process with GOMAXPROCS="+ran, first, got)
				t.Logf("child process with GOMAXPROCS=%s: %d stage hashes equal", ran, len(got))
			}
		})
	}
}

// TestEvalStageIsBareLattigoWith64BitEncoder: EvalStage's output is
// byte-identical to the bare lattigo calls (bareStage) encoding the same
// weights and bias with hefloat.NewEncoder(params, 64), for random dense +
// activation stages on both presets. This is also what makes the
// benchmark's comparison with bareStage like for like.
func TestEvalStageIsBareLattigoWith64BitEncoder(t *testing.T) {
	for _, preset := range []string{"N13", "N14"} {
		for _, logSlots := range []int{3, 4} {
			t.Run(fmt.Sprintf("%s/w%d", preset, 1<<logSlots), func(t *testing.T) {
				r := rand.New(rand.NewPCG(4, uint64(logSlots)))
				n := 1 << logSlots
				m := buildModel(t, r, preset, logSlots, n, stageSpec{n - 1, randomPolynomial(r, 2)})
				he, bare64, _ := heAndBare(t, m)
				if he != bare64 {
					t.Fatalf("EvalStage output %.16s… differs from bare lattigo with the 64-bit encoder %.16s…", he, bare64)
				}
			})
		}
	}
}

// TestEvalStageEncodesWith64BitEncoder pins down which encoder EvalStage
// uses for the provider's plaintexts. Away from rounding boundaries the
// float64 and the 64-bit (big-float) encoder give the same integers, so
// the test picks a weight w whose product with the encoding scale lies
// just below a half-integer, closer than float64 resolves: float64
// arithmetic rounds it up, 64-bit arithmetic down. That is the kind of
// number on which float64 encoding with and without fused multiply-adds
// (arm64 vs amd64) parts ways. EvalStage must agree with the 64-bit
// encoder there, and the float64 encoder must not, or the test could not
// tell them apart.
func TestEvalStageEncodesWith64BitEncoder(t *testing.T) {
	for _, preset := range []string{"N13", "N14"} {
		t.Run(preset, func(t *testing.T) {
			p, err := NewParams(preset)
			if err != nil {
				t.Fatal(err)
			}
			w := encoderSensitiveWeight(t, p, p.MaxLevel())
			m := &Model{Format: ModelFormat, Name: "boundary", Preset: preset, LogSlots: 0, Inputs: 1, Stages: []Stage{{
				Name:       "s0",
				Dense:      &Dense{Weights: [][]float64{{w}}, Bias: []float64{0.125}},
				Activation: &Activation{Kind: ActPolynomial, Coeffs: []string{"0", "1", "0.5"}},
			}}}
			if err := m.Validate(); err != nil {
				t.Fatal(err)
			}
			he, bare64, bareF64 := heAndBare(t, m)
			if he != bare64 {
				t.Fatalf("weight %v: EvalStage output %.16s… differs from bare lattigo with the 64-bit encoder %.16s…", w, he, bare64)
			}
			if bareF64 == bare64 {
				t.Fatalf("weight %v: the float64 encoder gives the 64-bit encoder's output: the test cannot tell them apart", w)
			}
			t.Logf("weight %v: EvalStage = 64-bit encoder %.16s…, float64 encoder %.16s…", w, he, bareF64)
		})
	}
}

// heAndBare evaluates m's first stage on a fresh encryption with
// EvalStage and with bareStage under the 64-bit and the float64 encoder,
// returning the hashes of the three outputs.
func heAndBare(t *testing.T, m *Model) (he, bare64, bareF64 string) {
	t.Helper()
	sk, ek := testKeys(t, m.Preset, m.LogSlots)
	in, err := sk.Encrypt(randomInput(rand.New(rand.NewPCG(6, 6)), m.Inputs))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := NewEvaluator(m, ek)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ev.EvalStage(0, in)
	if err != nil {
		t.Fatal(err)
	}
	bare := func(enc *hefloat.Encoder) string {
		b, err := newBareStage(ek, m.LogSlots, &m.Stages[0], m.Inputs, enc)
		if err != nil {
			t.Fatal(err)
		}
		ct, err := b.evalStage(in.ct)
		if err != nil {
			t.Fatal(err)
		}
		return hashes(t, []*Ciphertext{{Params: ek.Params, Key: in.Key, ct: ct}})[0]
	}
	p := ek.Params.Parameters
	return hashes(t, []*Ciphertext{out})[0], bare(hefloat.NewEncoder(p, 64)), bare(hefloat.NewEncoder(p))
}

// encoderSensitiveWeight returns a weight w in about [1/4, 1/2) that the
// float64 and the 64-bit encoder encode differently at the scale of a
// dense layer's weights for an input at level (the level's prime).
func encoderSensitiveWeight(t *testing.T, p *Params, level int) float64 {
	t.Helper()
	q := p.Q()[level]
	e64, eF64 := hefloat.NewEncoder(p.Parameters, 64), hefloat.NewEncoder(p.Parameters)
	encode := func(enc *hefloat.Encoder, w float64) *rlwe.Plaintext {
		pt := hefloat.NewPlaintext(p.Parameters, level)
		pt.Scale = rlwe.NewScale(q)
		pt.LogDimensions = ring.Dimensions{Rows: 0, Cols: 0}
		if err := enc.Encode([]float64{w}, pt); err != nil {
			t.Fatal(err)
		}
		return pt
	}
	// w = the float64 nearest (k + 1/2) / q: w·q is within float64's
	// resolution of k + 1/2, below it about half the time.
	for k := q / 4; k < q/4+256; k++ {
		x := new(big.Float).SetPrec(128).SetUint64(2*k + 1)
		x.Quo(x, new(big.Float).SetPrec(128).SetUint64(2*q))
		w, _ := x.Float64()
		if !encode(e64, w).Value.Equal(&encode(eF64, w).Value) {
			return w
		}
	}
	t.Fatalf("no weight near a rounding boundary found for prime %d", q)
	return 0
}

// TestStageOutputsAcrossArchitectures: an arm64 build of this package,
// run under qemu-aarch64 on the provider files an amd64 process wrote,
// produces the same stage-output bytes. Go fuses multiply-adds on arm64,
// which is why provider-side plaintexts are encoded with the 64-bit
// (big-float) encoder; this is the check that it is enough. It needs
// qemu-user (.ci/run installs it) and skips without it.
func TestStageOutputsAcrossArchitectures(t *testing.T) {
	qemu := qemuARM64(t)
	bin := arm64TestBinary(t)
	// A wide layer on top: hundreds of thousands of encoded coefficients,
	// where a fused multiply-add in a float64 encoder would show.
	r := rand.New(rand.NewPCG(5, 5))
	models := append(determinismModels(t), buildModel(t, r, "N13", 8, 256, stageSpec{out: 256}))
	for _, m := range models {
		t.Run(fmt.Sprintf("%s/w%d/%d-stages", m.Preset, 1<<m.LogSlots, len(m.Stages)), func(t *testing.T) {
			sk, ek := testKeys(t, m.Preset, m.LogSlots)
			in, err := sk.Encrypt(randomInput(rand.New(rand.NewPCG(11, 11)), m.Inputs))
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			writeProviderFiles(t, dir, m, ek, in)
			want := evalProviderFiles(t, dir)
			got, _ := runHelperBinary(t, dir, "", qemu, bin)
			sameHashes(t, "arm64 under qemu", want, got)
			t.Logf("arm64 (qemu) and %s: %d stage hashes equal", runtime.GOARCH, len(got))
		})
	}
}

// encodeHashes encodes 16 pseudo-random full-width vectors at N14's top
// level with the 64-bit encoder and with the float64 one, and returns the
// sha256 of each plaintext, 64-bit ones first.
func encodeHashes(t testing.TB) (enc64, encF64 []string) {
	p, err := NewParams("N14")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []struct {
		enc *hefloat.Encoder
		out *[]string
	}{{hefloat.NewEncoder(p.Parameters, 64), &enc64}, {hefloat.NewEncoder(p.Parameters), &encF64}} {
		r := rand.New(rand.NewPCG(13, 13)) // the same vectors for both
		for i := 0; i < 16; i++ {
			v := make([]float64, p.MaxSlots())
			for j := range v {
				v[j] = 2*r.Float64() - 1
			}
			pt := hefloat.NewPlaintext(p.Parameters, p.MaxLevel())
			if err := e.enc.Encode(v, pt); err != nil {
				t.Fatal(err)
			}
			bz, err := pt.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			*e.out = append(*e.out, fmt.Sprintf("%x", sha256.Sum256(bz)))
		}
	}
	return enc64, encF64
}

// TestHelperProcessEncode writes encodeHashes for
// TestEncodingAcrossArchitectures.
func TestHelperProcessEncode(t *testing.T) {
	dir := os.Getenv(helperDirEnv)
	if dir == "" {
		t.Skip("helper process for TestEncodingAcrossArchitectures")
	}
	a, b := encodeHashes(t)
	if err := os.WriteFile(filepath.Join(dir, hashesFile), []byte(strings.Join(append(a, b...), "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
}

// qemuARM64 is the path of qemu-aarch64; the test skips without it.
func qemuARM64(t *testing.T) string {
	if runtime.GOARCH == "arm64" {
		t.Skip("already on arm64: run it on amd64")
	}
	qemu, err := exec.LookPath("qemu-aarch64")
	if err != nil {
		t.Skip("qemu-aarch64 is not installed (apt-get install qemu-user): the arm64 comparison needs it")
	}
	return qemu
}

// arm64TestBinary builds this package's tests for linux/arm64.
func arm64TestBinary(t *testing.T) string {
	bin := filepath.Join(t.TempDir(), "he.arm64.test")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "test", "-c", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the arm64 test binary: %v\n%s", err, out)
	}
	return bin
}

// TestEncodingAcrossArchitectures: the 64-bit encoder gives the same
// plaintexts on arm64 (under qemu) as here. The float64 encoder is only
// logged: on arm64 Go fuses the multiply-adds of its FFT (FMADDD in
// lattigo's ckks_vector_ops.go), so its plaintexts may differ, which is
// why providers do not use it.
func TestEncodingAcrossArchitectures(t *testing.T) {
	qemu := qemuARM64(t)
	bin := arm64TestBinary(t)
	dir := t.TempDir()
	cmd := exec.Command(qemu, bin, "-test.run=^TestHelperProcessEncode$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperDirEnv+"="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("arm64 helper: %v\n%s", err, out)
	}
	hb, err := os.ReadFile(filepath.Join(dir, hashesFile))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(string(hb), "\n")
	want64, wantF64 := encodeHashes(t)
	sameHashes(t, "64-bit encoder on arm64", want64, got[:len(want64)])
	differ := 0
	for i, h := range got[len(want64):] {
		if h != wantF64[i] {
			differ++
		}
	}
	t.Logf("64-bit encoder: %d plaintexts equal on arm64; float64 encoder: %d of %d differ", len(want64), differ, len(wantF64))
}
