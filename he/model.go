package he

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"math/bits"
	"os"

	"github.com/tuneinsight/lattigo/v5/utils/bignum"
)

// ModelFormat is the format tag of a pipeline model file.
const ModelFormat = "ogpu-pipeline/1"

// Model is a pipeline model: a sequence of stages evaluated on encrypted
// vectors of 2^LogSlots values under one parameter preset. Its identity is
// the sha256 of its file (Hash); providers and validators load it from
// that blob.
type Model struct {
	Format   string   `json:"format"`
	Name     string   `json:"name"`
	Preset   string   `json:"preset"`
	LogSlots int      `json:"log_slots"`
	Inputs   int      `json:"inputs"`
	Labels   []string `json:"labels,omitempty"`
	Stages   []Stage  `json:"stages"`
}

// Stage is what one provider evaluates: an optional dense layer (weights,
// out × in, and a bias) followed by an optional activation.
type Stage struct {
	Name       string      `json:"name"`
	Dense      *Dense      `json:"dense,omitempty"`
	Activation *Activation `json:"activation,omitempty"`
}

// Dense is y = W x + b.
type Dense struct {
	Weights [][]float64 `json:"weights"`
	Bias    []float64   `json:"bias,omitempty"`
}

// Activation kinds.
const (
	ActPolynomial = "polynomial" // Coeffs in the monomial basis: c0 + c1 x + c2 x² + …
	ActChebyshev  = "chebyshev"  // Coeffs of a Chebyshev approximation of Function over Interval
)

// Activation is a polynomial applied to every value. Coefficients are
// exact decimal constants: every replica parses the same numbers, and a
// Chebyshev activation's coefficients are checked against its named
// function when the model loads.
type Activation struct {
	Kind     string     `json:"kind"`
	Coeffs   []string   `json:"coeffs"`
	Function string     `json:"function,omitempty"`
	Interval [2]float64 `json:"interval,omitempty"`
}

// coeffPrec is the precision of activation coefficients and of the
// Chebyshev approximation.
const coeffPrec = 128

// maxWeight bounds weights and coefficients: CKKS values must stay far
// below the scale's headroom.
const maxWeight = 1 << 20

// Functions Chebyshev activations may approximate, in exact big-float
// arithmetic.
var functions = map[string]func(x *big.Float) *big.Float{
	"sigmoid": func(x *big.Float) *big.Float {
		e := bignum.Exp(new(big.Float).Neg(x))
		one := new(big.Float).SetPrec(x.Prec()).SetInt64(1)
		return new(big.Float).Quo(one, e.Add(e, one))
	},
	"tanh": func(x *big.Float) *big.Float { return bignum.TanH(x) },
	"softplus": func(x *big.Float) *big.Float {
		e := bignum.Exp(x)
		return bignum.Log(e.Add(e, new(big.Float).SetPrec(x.Prec()).SetInt64(1)))
	},
}

// FunctionNames lists the functions a Chebyshev activation may name.
func FunctionNames() []string { return []string{"sigmoid", "softplus", "tanh"} }

// Chebyshev returns the activation approximating the named function over
// [a, b] with a polynomial of the given degree.
func Chebyshev(function string, a, b float64, degree int) (*Activation, error) {
	coeffs, err := chebyshevCoeffs(function, a, b, degree)
	if err != nil {
		return nil, err
	}
	return &Activation{Kind: ActChebyshev, Function: function, Interval: [2]float64{a, b}, Coeffs: coeffs}, nil
}

