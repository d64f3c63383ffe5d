// Package he is the CKKS layer of encrypted pipeline jobs, on lattigo v5:
// parameter presets, client keys, encryption, the stages of a pipeline
// model evaluated on ciphertexts, and a versioned wire format for all of it.
//
// Determinism is the contract that lets validators check providers: the
// same input ciphertext, evaluation keys and model give the same output
// bytes on every run, process, GOMAXPROCS value and 64-bit architecture.
// CKKS evaluation is integer arithmetic modulo the ciphertext primes; the
// only floating point a provider does is encoding its plaintexts (weights
// and biases), which this package does with the 64-bit-precision encoder
// (big-float arithmetic, no fused multiply-add), and activation
// coefficients travel as exact decimal constants. 32-bit builds are refused.
package he

import (
	"crypto/sha256"
	"fmt"
	"math/bits"
	"sort"
	"strings"
	"sync"

	"github.com/tuneinsight/lattigo/v5/he/hefloat"
)

// Preset is a named CKKS parameter set. The literal is the whole
// definition: the primes are derived from it deterministically, and its
// digest travels in every serialized object so that a preset redefined
// later cannot be mixed with an old one.
type Preset struct {
	Name    string
	Literal hefloat.ParametersLiteral
	// About says what it is for.
	About string
}

// Presets: both keep log2(QP) at the 128-bit-security bound of the
// HomomorphicEncryption.org standard for their ring degree (218 bits at
// 2^13, 438 at 2^14). The special modulus P takes two or three primes so
// that key switching decomposes Q into few digits: every rotation key is
// 2 × digits × (Q + P primes) × N words, so fewer digits means smaller
// keys (measured in docs/benchmarks.md). The first prime sets the range
// of a model's outputs when they arrive at level 0: |value| · scale must
// stay below q0/2, so ±2^(36-30-1) = ±32 on N13 and ±2^(45-35-1) = ±512 on
// N14; beyond that the result wraps around silently. (N13's first prime
// was 33 bits at first: ±4 was too tight for a classifier's logits.)
var presets = []Preset{
	{
		Name: "N13",
		Literal: hefloat.ParametersLiteral{
			LogN:            13,
			LogQ:            []int{36, 30, 30, 30, 30},
			LogP:            []int{31, 31},
			LogDefaultScale: 30,
		},
		About: "ring 2^13, depth 4, scale 2^30, outputs within ±32: a dense+activation stage and a dense stage; small keys",
	},
	{
		Name: "N14",
		Literal: hefloat.ParametersLiteral{
			LogN:            14,
			LogQ:            []int{45, 35, 35, 35, 35, 35, 35, 35},
			LogP:            []int{49, 49, 50},
			LogDefaultScale: 35,
		},
		About: "ring 2^14, depth 7, scale 2^35, outputs within ±512: two dense+activation stages and a dense stage",
	},
}

// PresetNames lists the presets.
func PresetNames() []string {
	out := make([]string, len(presets))
	for i, p := range presets {
		out[i] = p.Name
	}
	sort.Strings(out)
	return out
}

// Params is a validated preset.
type Params struct {
	Name string
	hefloat.Parameters
	// Digest is sha256 of the marshalled parameters (primes included).
	Digest [32]byte
}

// Depth is the number of rescalings a fresh ciphertext affords.
func (p *Params) Depth() int { return p.MaxLevel() }

// String names the preset with its shape.
func (p *Params) String() string {
	return fmt.Sprintf("%s (LogN %d, depth %d, log2 QP %.0f)", p.Name, p.LogN(), p.Depth(), p.LogQP())
}

// heRequires64BitBuild does not compile where uint is narrower than 64 bits
// (the constant would be negative): the compile-time form of ErrNot64Bit for
// any 32-bit GOARCH, beside wordsize32.go's message for the common ones.
const heRequires64BitBuild uint = bits.UintSize - 64

// ErrNot64Bit: lattigo's arithmetic is not deterministic on 32-bit builds.
// Such builds do not compile (wordsize32.go, heRequires64BitBuild); the
// runtime check in NewParams stays as a second guard.
var ErrNot64Bit = fmt.Errorf("he: this is a %d-bit build; CKKS evaluation is only deterministic on 64-bit builds: build for amd64 or arm64", bits.UintSize)

// NewParams validates the named preset.
func NewParams(name string) (*Params, error) {
	if bits.UintSize != 64 {
		return nil, ErrNot64Bit
	}
	for _, p := range presets {
		if p.Name == name {
			params, err := hefloat.NewParametersFromLiteral(p.Literal)
			if err != nil {
				return nil, fmt.Errorf("he: preset %s: %w", name, err)
			}
			bz, err := params.MarshalBinary()
			if err != nil {
				return nil, fmt.Errorf("he: preset %s: %w", name, err)
			}
			return &Params{Name: name, Parameters: params, Digest: sha256.Sum256(bz)}, nil
		}
	}
	return nil, fmt.Errorf("he: unknown parameter preset %q: use one of %s", name, strings.Join(PresetNames(), ", "))
}

var paramsCache sync.Map // name -> *Params

// cachedParams is NewParams, once per preset per process.
func cachedParams(name string) (*Params, error) {
	if p, ok := paramsCache.Load(name); ok {
		return p.(*Params), nil
	}
	p, err := NewParams(name)
	if err != nil {
		return nil, err
	}
	paramsCache.Store(name, p)
	return p, nil
}
