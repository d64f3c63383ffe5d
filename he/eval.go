package he

import (
	"fmt"
	"math/big"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/he/hefloat"
	"github.com/tuneinsight/lattigo/v5/ring"
	"github.com/tuneinsight/lattigo/v5/utils/bignum"
)

// Evaluator evaluates the stages of one model on ciphertexts under one
// client's evaluation keys. It is not safe for concurrent use.
type Evaluator struct {
	model  *Model
	params *Params
	keys   *EvalKeys
	eval   *hefloat.Evaluator
	lt     *hefloat.LinearTransformationEvaluator
	poly   *hefloat.PolynomialEvaluator
	// enc64 encodes the provider's plaintexts with 64-bit precision
	// big-float arithmetic: float64 encoding differs between amd64 and
	// arm64 (fused multiply-adds).
	enc64  *hefloat.Encoder
	stages []compiled
}

type compiled struct {
	diags hefloat.Diagonals[float64] // nil without a dense layer
	bias  []float64                  // nil without a bias
	// poly is the activation (nil without one); scalar/constant map a
	// Chebyshev activation's interval onto [-1, 1] when there is no dense
	// layer to fold that into.
	poly             *bignum.Polynomial
	scalar, constant *big.Float
}

// NewEvaluator checks that keys fit model (same preset and width) and
// prepares the stages.
func NewEvaluator(m *Model, keys *EvalKeys) (*Evaluator, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	p, err := cachedParams(m.Preset)
	if err != nil {
		return nil, err
	}
	if keys.Params.Name != p.Name {
		return nil, fmt.Errorf("he: the evaluation keys are for preset %s, the model uses %s: generate keys with --preset %s", keys.Params.Name, p.Name, p.Name)
	}
	if keys.LogSlots != m.LogSlots {
		return nil, fmt.Errorf("he: the evaluation keys are for vectors of 2^%d values, the model uses 2^%d: generate keys with --log-slots %d", keys.LogSlots, m.LogSlots, m.LogSlots)
	}
	eval := hefloat.NewEvaluator(p.Parameters, keys.set)
	e := &Evaluator{
		model: m, params: p, keys: keys, eval: eval,
		lt:    hefloat.NewLinearTransformationEvaluator(eval),
		poly:  hefloat.NewPolynomialEvaluator(p.Parameters, eval),
		enc64: hefloat.NewEncoder(p.Parameters, 64),
	}
	n := 1 << m.LogSlots
	in := m.Inputs
	for i := range m.Stages {
		c, err := compile(&m.Stages[i], in, n)
		if err != nil {
			return nil, fmt.Errorf("he: stage %d (%s): %w", i, m.Stages[i].Name, err)
		}
		e.stages = append(e.stages, c)
		in = m.Stages[i].Outputs(in)
	}
	return e, nil
}

func compile(s *Stage, in, n int) (compiled, error) {
	var c compiled
	var fold *[2]*big.Float // Chebyshev change of interval folded into the dense layer
	if a := s.Activation; a != nil {
		coeffs, err := a.coefficients()
		if err != nil {
			return c, err
		}
		basis := bignum.Monomial
		var interval interface{}
		if a.Kind == ActChebyshev {
			basis = bignum.Chebyshev
			interval = [2]float64{a.Interval[0], a.Interval[1]}
		}
		pol := bignum.NewPolynomial(basis, coeffs, interval)
		c.poly = &pol
		if a.Kind == ActChebyshev {
			scalar, constant := pol.ChangeOfBasis()
			if s.Dense != nil {
				fold = &[2]*big.Float{scalar, constant}
			} else {
				c.scalar, c.constant = scalar, constant
			}
		}
	}
	if d := s.Dense; d != nil {
		// Rows and columns beyond the layer's shape are zero. Every
		// diagonal is kept, zero or not: the rotations used are then the
		// same for every layer, the ones the client's keys hold.
		c.diags = make(hefloat.Diagonals[float64], n)
		for k := 0; k < n; k++ {
			diag := make([]float64, n)
			for i := 0; i < len(d.Weights); i++ {
				if j := (i + k) % n; j < in {
					diag[i] = scaled(d.Weights[i][j], fold, false)
				}
			}
			c.diags[k] = diag
		}
		if len(d.Bias) > 0 || fold != nil {
			c.bias = make([]float64, n)
			for i := 0; i < len(d.Weights); i++ {
				b := 0.0
				if len(d.Bias) > 0 {
					b = d.Bias[i]
				}
				c.bias[i] = scaled(b, fold, true)
			}
		}
	}
	return c, nil
}

// scaled applies a folded change of interval x -> scalar·x (+ constant for
// a bias) in big-float arithmetic, rounding once to float64, so every
// architecture gets the same number.
func scaled(x float64, fold *[2]*big.Float, bias bool) float64 {
	if fold == nil {
		return x
	}
	v := new(big.Float).SetPrec(coeffPrec).SetFloat64(x)
	v.Mul(v, fold[0])
	if bias {
		v.Add(v, fold[1])
	}
	f, _ := v.Float64()
	return f
}

