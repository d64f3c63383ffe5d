package types

import (
	"math/big"
	"strings"
	"testing"

	"github.com/holiman/uint256"
)

func mustDec(t *testing.T, s string) *uint256.Int {
	t.Helper()
	v, err := uint256.FromDecimal(s)
	if err != nil {
		t.Fatalf("bad test constant %q: %v", s, err)
	}
	return v
}

func TestMaxSupply(t *testing.T) {
	want := new(big.Int).Mul(big.NewInt(21_000_000), new(big.Int).Exp(big.NewInt(10), big.NewInt(18), nil))
	if MaxSupply.ToBig().Cmp(want) != 0 {
		t.Fatalf("MaxSupply = %s, want %s", MaxSupply.Dec(), want)
	}
	if !OGPU(21_000_000).Eq(MaxSupply) {
		t.Fatalf("OGPU(21e6) = %s, want MaxSupply", OGPU(21_000_000).Dec())
	}
	if got := OneOGPU.Dec(); got != "1"+strings.Repeat("0", Decimals) {
		t.Fatalf("OneOGPU = %s", got)
	}
}

func TestParseAmount(t *testing.T) {
	maxU256 := new(uint256.Int).SetAllOne()
	cases := []struct {
		name string
		in   string
		want *uint256.Int
		// canon is FormatAmount(want); empty means "same as in".
		canon string
	}{
		{name: "decimal", in: "12.5ogpu", want: mustDec(t, "12500000000000000000")},
		{name: "smallest unit", in: "0.000000000000000001ogpu", want: uint256.NewInt(1)},
		{name: "18 decimals", in: "1.123456789012345678ogpu", want: mustDec(t, "1123456789012345678")},
		{name: "whole", in: "7ogpu", want: OGPU(7)},
		{name: "max supply", in: "21000000ogpu", want: MaxSupply},
		{name: "zero", in: "0ogpu", want: new(uint256.Int)},
		{name: "base units", in: "1000", want: uint256.NewInt(1000), canon: "0.000000000000001ogpu"},
		{name: "base units zero", in: "0", want: new(uint256.Int), canon: "0ogpu"},
		{name: "upper case", in: "12.5OGPU", want: mustDec(t, "12500000000000000000"), canon: "12.5ogpu"},
		{name: "mixed case", in: "12.5oGpU", want: mustDec(t, "12500000000000000000"), canon: "12.5ogpu"},
		{name: "surrounding spaces", in: "  12.5ogpu\t\n", want: mustDec(t, "12500000000000000000"), canon: "12.5ogpu"},
		{name: "space before denom", in: "12.5 ogpu", want: mustDec(t, "12500000000000000000"), canon: "12.5ogpu"},
		{name: "trailing zeros", in: "12.500ogpu", want: mustDec(t, "12500000000000000000"), canon: "12.5ogpu"},
		{name: "no whole part", in: ".5ogpu", want: mustDec(t, "500000000000000000"), canon: "0.5ogpu"},
		{name: "no fraction", in: "5.ogpu", want: OGPU(5), canon: "5ogpu"},
		{name: "leading zeros", in: "007ogpu", want: OGPU(7), canon: "7ogpu"},
		{name: "max uint256 base units", in: maxU256.Dec(), want: maxU256,
			canon: "115792089237316195423570985008687907853269984665640564039457.584007913129639935ogpu"},
		{name: "max uint256 ogpu", in: "115792089237316195423570985008687907853269984665640564039457.584007913129639935ogpu", want: maxU256},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseAmount(tc.in)
			if err != nil {
				t.Fatalf("ParseAmount(%q): %v", tc.in, err)
			}
			if !got.Eq(tc.want) {
				t.Fatalf("ParseAmount(%q) = %s, want %s", tc.in, got.Dec(), tc.want.Dec())
			}
			canon := tc.canon
			if canon == "" {
				canon = tc.in
			}
			s := FormatAmount(got)
			if s != canon {
				t.Fatalf("FormatAmount(%s) = %q, want %q", got.Dec(), s, canon)
			}
			// The canonical form parses back to the same value.
			again, err := ParseAmount(s)
			if err != nil || !again.Eq(got) {
				t.Fatalf("ParseAmount(FormatAmount(x)) = %v, %v; want %s", again, err, got.Dec())
			}
		})
	}
}

func TestParseAmountErrors(t *testing.T) {
	twoTo256 := new(big.Int).Lsh(big.NewInt(1), 256)
	cases := []struct {
		name string
		in   string
		want string // substring of the error
	}{
		{"empty", "", "empty amount"},
		{"only spaces", "   ", "empty amount"},
		{"denom only", "ogpu", "no number"},
		{"dot only", ".ogpu", "no number"},
		{"two dots", "1.2.3ogpu", "invalid amount"},
		{"too many decimals", "0.0000000000000000001ogpu", "at most 18 decimal places"},
		{"negative base units", "-1", "invalid amount"},
		{"negative ogpu", "-1ogpu", "invalid amount"},
		{"explicit plus", "+1", "invalid amount"},
		{"plus ogpu", "+1ogpu", "invalid amount"},
		{"letters", "abc", "invalid amount"},
		{"hex", "0x10", "invalid amount"},
		{"exponent", "1e18", "invalid amount"},
		{"underscore", "1_000", "invalid amount"},
		{"fraction without denom", "1.5", "invalid amount"},
		{"other denom", "5eth", "invalid amount"},
		{"space inside number", "1 2ogpu", "invalid amount"},
		{"non-ascii digits", "١٢ogpu", "invalid amount"},
		{"overflow base units", twoTo256.String(), "larger than 2^256-1"},
		{"overflow ogpu", "115792089237316195423570985008687907853269984665640564039458ogpu", "too large"},
		{"overflow ogpu with fraction", "115792089237316195423570985008687907853269984665640564039457.584007913129639936ogpu", "too large"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseAmount(tc.in)
			if err == nil {
				t.Fatalf("ParseAmount(%q) = %s, want an error", tc.in, got.Dec())
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseAmount(%q) error %q does not mention %q", tc.in, err, tc.want)
			}
		})
	}
}

func TestFormatAmount(t *testing.T) {
	cases := []struct {
		name string
		in   *uint256.Int
		want string
	}{
		{"nil", nil, "0ogpu"},
		{"zero", new(uint256.Int), "0ogpu"},
		{"one base unit", uint256.NewInt(1), "0.000000000000000001ogpu"},
		{"just below one", mustDec(t, "999999999999999999"), "0.999999999999999999ogpu"},
		{"one", OneOGPU, "1ogpu"},
		{"one and a bit", mustDec(t, "1000000000000000001"), "1.000000000000000001ogpu"},
		{"max supply", MaxSupply, "21000000ogpu"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := FormatAmount(tc.in); got != tc.want {
				t.Fatalf("FormatAmount = %q, want %q", got, tc.want)
			}
		})
	}
}
