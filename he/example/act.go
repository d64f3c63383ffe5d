package example

import (
	"fmt"
	"math/big"

	"github.com/ogpu-network/ogpu/he"
)

// act is an activation prepared for training: eval is he's own float64
// evaluation of it (Activation.Func), deriv its derivative.
type act struct {
	eval   func(float64) float64
	cheb   bool
	lo, hi float64
	dc     []float64 // derivative, monomial basis in x (or in t for Chebyshev)
}

func prepare(a *he.Activation) (*act, error) {
	if a == nil {
		return nil, fmt.Errorf("example: no activation")
	}
	eval, err := a.Func()
	if err != nil {
		return nil, fmt.Errorf("example: activation: %w", err)
	}
	p := &act{eval: eval, cheb: a.Kind == he.ActChebyshev, lo: a.Interval[0], hi: a.Interval[1]}
	c := make([]float64, len(a.Coeffs))
	for i, s := range a.Coeffs {
		f, _ := new(big.Float).SetPrec(128).SetString(s) // Func parsed them
		c[i], _ = f.Float64()
	}
	mono := c
	if p.cheb {
		mono = chebToMonomial(c)
	}
	for k := 1; k < len(mono); k++ {
		p.dc = append(p.dc, float64(k)*mono[k])
	}
	return p, nil
}

// deriv is the derivative of eval at x.
func (a *act) deriv(x float64) float64 {
	t, dt := x, 1.0
	if a.cheb {
		t = (2*x - a.lo - a.hi) / (a.hi - a.lo)
		dt = 2 / (a.hi - a.lo)
	}
	y := 0.0
	for k := len(a.dc) - 1; k >= 0; k-- {
		y = y*t + a.dc[k]
	}
	return y * dt
}

// chebToMonomial rewrites Σ c_k T_k(t) as Σ m_k t^k.
func chebToMonomial(c []float64) []float64 {
	n := len(c)
	m := make([]float64, n)
	prev, cur := make([]float64, n), make([]float64, n) // T_{k-1}, T_k
	prev[0] = 1
	if n > 1 {
		cur[1] = 1
	}
	for k := 0; k < n; k++ {
		tk := prev
		if k >= 1 {
			tk = cur
		}
		for i := range tk {
			m[i] += c[k] * tk[i]
		}
		if k >= 1 && k+1 < n {
			next := make([]float64, n)
			for i := 0; i+1 < n; i++ {
				next[i+1] += 2 * cur[i]
			}
			for i := range next {
				next[i] -= prev[i]
			}
			prev, cur = cur, next
		}
	}
	return m
}
