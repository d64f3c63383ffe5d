package example

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ogpu-network/ogpu/he"
)

func TestGenerate(t *testing.T) {
	a, b := Generate(7, 4000), Generate(7, 4000)
	for i := range a.X {
		if a.Y[i] != b.Y[i] || !equal(a.X[i], b.X[i]) {
			t.Fatalf("example %d differs between two draws of the same seed", i)
		}
	}
	if c := Generate(8, 10); equal(c.X[0], a.X[0]) {
		t.Fatal("seeds 7 and 8 drew the same first example")
	}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	counts := make([]int, Classes)
	rule := 0
	for i, x := range a.X {
		for j, v := range x {
			if v < -1 || v > 1 {
				t.Fatalf("example %d feature %d = %v is outside [-1, 1]", i, j, v)
			}
		}
		counts[a.Y[i]]++
		// The labelling rule, read on the jittered features, holds except
		// near the boundaries.
		y := 0
		if x[0]*x[1] > 0 {
			y += 2
		}
		if x[2]*x[2]+x[3]*x[3]+x[4]*x[4] < innerRadius2 {
			y++
		}
		if y == a.Y[i] {
			rule++
		}
	}
	for c, n := range counts {
		if n < a.Len()/6 || n > a.Len()/3 {
			t.Errorf("class %s has %d of %d examples: the classes should be about even", Labels[c], n, a.Len())
		}
	}
	if rule < a.Len()*9/10 || rule == a.Len() {
		t.Errorf("the rule gives the label for %d of %d jittered examples: want most but not all", rule, a.Len())
	}
	t.Logf("class counts %v; rule holds on %d/%d jittered examples", counts, rule, a.Len())
}

func TestSplitAndValidate(t *testing.T) {
	d := Generate(1, 10)
	first, rest, err := d.Split(7)
	if err != nil || first.Len() != 7 || rest.Len() != 3 || !equal(rest.X[0], d.X[7]) {
		t.Fatalf("split: %v, %d + %d", err, first.Len(), rest.Len())
	}
	if _, _, err := d.Split(11); err == nil {
		t.Fatal("split past the end succeeded")
	}
	bad := []struct {
		name string
		d    Dataset
	}{
		{"rows and labels", Dataset{X: d.X[:2], Y: d.Y[:1]}},
		{"short row", Dataset{X: [][]float64{{1, 2}}, Y: []int{0}}},
		{"nan", Dataset{X: [][]float64{{0, 0, 0, math.NaN(), 0, 0, 0, 0}}, Y: []int{0}}},
		{"class", Dataset{X: d.X[:1], Y: []int{Classes}}},
	}
	for _, c := range bad {
		if err := c.d.Validate(); err == nil {
			t.Errorf("%s: validated", c.name)
		}
	}
}

// The derivative training uses (the activation itself is he's
// Activation.Func) agrees with finite differences of the model file's
// activation.
func TestActivationDerivative(t *testing.T) {
	cheb, err := he.Chebyshev("tanh", -4, 4, 3)
	if err != nil {
		t.Fatal(err)
	}
	acts := []*he.Activation{
		DefaultActivation(),
		{Kind: he.ActPolynomial, Coeffs: []string{"0.1", "-0.3", "0.7", "0.01"}},
		cheb,
	}
	r := rand.New(rand.NewPCG(3, 3))
	for _, ha := range acts {
		a, err := prepare(ha)
		if err != nil {
			t.Fatal(err)
		}
		for range 2000 {
			x := 12*r.Float64() - 6
			const h = 1e-6
			fd := (ha.Eval(x+h) - ha.Eval(x-h)) / (2 * h)
			if d := a.deriv(x); math.Abs(d-fd) > 1e-5*max(1, math.Abs(fd)) {
				t.Fatalf("%s %v: derivative at %v is %v, finite difference %v", ha.Kind, ha.Coeffs, x, d, fd)
			}
		}
	}
}

