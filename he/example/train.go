package example

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/ogpu-network/ogpu/he"
)

// ModelName is the name of the models Train makes.
const ModelName = "ogpu-example-classifier"

// DefaultActivation is the activation of the hidden stages: the degree-2
// polynomial x/2 + x²/8. Squares let one hidden stage form the products
// and squared radii the classes are defined by, its coefficients are
// exact in binary, and it costs two levels, as a degree-3 Chebyshev
// approximation would.
func DefaultActivation() *he.Activation {
	return &he.Activation{Kind: he.ActPolynomial, Coeffs: []string{"0", "0.5", "0.125"}}
}

// Options configure Train. Zero values take the documented defaults.
type Options struct {
	// Seed draws the data, the initial weights and the batch order.
	Seed uint64
	// Train and Test are the sizes of the two halves of the data set
	// (default 2000 and 500); the test half is drawn after the training
	// half from the same stream.
	Train, Test int
	// Preset is the CKKS preset of the model (default N14).
	Preset string
	// LogSlots is log2 of the model's vector width (default 3: 8 values).
	LogSlots int
	// Hidden is the number of hidden stages (dense 8→8 and the
	// activation); default: as many as the preset's depth affords with
	// the output stage, 2 on N14 and 1 on N13.
	Hidden int
	// Activation of the hidden stages (default DefaultActivation). A
	// Chebyshev activation bounds the pre-activations to its interval.
	Activation *he.Activation
	// Bound is how far hidden pre-activations may go before training
	// penalises them: a polynomial is only a good activation on a bounded
	// range, and CKKS values must stay well below the scale's headroom.
	// The bound is soft (Report.MaxPreActivation says how far the trained
	// model goes). Default 4 for a polynomial, the interval of a
	// Chebyshev activation.
	Bound float64
	// Restarts is how many initialisations are trained (default 3); the
	// one with the lowest training loss is kept.
	Restarts int
	// Epochs (default 100), BatchSize (default 32) and LearningRate (Adam,
	// default 0.02, decayed linearly to a tenth over the epochs).
	Epochs       int
	BatchSize    int
	LearningRate float64
}

func (o *Options) defaults() error {
	if o.Train == 0 {
		o.Train = 2000
	}
	if o.Test == 0 {
		o.Test = 500
	}
	if o.Preset == "" {
		o.Preset = "N14"
	}
	if o.LogSlots == 0 {
		o.LogSlots = 3
	}
	if o.Activation == nil {
		o.Activation = DefaultActivation()
	}
	if o.Bound == 0 {
		o.Bound = 4
		if o.Activation.Kind == he.ActChebyshev {
			o.Bound = min(-o.Activation.Interval[0], o.Activation.Interval[1])
		}
	}
	if o.Restarts == 0 {
		o.Restarts = 3
	}
	if o.Epochs == 0 {
		o.Epochs = 100
	}
	if o.BatchSize == 0 {
		o.BatchSize = 32
	}
	if o.LearningRate == 0 {
		o.LearningRate = 0.02
	}
	p, err := he.NewParams(o.Preset)
	if err != nil {
		return err
	}
	stage := he.Stage{Dense: &he.Dense{}, Activation: o.Activation}
	if o.Hidden == 0 {
		o.Hidden = (p.Depth() - 1) / stage.Depth()
	}
	switch {
	case o.Train < 1 || o.Test < 1:
		return fmt.Errorf("example: %d training and %d test examples: want at least 1 of each", o.Train, o.Test)
	case 1<<o.LogSlots < Features:
		return fmt.Errorf("example: vectors of 2^%d values cannot hold %d features: use log slots 3 or more", o.LogSlots, Features)
	case o.Hidden < 0:
		return fmt.Errorf("example: %d hidden stages", o.Hidden)
	case !(o.Bound > 0) || math.IsInf(o.Bound, 0):
		return fmt.Errorf("example: pre-activation bound %v must be positive and finite", o.Bound)
	case o.Epochs < 1 || o.BatchSize < 1 || o.Restarts < 1:
		return fmt.Errorf("example: %d restarts of %d epochs of batches of %d: want at least 1 of each", o.Restarts, o.Epochs, o.BatchSize)
	case !(o.LearningRate > 0) || math.IsInf(o.LearningRate, 0):
		return fmt.Errorf("example: learning rate %v must be positive and finite", o.LearningRate)
	}
	return nil
}

// Report is what Train measured.
type Report struct {
	// TrainAccuracy and TestAccuracy are the trained model's plaintext
	// accuracy (Accuracy, through he.Model.Forward).
	TrainAccuracy, TestAccuracy float64
	// LinearBaseline is the test accuracy of a softmax regression trained
	// the same way on the same data: what no hidden stage achieves.
	LinearBaseline float64
	// MaxPreActivation is the largest |pre-activation| of a hidden stage
	// over the training and test sets, against Bound.
	MaxPreActivation, Bound float64
	// Loss is the mean cross-entropy on the training set after training.
	Loss float64
	// Options as defaulted.
	Options Options
	// Train and Test are the data sets.
	Train, Test Dataset
}