func chebyshevCoeffs(function string, a, b float64, degree int) ([]string, error) {
	f, ok := functions[function]
	switch {
	case !ok:
		return nil, fmt.Errorf("he: unknown function %q for a Chebyshev activation: use one of %v", function, FunctionNames())
	case !(a < b) || math.IsInf(a, 0) || math.IsInf(b, 0) || math.Abs(a) > maxWeight || math.Abs(b) > maxWeight:
		return nil, fmt.Errorf("he: Chebyshev interval [%v, %v] must be finite with a < b", a, b)
	case degree < 1 || degree > 63:
		return nil, fmt.Errorf("he: Chebyshev degree %d: use 1 to 63", degree)
	}
	iv := bignum.Interval{Nodes: degree + 1, A: *bignum.NewFloat(a, coeffPrec), B: *bignum.NewFloat(b, coeffPrec)}
	pol := bignum.ChebyshevApproximation(f, iv)
	out := make([]string, degree+1)
	for i := range out {
		out[i] = pol.Coeffs[i][0].Text('g', -1)
	}
	return out, nil
}

// Degree is the activation's polynomial degree.
func (a *Activation) Degree() int { return len(a.Coeffs) - 1 }

// coefficients parses the exact constants.
func (a *Activation) coefficients() ([]*big.Float, error) {
	out := make([]*big.Float, len(a.Coeffs))
	limit := new(big.Float).SetFloat64(maxWeight)
	for i, s := range a.Coeffs {
		f, ok := new(big.Float).SetPrec(coeffPrec).SetString(s)
		if !ok {
			return nil, fmt.Errorf("coefficient %d (%q) is not a decimal number", i, s)
		}
		if new(big.Float).Abs(f).Cmp(limit) > 0 {
			return nil, fmt.Errorf("coefficient %d (%s) is larger than %d in magnitude", i, s, maxWeight)
		}
		out[i] = f
	}
	return out, nil
}

// depth is the number of levels the activation consumes (lattigo's
// polynomial evaluator: bits.Len(degree) rescalings).
func (a *Activation) depth() int { return bits.Len(uint(a.Degree())) }

// Depth is the number of levels the stage consumes: one for a dense layer
// (the plaintext product is rescaled), bits.Len(degree) for an activation,
// and one more for a Chebyshev activation that has no dense layer to fold
// its change of interval into.
func (s *Stage) Depth() int {
	d := 0
	if s.Dense != nil {
		d++
	}
	if s.Activation != nil {
		d += s.Activation.depth()
		if s.Activation.Kind == ActChebyshev && s.Dense == nil {
			d++
		}
	}
	return d
}

// Outputs is the number of values the stage produces, given its input
// width.
func (s *Stage) Outputs(in int) int {
	if s.Dense != nil {
		return len(s.Dense.Weights)
	}
	return in
}

// Outputs is the width of the model's result.
func (m *Model) Outputs() int {
	n := m.Inputs
	for i := range m.Stages {
		n = m.Stages[i].Outputs(n)
	}
	return n
}

// InputLevel is the level of the ciphertext stage s receives.
func (m *Model) InputLevel(p *Params, s int) int {
	lvl := p.MaxLevel()
	for i := 0; i < s; i++ {
		lvl -= m.Stages[i].Depth()
	}
	return lvl
}

// Marshal encodes the model as its canonical file (indented JSON; floats
// in Go's shortest round-trip form, so a parsed model re-encodes to the
// same bytes).
func (m *Model) Marshal() ([]byte, error) {
	bz, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return nil, err
	}
	return append(bz, '\n'), nil
}

// Hash is the model's content hash: sha256 of its canonical file.
func (m *Model) Hash() ([32]byte, error) {
	bz, err := m.Marshal()
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(bz), nil
}

