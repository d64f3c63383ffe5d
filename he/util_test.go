package he

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
)

// Key generation dominates the cost of these tests, so each (preset,
// width) pair is generated once per test binary and shared.
var (
	keysMu    sync.Mutex
	keysCache = map[string]*testKeyPair{}
)

type testKeyPair struct {
	sk *SecretKey
	ek *EvalKeys
}

func testKeys(t testing.TB, preset string, logSlots int) (*SecretKey, *EvalKeys) {
	t.Helper()
	keysMu.Lock()
	defer keysMu.Unlock()
	name := fmt.Sprintf("%s/%d", preset, logSlots)
	if k, ok := keysCache[name]; ok {
		return k.sk, k.ek
	}
	sk, ek, err := GenerateKeys(preset, logSlots)
	if err != nil {
		t.Fatal(err)
	}
	keysCache[name] = &testKeyPair{sk, ek}
	return sk, ek
}

// stageSpec describes a stage of a generated model: a dense layer of out
// outputs (out 0: none) and an activation (nil: none).
type stageSpec struct {
	out int
	act *Activation
}

// randomDense returns a dense layer whose rows have L1 norm at most 1 and
// whose biases are at most 1/4: every output is bounded by the largest
// input plus 1/4, which keeps the values of a model far from the top of
// the smallest modulus (|x| < 4 at level 0 of N13).
func randomDense(r *rand.Rand, out, in int) *Dense {
	d := &Dense{Weights: make([][]float64, out), Bias: make([]float64, out)}
	for i := range d.Weights {
		d.Weights[i] = make([]float64, in)
		for j := range d.Weights[i] {
			d.Weights[i][j] = (2*r.Float64() - 1) / float64(in)
		}
		d.Bias[i] = (r.Float64() - 0.5) / 2
	}
	return d
}

// randomPolynomial returns a monomial activation of the given degree with
// coefficients c_k in [-2^-k, 2^-k]: |p(x)| <= 2.7 for |x| <= 1.25.
func randomPolynomial(r *rand.Rand, degree int) *Activation {
	a := &Activation{Kind: ActPolynomial, Coeffs: make([]string, degree+1)}
	for k := range a.Coeffs {
		c := (2*r.Float64() - 1) / float64(uint(1)<<k)
		a.Coeffs[k] = strconv.FormatFloat(c, 'g', -1, 64)
	}
	return a
}

func chebyshev(t testing.TB, function string, a, b float64, degree int) *Activation {
	t.Helper()
	act, err := Chebyshev(function, a, b, degree)
	if err != nil {
		t.Fatal(err)
	}
	return act
}

// buildModel makes a validated model of the given stages with random
// weights.
func buildModel(t testing.TB, r *rand.Rand, preset string, logSlots, inputs int, specs ...stageSpec) *Model {
	t.Helper()
	m := &Model{Format: ModelFormat, Name: "generated", Preset: preset, LogSlots: logSlots, Inputs: inputs}
	in := inputs
	for i, s := range specs {
		st := Stage{Name: fmt.Sprintf("s%d", i), Activation: s.act}
		if s.out > 0 {
			st.Dense = randomDense(r, s.out, in)
			in = s.out
		}
		m.Stages = append(m.Stages, st)
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	return m
}

// runStages evaluates every stage, returning each stage's output.
func runStages(t testing.TB, ev *Evaluator, ct *Ciphertext) []*Ciphertext {
	t.Helper()
	var outs []*Ciphertext
	for s := 0; s < ev.Stages(); s++ {
		var err error
		if ct, err = ev.EvalStage(s, ct); err != nil {
			t.Fatalf("stage %d: %v", s, err)
		}
		outs = append(outs, ct)
	}
	return outs
}

func marshalCT(t testing.TB, c *Ciphertext) []byte {
	t.Helper()
	bz, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return bz
}

// hashes is the hex sha256 of each ciphertext's wire bytes.
func hashes(t testing.TB, cts []*Ciphertext) []string {
	t.Helper()
	out := make([]string, len(cts))
	for i, c := range cts {
		out[i] = fmt.Sprintf("%x", sha256.Sum256(marshalCT(t, c)))
	}
	return out
}

// reseal recomputes the payload length and the checksum of an encoded
// object whose payload was edited, so that the decoder gets past the
// envelope to the edit.
func reseal(data []byte) []byte {
	if len(data) < len(magic)+3 {
		return data
	}
	nl := int(data[len(magic)+2])
	hdr := len(magic) + 3 + nl + 32 + 32 + 8
	if len(data) < hdr+32 {
		return data
	}
	out := append([]byte(nil), data[:len(data)-32]...)
	n := uint64(len(out) - hdr)
	for i := 0; i < 8; i++ {
		out[hdr-8+i] = byte(n >> (56 - 8*i))
	}
	sum := sha256.Sum256(out)
	return append(out, sum[:]...)
}

// payloadOffset is where an encoded object's payload starts.
func payloadOffset(data []byte) int {
	return len(magic) + 3 + int(data[len(magic)+2]) + 32 + 32 + 8
}
