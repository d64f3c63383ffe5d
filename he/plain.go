package he

import "fmt"

// Forward runs the model on x in float64 arithmetic: the plaintext
// reference an encrypted run is compared with.
func (m *Model) Forward(x []float64) ([]float64, error) {
	if len(x) != m.Inputs {
		return nil, fmt.Errorf("he: model %s takes %d inputs, got %d", m.Name, m.Inputs, len(x))
	}
	for s := range m.Stages {
		x = m.Stages[s].Forward(x)
	}
	return x, nil
}

// Forward runs the stage on x in float64 arithmetic.
func (s *Stage) Forward(x []float64) []float64 {
	if d := s.Dense; d != nil {
		y := make([]float64, len(d.Weights))
		for i, row := range d.Weights {
			sum := 0.0
			for j, w := range row {
				sum += w * x[j]
			}
			if len(d.Bias) > 0 {
				sum += d.Bias[i]
			}
			y[i] = sum
		}
		x = y
	}
	if a := s.Activation; a != nil {
		f, err := a.Func()
		if err != nil {
			panic(err) // validated models only
		}
		y := make([]float64, len(x))
		for i, v := range x {
			y[i] = f(v)
		}
		x = y
	}
	return x
}

// Eval evaluates the activation polynomial at x in float64 arithmetic
// (Horner in the monomial basis, Clenshaw in the Chebyshev one). It parses
// the coefficients on every call: in a loop, use Func.
func (a *Activation) Eval(x float64) float64 {
	f, err := a.Func()
	if err != nil {
		panic(err) // validated models only
	}
	return f(x)
}

// Func is Eval with the coefficients parsed once.
func (a *Activation) Func() (func(float64) float64, error) {
	coeffs, err := a.coefficients()
	if err != nil {
		return nil, err
	}
	c := make([]float64, len(coeffs))
	for i, f := range coeffs {
		c[i], _ = f.Float64()
	}
	if a.Kind == ActChebyshev {
		lo, hi := a.Interval[0], a.Interval[1]
		return func(x float64) float64 {
			t := (2*x - lo - hi) / (hi - lo)
			var b1, b2 float64
			for k := len(c) - 1; k >= 1; k-- {
				b1, b2 = 2*t*b1-b2+c[k], b1
			}
			return t*b1 - b2 + c[0]
		}, nil
	}
	return func(x float64) float64 {
		y := 0.0
		for k := len(c) - 1; k >= 0; k-- {
			y = y*x + c[k]
		}
		return y
	}, nil
}