// Train generates the data set of opts.Seed and trains the classifier on
// it with Adam in float64, in one goroutine: the same options give the
// same model bytes on one machine. The model has opts.Hidden stages of a
// dense 8→8 layer and the activation, then a dense 8→4 stage; it is
// validated against its preset's depth.
func Train(opts Options) (*he.Model, *Report, error) {
	if err := opts.defaults(); err != nil {
		return nil, nil, err
	}
	a, err := prepare(opts.Activation)
	if err != nil {
		return nil, nil, err
	}
	data := Generate(opts.Seed, opts.Train+opts.Test)
	train, test, err := data.Split(opts.Train)
	if err != nil {
		return nil, nil, err
	}
	sizes := []int{Features}
	for range opts.Hidden {
		sizes = append(sizes, Features)
	}
	sizes = append(sizes, Classes)
	// The model's shape, activation and depth are checked before training.
	skeleton := newNet(rand.New(rand.NewPCG(0, 0)), sizes, a)
	if err := skeleton.model(ModelName, &opts).Validate(); err != nil {
		return nil, nil, err
	}
	r := rand.New(rand.NewPCG(opts.Seed, 0x747261696e)) // "train"
	var n *net
	loss := math.Inf(1)
	for range opts.Restarts {
		c := newNet(r, sizes, a)
		if l := c.fit(r, train, &opts); l < loss || n == nil {
			n, loss = c, l
		}
	}
	m := n.model(ModelName, &opts)
	if err := m.Validate(); err != nil {
		return nil, nil, err
	}

	lin := newNet(r, []int{Features, Classes}, a)
	lin.fit(r, train, &opts)
	linModel := lin.model(ModelName+"-linear", &opts)

	rep := &Report{Loss: loss, Options: opts, Bound: opts.Bound, Train: train, Test: test}
	if rep.TrainAccuracy, err = Accuracy(m, train); err != nil {
		return nil, nil, err
	}
	if rep.TestAccuracy, err = Accuracy(m, test); err != nil {
		return nil, nil, err
	}
	if rep.LinearBaseline, err = Accuracy(linModel, test); err != nil {
		return nil, nil, err
	}
	for _, d := range []Dataset{train, test} {
		for _, x := range d.X {
			rep.MaxPreActivation = max(rep.MaxPreActivation, n.maxPreActivation(x))
		}
	}
	return m, rep, nil
}

// Accuracy is the fraction of d that m classifies right in plaintext
// (he.Model.Forward, then the index of the largest output).
func Accuracy(m *he.Model, d Dataset) (float64, error) {
	if d.Len() == 0 {
		return 0, fmt.Errorf("example: no examples to measure accuracy on")
	}
	right := 0
	for i, x := range d.X {
		y, err := m.Forward(x)
		if err != nil {
			return 0, fmt.Errorf("example: example %d: %w", i, err)
		}
		if Argmax(y) == d.Y[i] {
			right++
		}
	}
	return float64(right) / float64(d.Len()), nil
}

// Argmax is the index of the largest value (the first of equals).
func Argmax(v []float64) int {
	best := 0
	for i := range v {
		if v[i] > v[best] {
			best = i
		}
	}
	return best
}

// MaxAbsDiff is the largest |a[i] - b[i]| (a and b of the same length):
// how far a decrypted output is from the plaintext one.
func MaxAbsDiff(a, b []float64) float64 {
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(a[i]-b[i]))
	}
	return d
}