// Stages is the number of stages.
func (e *Evaluator) Stages() int { return len(e.stages) }

// EvalStage evaluates stage s on its input ciphertext, which must be the
// client's input (s = 0) or stage s-1's output: the level, width, scale
// and key are checked.
func (e *Evaluator) EvalStage(s int, in *Ciphertext) (*Ciphertext, error) {
	if s < 0 || s >= len(e.stages) {
		return nil, fmt.Errorf("he: the model has stages 0..%d, not %d", len(e.stages)-1, s)
	}
	if err := e.checkInput(s, in); err != nil {
		return nil, err
	}
	c := &e.stages[s]
	ct := in.ct.CopyNew()
	p := e.params.Parameters
	if c.diags != nil {
		lt := hefloat.NewLinearTransformation(p, hefloat.LinearTransformationParameters{
			DiagonalsIndexList:       c.diags.DiagonalsIndexList(),
			Level:                    ct.Level(),
			Scale:                    rlwe.NewScale(p.Q()[ct.Level()]),
			LogDimensions:            ring.Dimensions{Rows: 0, Cols: e.model.LogSlots},
			LogBabyStepGianStepRatio: bsgsRatio,
		})
		if err := hefloat.EncodeLinearTransformation[float64](e.enc64, c.diags, lt); err != nil {
			return nil, fmt.Errorf("he: stage %d: encode weights: %w", s, err)
		}
		out := hefloat.NewCiphertext(p, 1, ct.Level())
		if err := e.lt.Evaluate(ct, lt, out); err != nil {
			return nil, fmt.Errorf("he: stage %d: dense layer: %w", s, err)
		}
		if err := e.eval.Rescale(out, out); err != nil {
			return nil, fmt.Errorf("he: stage %d: rescale: %w", s, err)
		}
		ct = out
		if c.bias != nil {
			pt := hefloat.NewPlaintext(p, ct.Level())
			pt.Scale = ct.Scale
			pt.LogDimensions = ring.Dimensions{Rows: 0, Cols: e.model.LogSlots}
			if err := e.enc64.Encode(c.bias, pt); err != nil {
				return nil, fmt.Errorf("he: stage %d: encode bias: %w", s, err)
			}
			if err := e.eval.Add(ct, pt, ct); err != nil {
				return nil, fmt.Errorf("he: stage %d: bias: %w", s, err)
			}
		}
	}
	if c.poly != nil {
		if c.scalar != nil {
			if err := e.eval.Mul(ct, c.scalar, ct); err != nil {
				return nil, fmt.Errorf("he: stage %d: change of interval: %w", s, err)
			}
			if err := e.eval.Add(ct, c.constant, ct); err != nil {
				return nil, fmt.Errorf("he: stage %d: change of interval: %w", s, err)
			}
			// lattigo multiplies by an integer scalar exactly, without
			// raising the scale (an interval of width 2 or 1 gives one):
			// there is nothing to rescale, and the level is dropped so
			// the stage consumes the levels its Depth says.
			if bignum.ToComplex(c.scalar, p.EncodingPrecision()).IsInt() {
				e.eval.DropLevel(ct, 1)
			} else if err := e.eval.Rescale(ct, ct); err != nil {
				return nil, fmt.Errorf("he: stage %d: rescale: %w", s, err)
			}
		}
		out, err := e.poly.Evaluate(ct, *c.poly, p.DefaultScale())
		if err != nil {
			return nil, fmt.Errorf("he: stage %d: activation: %w", s, err)
		}
		ct = out
	}
	if want := e.model.InputLevel(e.params, s+1); ct.Level() != want {
		return nil, fmt.Errorf("he: stage %d ended at level %d, its depth says %d", s, ct.Level(), want)
	}
	return &Ciphertext{Params: e.params, Key: in.Key, ct: ct}, nil
}

func (e *Evaluator) checkInput(s int, in *Ciphertext) error {
	p := e.params
	switch {
	case in.Params.Name != p.Name:
		return fmt.Errorf("he: the ciphertext uses preset %s, the model %s: encrypt with keys for preset %s", in.Params.Name, p.Name, p.Name)
	case in.Key != e.keys.ID:
		return fmt.Errorf("he: the ciphertext is under key %s, the evaluation keys are for key %s: they must come from the same ogpu he keygen", in.Key, e.keys.ID)
	case in.LogSlots() != e.model.LogSlots:
		return fmt.Errorf("he: the ciphertext holds 2^%d values, the model's vectors 2^%d", in.LogSlots(), e.model.LogSlots)
	case in.Level() != e.model.InputLevel(p, s):
		return fmt.Errorf("he: stage %d takes a ciphertext at level %d, this one is at level %d: it is not stage %d's input", s, e.model.InputLevel(p, s), in.Level(), s)
	case in.ct.Scale.Cmp(p.DefaultScale()) != 0:
		return fmt.Errorf("he: the ciphertext's scale is not the preset's default scale: it is not a stage input this package made")
	}
	return nil
}
