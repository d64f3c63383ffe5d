package he

import (
	"fmt"
	"math/big"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/he/hefloat"
	"github.com/tuneinsight/lattigo/v5/ring"
	"github.com/tuneinsight/lattigo/v5/utils/bignum"
)

// bareStage is a stage made of a dense layer, a bias and a monomial
// activation, evaluated with lattigo's calls written out here, directly
// from the model's numbers: the reference EvalStage is compared with,
// byte for byte in the tests and in time in the benchmarks.
type bareStage struct {
	params   hefloat.Parameters
	logSlots int
	eval     *hefloat.Evaluator
	lte      *hefloat.LinearTransformationEvaluator
	pe       *hefloat.PolynomialEvaluator
	enc      *hefloat.Encoder
	diags    hefloat.Diagonals[float64]
	bias     []float64
	act      bignum.Polynomial
}

// newBareStage prepares st (dense + bias + monomial activation) whose
// input has in values, encoding its plaintexts with enc.
func newBareStage(keys *EvalKeys, logSlots int, st *Stage, in int, enc *hefloat.Encoder) (*bareStage, error) {
	if st.Dense == nil || st.Activation == nil || st.Activation.Kind != ActPolynomial {
		return nil, fmt.Errorf("bare stage: want a dense layer and a monomial activation")
	}
	params := keys.Params.Parameters
	eval := hefloat.NewEvaluator(params, keys.set)
	b := &bareStage{
		params: params, logSlots: logSlots, eval: eval,
		lte: hefloat.NewLinearTransformationEvaluator(eval),
		pe:  hefloat.NewPolynomialEvaluator(params, eval),
		enc: enc,
	}
	// Diagonal k of the n×n matrix holding W in its top-left corner:
	// d_k[i] = M[i][(i+k) mod n].
	n := 1 << logSlots
	w := st.Dense.Weights
	b.diags = hefloat.Diagonals[float64]{}
	for k := 0; k < n; k++ {
		d := make([]float64, n)
		for i := range w {
			if j := (i + k) % n; j < in {
				d[i] = w[i][j]
			}
		}
		b.diags[k] = d
	}
	b.bias = make([]float64, n)
	copy(b.bias, st.Dense.Bias)
	coeffs := make([]*big.Float, len(st.Activation.Coeffs))
	for i, s := range st.Activation.Coeffs {
		f, ok := new(big.Float).SetPrec(128).SetString(s)
		if !ok {
			return nil, fmt.Errorf("bare stage: coefficient %q", s)
		}
		coeffs[i] = f
	}
	b.act = bignum.NewPolynomial(bignum.Monomial, coeffs, nil)
	return b, nil
}

// encode encodes the weights for an input at level and the bias for the
// rescaled product.
func (b *bareStage) encode(level int) (hefloat.LinearTransformation, *rlwe.Plaintext, error) {
	lt := hefloat.NewLinearTransformation(b.params, hefloat.LinearTransformationParameters{
		DiagonalsIndexList:       b.diags.DiagonalsIndexList(),
		Level:                    level,
		Scale:                    rlwe.NewScale(b.params.Q()[level]),
		LogDimensions:            ring.Dimensions{Rows: 0, Cols: b.logSlots},
		LogBabyStepGianStepRatio: 0,
	})
	if err := hefloat.EncodeLinearTransformation[float64](b.enc, b.diags, lt); err != nil {
		return lt, nil, err
	}
	pt := hefloat.NewPlaintext(b.params, level-1)
	pt.Scale = b.params.DefaultScale()
	pt.LogDimensions = ring.Dimensions{Rows: 0, Cols: b.logSlots}
	if err := b.enc.Encode(b.bias, pt); err != nil {
		return lt, nil, err
	}
	return lt, pt, nil
}

// evalEncoded evaluates the stage with plaintexts already encoded.
func (b *bareStage) evalEncoded(ct *rlwe.Ciphertext, lt hefloat.LinearTransformation, bias *rlwe.Plaintext) (*rlwe.Ciphertext, error) {
	out := hefloat.NewCiphertext(b.params, 1, ct.Level())
	if err := b.lte.Evaluate(ct, lt, out); err != nil {
		return nil, err
	}
	if err := b.eval.Rescale(out, out); err != nil {
		return nil, err
	}
	if err := b.eval.Add(out, bias, out); err != nil {
		return nil, err
	}
	return b.pe.Evaluate(out, b.act, b.params.DefaultScale())
}

// evalStage encodes the plaintexts and evaluates: the same work as
// EvalStage.
func (b *bareStage) evalStage(ct *rlwe.Ciphertext) (*rlwe.Ciphertext, error) {
	lt, bias, err := b.encode(ct.Level())
	if err != nil {
		return nil, err
	}
	return b.evalEncoded(ct, lt, bias)
}
