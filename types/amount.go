package types

import (
	"fmt"
	"math/big"
	"strings"

	"github.com/holiman/uint256"
)

// Decimals is the number of decimal places of one oGPU: amounts on chain are
// integers in the smallest unit, 10^-18 oGPU.
const Decimals = 18

// Denom is the display name of the token in amounts such as "12.5ogpu".
const Denom = "ogpu"

// OneOGPU is 10^18 base units.
var OneOGPU = new(uint256.Int).Exp(uint256.NewInt(10), uint256.NewInt(Decimals))

// MaxSupply is the fixed cap of 21,000,000 oGPU across both chains.
var MaxSupply = new(uint256.Int).Mul(uint256.NewInt(21_000_000), OneOGPU)

// OGPU returns n whole oGPU in base units.
func OGPU(n uint64) *uint256.Int {
	return new(uint256.Int).Mul(uint256.NewInt(n), OneOGPU)
}

// ParseAmount reads "12.5ogpu" (whole tokens, up to 18 decimals) or a plain
// integer in base units ("1000"). Case and surrounding spaces do not matter.
func ParseAmount(s string) (*uint256.Int, error) {
	in := strings.ToLower(strings.TrimSpace(s))
	if in == "" {
		return nil, fmt.Errorf("empty amount: write e.g. 12.5ogpu or an integer in base units")
	}
	if num, ok := strings.CutSuffix(in, Denom); ok {
		return parseDecimal(strings.TrimSpace(num), s)
	}
	v, ok := new(big.Int).SetString(in, 10)
	if !ok || v.Sign() < 0 || strings.ContainsAny(in, "+-") {
		return nil, fmt.Errorf("invalid amount %q: write e.g. 12.5ogpu or an integer in base units", s)
	}
	u, overflow := uint256.FromBig(v)
	if overflow {
		return nil, fmt.Errorf("invalid amount %q: larger than 2^256-1", s)
	}
	return u, nil
}

func parseDecimal(num, orig string) (*uint256.Int, error) {
	whole, frac, _ := strings.Cut(num, ".")
	if whole == "" && frac == "" {
		return nil, fmt.Errorf("invalid amount %q: no number before %q", orig, Denom)
	}
	if len(frac) > Decimals {
		return nil, fmt.Errorf("invalid amount %q: at most %d decimal places", orig, Decimals)
	}
	digits := whole + frac + strings.Repeat("0", Decimals-len(frac))
	for _, c := range digits {
		if c < '0' || c > '9' {
			return nil, fmt.Errorf("invalid amount %q: write e.g. 12.5ogpu", orig)
		}
	}
	v, _ := new(big.Int).SetString(digits, 10)
	u, overflow := uint256.FromBig(v)
	if overflow {
		return nil, fmt.Errorf("invalid amount %q: too large", orig)
	}
	return u, nil
}

// FormatAmount writes base units as whole oGPU without trailing zeros:
// "12.5ogpu", "0ogpu", "0.000000000000000001ogpu".
func FormatAmount(a *uint256.Int) string {
	if a == nil {
		return "0" + Denom
	}
	s := a.Dec()
	if len(s) <= Decimals {
		s = strings.Repeat("0", Decimals-len(s)+1) + s
	}
	whole, frac := s[:len(s)-Decimals], strings.TrimRight(s[len(s)-Decimals:], "0")
	if frac == "" {
		return whole + Denom
	}
	return whole + "." + frac + Denom
}