func TestTrainDeterministicAndRoundTrips(t *testing.T) {
	m1, rep, err := Train(Options{Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	m2, _, err := Train(Options{Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	b1, err := m1.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := m2.Marshal()
	if !bytes.Equal(b1, b2) {
		t.Fatal("two trainings with seed 42 wrote different model files")
	}
	m3, _, err := Train(Options{Seed: 43})
	if err != nil {
		t.Fatal(err)
	}
	if b3, _ := m3.Marshal(); bytes.Equal(b1, b3) {
		t.Fatal("seeds 42 and 43 trained the same model")
	}

	// The demo's shape: 3 stages on N14 using all of its depth.
	p, err := he.NewParams("N14")
	if err != nil {
		t.Fatal(err)
	}
	depth := 0
	for i := range m1.Stages {
		depth += m1.Stages[i].Depth()
	}
	if m1.Preset != "N14" || len(m1.Stages) != 3 || depth != p.Depth() || m1.Outputs() != Classes || len(m1.Labels) != Classes {
		t.Fatalf("model: preset %s, %d stages, depth %d of %d, %d outputs", m1.Preset, len(m1.Stages), depth, p.Depth(), m1.Outputs())
	}

	// The file parses back to the same bytes and the same accuracy.
	parsed, err := he.ParseModel(b1)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := parsed.Marshal(); !bytes.Equal(again, b1) {
		t.Fatal("parsed model re-encodes to different bytes")
	}
	acc, err := Accuracy(parsed, rep.Test)
	if err != nil {
		t.Fatal(err)
	}
	if acc != rep.TestAccuracy {
		t.Fatalf("the parsed file's test accuracy is %v, training reported %v", acc, rep.TestAccuracy)
	}
}

func TestTrainBeatsLinear(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		_, rep, err := Train(Options{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("seed %d: train %.3f, test %.3f, linear baseline %.3f, loss %.3f, max |pre-activation| %.2f (bound %v)",
			seed, rep.TrainAccuracy, rep.TestAccuracy, rep.LinearBaseline, rep.Loss, rep.MaxPreActivation, rep.Bound)
		if rep.TestAccuracy < 0.85 {
			t.Errorf("seed %d: test accuracy %.3f: want at least 0.85", seed, rep.TestAccuracy)
		}
		if rep.LinearBaseline > 0.4 || rep.TestAccuracy-rep.LinearBaseline < 0.4 {
			t.Errorf("seed %d: test accuracy %.3f vs linear %.3f: the hidden stages should add at least 0.4", seed, rep.TestAccuracy, rep.LinearBaseline)
		}
		if rep.MaxPreActivation > 1.5*rep.Bound {
			t.Errorf("seed %d: pre-activations reach %.2f, far past the bound %v", seed, rep.MaxPreActivation, rep.Bound)
		}
	}
}

// On N13 (depth 4) the classifier gets one hidden stage; asking for two
// is refused with the stage that overflows.
func TestTrainFitsPreset(t *testing.T) {
	m, rep, err := Train(Options{Seed: 5, Preset: "N13"})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Stages) != 2 || m.Preset != "N13" {
		t.Fatalf("N13 model has %d stages on %s, want 2 on N13", len(m.Stages), m.Preset)
	}
	t.Logf("N13: test %.3f, linear %.3f", rep.TestAccuracy, rep.LinearBaseline)
	if rep.TestAccuracy < 0.8 {
		t.Errorf("N13 test accuracy %.3f: want at least 0.8", rep.TestAccuracy)
	}
	_, _, err = Train(Options{Seed: 5, Preset: "N13", Hidden: 2, Epochs: 1, Restarts: 1})
	var de *he.DepthError
	if !errors.As(err, &de) || de.Stage != 1 {
		t.Fatalf("two hidden stages on N13: %v, want a DepthError at stage 1", err)
	}
}

func TestOptionErrors(t *testing.T) {
	cases := []struct {
		name string
		o    Options
	}{
		{"preset", Options{Preset: "N99"}},
		{"log slots", Options{LogSlots: 2}},
		{"train", Options{Train: -1}},
		{"epochs", Options{Epochs: -3}},
		{"batch", Options{BatchSize: -1}},
		{"restarts", Options{Restarts: -1}},
		{"rate", Options{LearningRate: math.NaN()}},
		{"bound", Options{Bound: -1}},
		{"activation", Options{Activation: &he.Activation{Kind: he.ActPolynomial, Coeffs: []string{"0", "x"}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, _, err := Train(c.o); err == nil {
				t.Fatal("trained")
			} else {
				t.Log(err)
			}
		})
	}
}

// Encrypted predictions equal the plaintext ones.
func TestEncryptedMatchesPlaintext(t *testing.T) {
	m, rep, err := Train(Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	first, _, _ := rep.Test.Split(n)
	plain, err := Accuracy(m, first)
	if err != nil {
		t.Fatal(err)
	}
	acc, maxErr, agree, err := EncryptedAccuracy(m, rep.Test, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d test examples on %s: encrypted accuracy %.3f, plaintext %.3f, %d/%d predictions agree, max |error| %.3g",
		n, m.Preset, acc, plain, agree, n, maxErr)
	if agree != n || acc != plain {
		t.Fatalf("encrypted predictions: %d of %d agree with plaintext, accuracy %v vs %v", agree, n, acc, plain)
	}
	if !(maxErr < 1e-3) {
		t.Fatalf("max error %v between decrypted and plaintext outputs: want below 1e-3", maxErr)
	}
	if maxErr == 0 {
		t.Fatal("decrypted outputs equal the plaintext ones exactly: CKKS is approximate, so nothing was encrypted")
	}
	if _, _, _, err := EncryptedAccuracy(m, rep.Test, 0); err == nil {
		t.Fatal("0 examples accepted")
	}
	if _, _, _, err := EncryptedAccuracy(m, first, n+1); err == nil {
		t.Fatal("more examples than the set holds accepted")
	}
}

func equal(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func BenchmarkTrain(b *testing.B) {
	for b.Loop() {
		if _, _, err := Train(Options{Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncryptedExample is one example through the 3-stage N14 model:
// encrypt, three stages with the ciphertext re-read between them, decrypt.
func BenchmarkEncryptedExample(b *testing.B) {
	m, rep, err := Train(Options{Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	sk, ek, err := he.GenerateKeys(m.Preset, m.LogSlots)
	if err != nil {
		b.Fatal(err)
	}
	ev, err := he.NewEvaluator(m, ek)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := runEncrypted(sk, ev, rep.Test.X[i%rep.Test.Len()], m.Outputs()); err != nil {
			b.Fatal(err)
		}
	}
}

func TestMaxAbsDiffAndFormatVector(t *testing.T) {
	for _, c := range []struct {
		name string
		a, b []float64
		want float64
	}{
		{"equal", []float64{1, -2}, []float64{1, -2}, 0},
		{"largest of both signs", []float64{1, -2, 3}, []float64{1.5, 1, 2.75}, 3},
		{"empty", nil, nil, 0},
	} {
		if got := MaxAbsDiff(c.a, c.b); got != c.want {
			t.Errorf("%s: MaxAbsDiff = %v, want %v", c.name, got, c.want)
		}
	}
	if got, want := FormatVector([]float64{9.71764, -0.5, 0}), "[9.7176 -0.5000 0.0000]"; got != want {
		t.Errorf("FormatVector = %q, want %q", got, want)
	}
	if got := FormatVector(nil); got != "[]" {
		t.Errorf("FormatVector(nil) = %q, want []", got)
	}
}
