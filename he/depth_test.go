package he

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestStageDepthIsLevelsConsumed evaluates single stages of every
// activation degree 1..7, monomial and Chebyshev, with and without a dense
// layer, and checks that Stage.Depth is the number of levels the
// evaluation actually consumed (input level minus output level). The
// model validator and the client's depth check rely on it.
func TestStageDepthIsLevelsConsumed(t *testing.T) {
	const preset, logSlots = "N14", 3
	p, err := NewParams(preset)
	if err != nil {
		t.Fatal(err)
	}
	sk, ek := testKeys(t, preset, logSlots)
	r := rand.New(rand.NewPCG(5, 5))
	type tc struct {
		name string
		spec stageSpec
		want int // the documented depth, independent of Stage.Depth
	}
	var cases []tc
	for deg := 1; deg <= 7; deg++ {
		logDeg := 0
		for 1<<logDeg <= deg {
			logDeg++ // ceil(log2(deg+1))
		}
		cases = append(cases,
			tc{fmt.Sprintf("poly%d", deg), stageSpec{act: randomPolynomial(r, deg)}, logDeg},
			tc{fmt.Sprintf("dense+poly%d", deg), stageSpec{out: 8, act: randomPolynomial(r, deg)}, 1 + logDeg},
			tc{fmt.Sprintf("tanh%d", deg), stageSpec{act: chebyshev(t, "tanh", -1.5, 1.5, deg)}, 1 + logDeg},
			// [-1, 1]: the change of interval is the identity (integer
			// scalar), the other branch of the evaluator.
			tc{fmt.Sprintf("sigmoid%d over [-1,1]", deg), stageSpec{act: chebyshev(t, "sigmoid", -1, 1, deg)}, 1 + logDeg},
			tc{fmt.Sprintf("dense+sigmoid%d", deg), stageSpec{out: 8, act: chebyshev(t, "sigmoid", -2, 2, deg)}, 1 + logDeg},
		)
	}
	cases = append(cases, tc{"dense", stageSpec{out: 5}, 1})
	x := randomInput(r, 8)
	in, err := sk.Encrypt(x)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := buildModel(t, r, preset, logSlots, 8, c.spec)
			if d := m.Stages[0].Depth(); d != c.want {
				t.Fatalf("Stage.Depth() = %d, want %d", d, c.want)
			}
			ev, err := NewEvaluator(m, ek)
			if err != nil {
				t.Fatal(err)
			}
			out, err := ev.EvalStage(0, in)
			if err != nil {
				t.Fatal(err)
			}
			if used := in.Level() - out.Level(); used != c.want {
				t.Fatalf("the stage consumed %d levels (%d -> %d), its depth is %d", used, in.Level(), out.Level(), c.want)
			}
			if out.Level() != p.MaxLevel()-c.want {
				t.Fatalf("output level %d, want %d", out.Level(), p.MaxLevel()-c.want)
			}
			// The output is a valid input for a following stage: its scale
			// is the default one.
			if out.ct.Scale.Cmp(p.DefaultScale()) != 0 {
				t.Fatalf("output scale 2^%.4f, want the default 2^%d", out.ct.LogScale(), p.LogDefaultScale())
			}
			got, err := sk.Decrypt(out, m.Outputs())
			if err != nil {
				t.Fatal(err)
			}
			want, _ := m.Forward(x)
			for i := range want {
				if d := got[i] - want[i]; d > 1e-6 || d < -1e-6 {
					t.Fatalf("output %d: %v, plaintext %v", i, got[i], want[i])
				}
			}
		})
	}
}
