// Package example is the small classifier of the encrypted-pipeline demo:
// a synthetic data set generated from a seed, a network trained in Go on it
// whose every stage the he package can evaluate on ciphertexts, and the
// plaintext and encrypted accuracy of the trained model side by side.
package example

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Features is the width of an example, Classes the number of labels.
const (
	Features = 8
	Classes  = 4
)

// Labels name the classes: whether x0 and x1 have the same sign ("even"
// quadrants) or not ("odd"), and whether (x2, x3, x4) lies inside the
// ball of radius about 0.985 ("inner") or in the shell around it ("outer").
var Labels = []string{"odd-outer", "odd-inner", "even-outer", "even-inner"}

// innerRadius2 is the squared radius that splits [-1, 1]^3 into halves
// of equal volume: (4/3)πr³ = 4 gives r³ = 3/π.
var innerRadius2 = math.Pow(3/math.Pi, 2.0/3)

// jitter is the standard deviation of the noise added to the informative
// features after labelling, which blurs the class boundaries.
const jitter = 0.03

// Dataset is a set of labelled examples; X[i] has Features values in
// [-1, 1] and Y[i] is its class in [0, Classes).
type Dataset struct {
	X [][]float64 `json:"x"`
	Y []int       `json:"y"`
}

// Len is the number of examples.
func (d Dataset) Len() int { return len(d.Y) }

// Generate draws n examples from seed (math/rand/v2 PCG): the same seed
// gives the same data on every machine. Every feature is uniform in
// [-1, 1]; the class is 2·[x0·x1 > 0] + [x2² + x3² + x4² < r²], an XOR of
// quadrants and a ball inside a shell, which no linear model separates;
// features 5 to 7 carry no information. The informative features get a
// little Gaussian noise after labelling (clamped to [-1, 1]).
func Generate(seed uint64, n int) Dataset {
	r := rand.New(rand.NewPCG(seed, 0x6f677075)) // "ogpu"
	d := Dataset{X: make([][]float64, n), Y: make([]int, n)}
	for i := range n {
		x := make([]float64, Features)
		for j := range x {
			x[j] = 2*r.Float64() - 1
		}
		y := 0
		if x[0]*x[1] > 0 {
			y += 2
		}
		if x[2]*x[2]+x[3]*x[3]+x[4]*x[4] < innerRadius2 {
			y++
		}
		for j := 0; j < 5; j++ {
			x[j] = max(-1, min(1, x[j]+jitter*r.NormFloat64()))
		}
		d.X[i], d.Y[i] = x, y
	}
	return d
}

// Split returns the first n examples and the rest.
func (d Dataset) Split(n int) (first, rest Dataset, err error) {
	if n < 0 || n > d.Len() {
		return Dataset{}, Dataset{}, fmt.Errorf("example: cannot split %d examples at %d", d.Len(), n)
	}
	return Dataset{X: d.X[:n], Y: d.Y[:n]}, Dataset{X: d.X[n:], Y: d.Y[n:]}, nil
}

// Validate checks the shape and values of a data set read from a file.
func (d Dataset) Validate() error {
	if len(d.X) != len(d.Y) {
		return fmt.Errorf("example: %d feature rows for %d labels", len(d.X), len(d.Y))
	}
	for i, x := range d.X {
		if len(x) != Features {
			return fmt.Errorf("example: row %d has %d features, want %d", i, len(x), Features)
		}
		for j, v := range x {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("example: row %d feature %d is %v", i, j, v)
			}
		}
		if d.Y[i] < 0 || d.Y[i] >= Classes {
			return fmt.Errorf("example: row %d has class %d, want 0 to %d", i, d.Y[i], Classes-1)
		}
	}
	return nil
}
