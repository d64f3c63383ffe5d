package he

import (
	"math"
	"math/rand/v2"
	"testing"
)

// testModel is a two-stage model on preset: dense 8→6 with a degree-2
// polynomial activation, then dense 6→3.
func testModel(t testing.TB, preset string, seed uint64) *Model {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	dense := func(out, in int) *Dense {
		d := &Dense{Weights: make([][]float64, out), Bias: make([]float64, out)}
		for i := range d.Weights {
			d.Weights[i] = make([]float64, in)
			for j := range d.Weights[i] {
				d.Weights[i][j] = r.Float64() - 0.5
			}
			d.Bias[i] = (r.Float64() - 0.5) / 4
		}
		return d
	}
	m := &Model{Format: ModelFormat, Name: "test", Preset: preset, LogSlots: 3, Inputs: 8, Stages: []Stage{
		{Name: "hidden", Dense: dense(6, 8), Activation: &Activation{Kind: ActPolynomial, Coeffs: []string{"0", "0.5", "0.25"}}},
		{Name: "out", Dense: dense(3, 6)},
	}}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	return m
}

func randomInput(r *rand.Rand, n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = 2*r.Float64() - 1
	}
	return x
}

func TestEncryptDecrypt(t *testing.T) {
	sk, _, err := GenerateKeys("N13", 3)
	if err != nil {
		t.Fatal(err)
	}
	x := []float64{1, -2, 3.5, 0.125}
	ct, err := sk.Encrypt(x)
	if err != nil {
		t.Fatal(err)
	}
	bz, err := ct.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	ct2, err := UnmarshalCiphertext(bz)
	if err != nil {
		t.Fatal(err)
	}
	got, err := sk.Decrypt(ct2, 8)
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		want := 0.0
		if i < len(x) {
			want = x[i]
		}
		if math.Abs(got[i]-want) > 1e-5 {
			t.Fatalf("slot %d: got %v want %v", i, got[i], want)
		}
	}
}

func TestStagesMatchPlaintext(t *testing.T) {
	m := testModel(t, "N13", 1)
	sk, ek, err := GenerateKeys(m.Preset, m.LogSlots)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := NewEvaluator(m, ek)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 7))
	for trial := 0; trial < 3; trial++ {
		x := randomInput(r, m.Inputs)
		ct, err := sk.Encrypt(x)
		if err != nil {
			t.Fatal(err)
		}
		for s := 0; s < ev.Stages(); s++ {
			if ct, err = ev.EvalStage(s, ct); err != nil {
				t.Fatal(err)
			}
		}
		got, err := sk.Decrypt(ct, m.Outputs())
		if err != nil {
			t.Fatal(err)
		}
		want, _ := m.Forward(x)
		for i := range want {
			if d := math.Abs(got[i] - want[i]); d > 1e-3 {
				t.Fatalf("trial %d output %d: encrypted %v, plaintext %v (error %.2g)", trial, i, got[i], want[i], d)
			}
		}
		t.Logf("trial %d: %v vs %v", trial, got, want)
	}
}
