package he

import (
	"math"
	"math/rand/v2"
	"testing"
)

// accuracyBound is the largest absolute error allowed between
// decrypt(evaluate(encrypt(x))) and Model.Forward(x), per preset, for
// inputs in [-1, 1] and models whose values stay within a few units
// (randomDense, randomPolynomial, Chebyshev activations over intervals
// that contain their inputs). The scales are 2^30 (N13) and 2^35 (N14);
// the largest errors seen were about 1.3e-6 and 1.5e-8, and each subtest
// logs its own.
var accuracyBound = map[string]float64{"N13": 1e-5, "N14": 1e-6}

func TestEncryptedMatchesPlaintext(t *testing.T) {
	type build func(t testing.TB, r *rand.Rand) *Model
	cases := []struct {
		name  string
		model build
	}{
		{"N13/dense+poly2,dense", func(t testing.TB, r *rand.Rand) *Model {
			return buildModel(t, r, "N13", 3, 8, stageSpec{6, randomPolynomial(r, 2)}, stageSpec{out: 3})
		}},
		{"N13/dense+sigmoid3,dense", func(t testing.TB, r *rand.Rand) *Model {
			return buildModel(t, r, "N13", 4, 16, stageSpec{10, chebyshev(t, "sigmoid", -2, 2, 3)}, stageSpec{out: 4})
		}},
		{"N13/tanh3,dense", func(t testing.TB, r *rand.Rand) *Model {
			return buildModel(t, r, "N13", 3, 8, stageSpec{act: chebyshev(t, "tanh", -1.5, 1.5, 3)}, stageSpec{out: 5})
		}},
		// An interval whose change of basis is x -> 1·x + 0: an integer
		// scalar.
		{"N13/sigmoid3 over [-1,1],dense", func(t testing.TB, r *rand.Rand) *Model {
			return buildModel(t, r, "N13", 3, 8, stageSpec{act: chebyshev(t, "sigmoid", -1, 1, 3)}, stageSpec{out: 2})
		}},
		{"N13/poly1,poly1,poly1,poly1", func(t testing.TB, r *rand.Rand) *Model {
			return buildModel(t, r, "N13", 2, 4, stageSpec{act: randomPolynomial(r, 1)}, stageSpec{act: randomPolynomial(r, 1)},
				stageSpec{act: randomPolynomial(r, 1)}, stageSpec{act: randomPolynomial(r, 1)})
		}},
		{"N14/dense+poly7,dense+poly3", func(t testing.TB, r *rand.Rand) *Model {
			return buildModel(t, r, "N14", 3, 8, stageSpec{8, randomPolynomial(r, 7)}, stageSpec{4, randomPolynomial(r, 3)})
		}},
		{"N14/dense+tanh7,sigmoid3", func(t testing.TB, r *rand.Rand) *Model {
			return buildModel(t, r, "N14", 4, 16, stageSpec{12, chebyshev(t, "tanh", -2, 2, 7)}, stageSpec{act: chebyshev(t, "sigmoid", -1.25, 1.25, 3)})
		}},
		{"N14/softplus3,dense+sigmoid2,dense", func(t testing.TB, r *rand.Rand) *Model {
			return buildModel(t, r, "N14", 4, 16, stageSpec{act: chebyshev(t, "softplus", -1, 1, 3)},
				stageSpec{7, chebyshev(t, "sigmoid", -4, 4, 2)}, stageSpec{out: 3})
		}},
		{"N14/dense,dense,dense+poly2,dense,dense", func(t testing.TB, r *rand.Rand) *Model {
			return buildModel(t, r, "N14", 3, 7, stageSpec{out: 8}, stageSpec{out: 8}, stageSpec{8, randomPolynomial(r, 2)},
				stageSpec{out: 8}, stageSpec{out: 1})
		}},
	}
	for ci, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(ci), 11))
			worst, preset := 0.0, ""
			for trial := 0; trial < 2; trial++ {
				m := tc.model(t, r) // a fresh random model per trial
				preset = m.Preset
				sk, ek := testKeys(t, m.Preset, m.LogSlots)
				ev, err := NewEvaluator(m, ek)
				if err != nil {
					t.Fatal(err)
				}
				for in := 0; in < 2; in++ {
					x := randomInput(r, m.Inputs)
					ct, err := sk.Encrypt(x)
					if err != nil {
						t.Fatal(err)
					}
					outs := runStages(t, ev, ct)
					got, err := sk.Decrypt(outs[len(outs)-1], m.Outputs())
					if err != nil {
						t.Fatal(err)
					}
					want, err := m.Forward(x)
					if err != nil {
						t.Fatal(err)
					}
					if len(got) != len(want) {
						t.Fatalf("%d outputs decrypted, the plaintext model gives %d", len(got), len(want))
					}
					bound := accuracyBound[m.Preset]
					for i := range want {
						d := math.Abs(got[i] - want[i])
						if !(d <= bound) {
							t.Fatalf("trial %d input %d output %d: encrypted %v, plaintext %v: error %.3g above %g", trial, in, i, got[i], want[i], d, bound)
						}
						worst = max(worst, d)
					}
				}
			}
			t.Logf("max abs error %.3g (bound %g)", worst, accuracyBound[preset])
		})
	}
}

// TestChebyshevApproximatesFunction checks the plaintext reference itself:
// a Chebyshev activation is close to the function it names, so an
// encrypted run that matches Forward computes that function.
func TestChebyshevApproximatesFunction(t *testing.T) {
	fns := map[string]func(float64) float64{
		"sigmoid":  func(x float64) float64 { return 1 / (1 + math.Exp(-x)) },
		"tanh":     math.Tanh,
		"softplus": func(x float64) float64 { return math.Log1p(math.Exp(x)) },
	}
	for _, name := range FunctionNames() {
		a := chebyshev(t, name, -2, 2, 15)
		worst := 0.0
		for i := 0; i <= 200; i++ {
			x := -2 + 4*float64(i)/200
			worst = max(worst, math.Abs(a.Eval(x)-fns[name](x)))
		}
		if worst > 1e-3 {
			t.Errorf("%s: degree-15 Chebyshev approximation over [-2, 2] is off by %.3g", name, worst)
		}
		t.Logf("%s: max error of the degree-15 approximation over [-2, 2]: %.3g", name, worst)
	}
}