// FormatVector prints a model's output with 4 decimals, as the CLI and
// the devnet show it: "[0.1250 -2.0000]".
func FormatVector(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.4f", x)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// net is the network being trained: layers of y = W x + b, each but the
// last followed by the activation.
type net struct {
	layers []*layer
	act    *act
}

type layer struct {
	w   [][]float64 // out × in
	b   []float64
	act bool
	// Adam state and the batch gradient, flattened as w row by row, then b.
	grad, m, v []float64
}

func (l *layer) params() int { return len(l.w)*len(l.w[0]) + len(l.b) }

func newNet(r *rand.Rand, sizes []int, a *act) *net {
	n := &net{act: a}
	for i := 0; i+1 < len(sizes); i++ {
		in, out := sizes[i], sizes[i+1]
		l := &layer{w: make([][]float64, out), b: make([]float64, out), act: i+2 < len(sizes)}
		s := 0.5 * math.Sqrt(3.0/float64(in)) // uniform, standard deviation 1/(2√in)
		for o := range l.w {
			l.w[o] = make([]float64, in)
			for j := range l.w[o] {
				l.w[o][j] = s * (2*r.Float64() - 1)
			}
		}
		k := l.params()
		l.grad, l.m, l.v = make([]float64, k), make([]float64, k), make([]float64, k)
		n.layers = append(n.layers, l)
	}
	return n
}

// forward computes every layer's pre-activation z and output a the way
// he.Stage.Forward does (the same sums in the same order).
func (n *net) forward(x []float64, zs, as [][]float64) {
	in := x
	for li, l := range n.layers {
		z, a := zs[li], as[li]
		for o, row := range l.w {
			sum := 0.0
			for j, w := range row {
				sum += w * in[j]
			}
			sum += l.b[o]
			z[o] = sum
			if l.act {
				a[o] = n.act.eval(sum)
			} else {
				a[o] = sum
			}
		}
		in = a
	}
}

func (n *net) buffers() (zs, as, ds [][]float64) {
	for _, l := range n.layers {
		zs = append(zs, make([]float64, len(l.w)))
		as = append(as, make([]float64, len(l.w)))
		ds = append(ds, make([]float64, len(l.w)))
	}
	return
}

func (n *net) maxPreActivation(x []float64) float64 {
	zs, as, _ := n.buffers()
	n.forward(x, zs, as)
	m := 0.0
	for li, l := range n.layers {
		if l.act {
			for _, z := range zs[li] {
				m = max(m, math.Abs(z))
			}
		}
	}
	return m
}

// penalty weighs the squared excess of a hidden pre-activation over the
// bound in the loss.
const penalty = 10

// fit runs Adam over the epochs, minimising the mean cross-entropy plus
// penalty·(|z| - bound)² for every hidden pre-activation z beyond the
// bound, and returns the final mean cross-entropy on d.
func (n *net) fit(r *rand.Rand, d Dataset, o *Options) float64 {
	const beta1, beta2, eps = 0.9, 0.999, 1e-8
	zs, as, ds := n.buffers()
	order := make([]int, d.Len())
	for i := range order {
		order[i] = i
	}
	step := 0
	for epoch := range o.Epochs {
		lr := o.LearningRate * (1 - 0.9*float64(epoch)/float64(o.Epochs))
		r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for start := 0; start < len(order); start += o.BatchSize {
			batch := order[start:min(start+o.BatchSize, len(order))]
			for _, l := range n.layers {
				clear(l.grad)
			}
			for _, i := range batch {
				n.backward(d.X[i], d.Y[i], o.Bound, zs, as, ds)
			}
			step++
			c1 := 1 - math.Pow(beta1, float64(step))
			c2 := 1 - math.Pow(beta2, float64(step))
			scale := 1 / float64(len(batch))
			for _, l := range n.layers {
				k := 0
				update := func(p *float64) {
					g := l.grad[k] * scale
					l.m[k] = beta1*l.m[k] + (1-beta1)*g
					l.v[k] = beta2*l.v[k] + (1-beta2)*g*g
					*p -= lr * (l.m[k] / c1) / (math.Sqrt(l.v[k]/c2) + eps)
					k++
				}
				for i := range l.w {
					for j := range l.w[i] {
						update(&l.w[i][j])
					}
				}
				for i := range l.b {
					update(&l.b[i])
				}
			}
		}
	}
	loss := 0.0
	for i, x := range d.X {
		n.forward(x, zs, as)
		p := softmax(as[len(as)-1])
		loss -= math.Log(max(p[d.Y[i]], 1e-300))
	}
	return loss / float64(d.Len())
}

// backward adds the gradient of one example's loss to every layer's grad.
func (n *net) backward(x []float64, y int, bound float64, zs, as, ds [][]float64) {
	n.forward(x, zs, as)
	last := len(n.layers) - 1
	p := softmax(as[last])
	for o := range p {
		ds[last][o] = p[o]
	}
	ds[last][y]--
	for li := last; li >= 0; li-- {
		l := n.layers[li]
		in := x
		if li > 0 {
			in = as[li-1]
		}
		d := ds[li]
		k := 0
		for o, row := range l.w {
			for j := range row {
				l.grad[k] += d[o] * in[j]
				k++
			}
		}
		for o := range l.b {
			l.grad[k] += d[o]
			k++
		}
		if li == 0 {
			break
		}
		// Gradient at the previous layer's pre-activations.
		prev := n.layers[li-1]
		for j := range prev.w {
			g := 0.0
			for o, row := range l.w {
				g += d[o] * row[j]
			}
			z := zs[li-1][j]
			g *= n.act.deriv(z)
			if excess := math.Abs(z) - bound; excess > 0 {
				g += 2 * penalty * excess * math.Copysign(1, z)
			}
			ds[li-1][j] = g
		}
	}
}

func softmax(z []float64) []float64 {
	m := z[0]
	for _, v := range z {
		m = max(m, v)
	}
	p := make([]float64, len(z))
	sum := 0.0
	for i, v := range z {
		p[i] = math.Exp(v - m)
		sum += p[i]
	}
	for i := range p {
		p[i] /= sum
	}
	return p
}

// model writes the network as a pipeline model: one stage per layer.
func (n *net) model(name string, o *Options) *he.Model {
	m := &he.Model{Format: he.ModelFormat, Name: name, Preset: o.Preset, LogSlots: o.LogSlots, Inputs: Features,
		Labels: append([]string(nil), Labels...)}
	for i, l := range n.layers {
		s := he.Stage{Name: fmt.Sprintf("hidden%d", i+1), Dense: &he.Dense{Weights: l.w, Bias: l.b}}
		if l.act {
			s.Activation = o.Activation
		} else {
			s.Name = "output"
		}
		m.Stages = append(m.Stages, s)
	}
	return m
}