// ParseModel decodes and validates a model file.
func ParseModel(data []byte) (*Model, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Model
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("he: model file is not a pipeline model: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("he: model file has data after the model: a model file holds one JSON object")
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// LoadModel reads and validates a model file.
func LoadModel(path string) (*Model, error) {
	bz, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m, err := ParseModel(bz)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// DepthError says which stage runs out of levels.
type DepthError struct {
	Preset       string
	Available    int
	Stage        int
	StageName    string
	Needed, Left int
}

func (e *DepthError) Error() string {
	return fmt.Sprintf("he: the model is too deep for preset %s (depth %d): stage %d (%s) needs %d levels but only %d are left; use a preset with more levels, fewer stages, or lower activation degrees",
		e.Preset, e.Available, e.Stage, e.StageName, e.Needed, e.Left)
}

// Validate checks the model's shape, numbers and that it fits its preset's
// depth, naming the first stage that overflows.
func (m *Model) Validate() error {
	if m.Format != ModelFormat {
		return fmt.Errorf("he: model format %q: this build reads %q", m.Format, ModelFormat)
	}
	p, err := cachedParams(m.Preset)
	if err != nil {
		return err
	}
	if err := checkLogSlots(p, m.LogSlots); err != nil {
		return err
	}
	width := 1 << m.LogSlots
	if m.Inputs < 1 || m.Inputs > width {
		return fmt.Errorf("he: model takes %d inputs, its vectors hold 1 to %d", m.Inputs, width)
	}
	if len(m.Stages) == 0 || len(m.Stages) > 64 {
		return fmt.Errorf("he: model has %d stages: want 1 to 64", len(m.Stages))
	}
	in := m.Inputs
	left := p.MaxLevel()
	for i := range m.Stages {
		s := &m.Stages[i]
		if err := s.validate(in, width); err != nil {
			return fmt.Errorf("he: stage %d (%s): %w", i, s.Name, err)
		}
		if d := s.Depth(); d > left {
			return &DepthError{Preset: p.Name, Available: p.MaxLevel(), Stage: i, StageName: s.Name, Needed: d, Left: left}
		}
		left -= s.Depth()
		in = s.Outputs(in)
	}
	if len(m.Labels) > 0 && len(m.Labels) != in {
		return fmt.Errorf("he: model has %d labels for %d outputs", len(m.Labels), in)
	}
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && math.Abs(v) <= maxWeight }

func (s *Stage) validate(in, width int) error {
	if s.Dense == nil && s.Activation == nil {
		return fmt.Errorf("empty stage: give it a dense layer, an activation or both")
	}
	if d := s.Dense; d != nil {
		out := len(d.Weights)
		if out < 1 || out > width {
			return fmt.Errorf("dense layer has %d outputs, vectors hold 1 to %d", out, width)
		}
		for r, row := range d.Weights {
			if len(row) != in {
				return fmt.Errorf("weight row %d has %d columns, the stage's input has %d values", r, len(row), in)
			}
			for c, w := range row {
				if !finite(w) {
					return fmt.Errorf("weight [%d][%d] = %v is not a finite number below %d", r, c, w, maxWeight)
				}
			}
		}
		if len(d.Bias) != 0 && len(d.Bias) != out {
			return fmt.Errorf("bias has %d values for %d outputs", len(d.Bias), out)
		}
		for r, b := range d.Bias {
			if !finite(b) {
				return fmt.Errorf("bias [%d] = %v is not a finite number below %d", r, b, maxWeight)
			}
		}
	}
	if a := s.Activation; a != nil {
		if len(a.Coeffs) < 2 || len(a.Coeffs) > 64 {
			return fmt.Errorf("activation has %d coefficients: want degree 1 to 63", len(a.Coeffs))
		}
		if _, err := a.coefficients(); err != nil {
			return fmt.Errorf("activation %w", err)
		}
		switch a.Kind {
		case ActPolynomial:
			if a.Function != "" || a.Interval != [2]float64{} {
				return fmt.Errorf("a polynomial activation takes no function or interval (that is a chebyshev activation)")
			}
		case ActChebyshev:
			want, err := chebyshevCoeffs(a.Function, a.Interval[0], a.Interval[1], a.Degree())
			if err != nil {
				return err
			}
			for i := range want {
				if want[i] != a.Coeffs[i] {
					return fmt.Errorf("chebyshev coefficient %d is %s, the approximation of %s over [%v, %v] gives %s: regenerate the activation",
						i, a.Coeffs[i], a.Function, a.Interval[0], a.Interval[1], want[i])
				}
			}
		default:
			return fmt.Errorf("activation kind %q: use %q or %q", a.Kind, ActPolynomial, ActChebyshev)
		}
	}
	return nil
}
