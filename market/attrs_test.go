package market

import (
	"strings"
	"testing"
)

func TestParseQuantity(t *testing.T) {
	cases := []struct {
		in   string
		want uint64
		err  string
	}{
		{in: "0", want: 0},
		{in: "64", want: 64},
		{in: "3K", want: 3_000},
		{in: "3M", want: 3_000_000},
		{in: "3G", want: 3_000_000_000},
		{in: "2T", want: 2_000_000_000_000},
		{in: "1Ki", want: 1 << 10},
		{in: "32Gi", want: 32 << 30},
		{in: "80Gi", want: 80 << 30},
		{in: "4Mi", want: 4 << 20},
		{in: "1Ti", want: 1 << 40},
		{in: "18446744073709551615", want: ^uint64(0)},
		{in: "16777215Ti", want: 16777215 << 40}, // the largest count of Ti that fits
		{in: "16777216Ti", err: "overflows"},
		{in: "18446744073709552K", err: "overflows"},
		{in: "18446744073709551616", err: "want digits"}, // 2^64
		{in: "", err: "want digits"},
		{in: "Gi", err: "want digits"},
		{in: "+5", err: "want digits"},
		{in: "-5", err: "want digits"},
		{in: "1.5Gi", err: "want digits"},
		{in: "32gi", err: "want digits"}, // suffixes are case-sensitive
		{in: "32GiB", err: "want digits"},
		{in: " 32", err: "want digits"},
		{in: "0x10", err: "want digits"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseQuantity(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseQuantity(%q) = %d, %v; want an error saying %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseQuantity(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestParseRequirement(t *testing.T) {
	cases := []struct {
		in      string
		prefix  []string
		atLeast uint64
		hasQ    bool
		err     string
	}{
		{in: "gpu/vendor/nvidia", prefix: []string{"gpu", "vendor", "nvidia"}},
		{in: "gpu/vendor/*/model/h100", prefix: []string{"gpu", "vendor", "*", "model", "h100"}},
		{in: "ram>=32Gi", prefix: []string{"ram"}, hasQ: true, atLeast: 32 << 30},
		{in: "gpu/*/*/*/*/ram>=40Gi", prefix: []string{"gpu", "*", "*", "*", "*", "ram"}, hasQ: true, atLeast: 40 << 30},
		{in: "cpu/cores>=0", prefix: []string{"cpu", "cores"}, hasQ: true},
		{in: "*", prefix: []string{"*"}},
		{in: "", err: "want 1..128 characters"},
		{in: strings.Repeat("a", 129), err: "want 1..128 characters"},
		{in: strings.Repeat("a/", 16) + "a", err: "more than 16 segments"},
		{in: "gpu//nvidia", err: `segment ""`},
		{in: "/gpu", err: `segment ""`},
		{in: "gpu/", err: `segment ""`},
		{in: "gpu/nv idia", err: `segment "nv idia"`},
		{in: "gpu/**", err: `segment "**"`},
		{in: "gpu/nv*", err: `segment "nv*"`},
		{in: ">=32Gi", err: `segment ""`},
		{in: "ram>=", err: "want digits"},
		{in: "ram>=lots", err: "want digits"},
		{in: "ram>=32Gi>=1", err: "want digits"},
		{in: "ram>=99999999999Ti", err: "overflows"},
		{in: "ram<=32Gi", err: `segment "ram<=32Gi"`},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			req, err := ParseRequirement(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseRequirement(%q) = %+v, %v; want an error saying %q", tc.in, req, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseRequirement(%q): %v", tc.in, err)
			}
			if strings.Join(req.Prefix, "|") != strings.Join(tc.prefix, "|") || req.HasQuantity != tc.hasQ || req.AtLeast != tc.atLeast {
				t.Fatalf("ParseRequirement(%q) = %+v; want prefix %q, quantity %v >= %d", tc.in, req, tc.prefix, tc.hasQ, tc.atLeast)
			}
		})
	}
}

func TestRequirementMatches(t *testing.T) {
	h100 := "gpu/vendor/nvidia/model/h100/ram/80Gi"
	a100 := "gpu/vendor/nvidia/model/a100/ram/40Gi"
	mi300 := "gpu/vendor/amd/model/mi300/ram/192Gi"
	cases := []struct {
		req  string
		attr string
		want bool
	}{
		{"gpu/vendor/nvidia", h100, true},
		{"gpu/vendor/nvidia", mi300, false},
		{"gpu/vendor/nvidia/model/h100/ram/80Gi", h100, true}, // the whole attribute
		{"gpu/vendor/nvidia/model/h100/ram/80Gi/x", h100, false},
		{"gpu/vendor/nvid", h100, false}, // segment-wise, not a string prefix
		{"gpu/vendor/*/model/h100", h100, true},
		{"gpu/vendor/*/model/h100", a100, false},
		{"gpu/*/*/model/mi300", mi300, true},
		{"*", "ram/64Gi", true},
		{"*/64Gi", "ram/64Gi", true},
		{"ram>=32Gi", "ram/64Gi", true},
		{"ram>=32Gi", "ram/32Gi", true}, // at least: equal passes
		{"ram>=32Gi", "ram/34359738367", false},
		{"ram>=32Gi", "ram/34359738368", true}, // 32Gi in plain digits
		{"ram>=32Gi", "ram/16Gi", false},
		{"ram>=32G", "ram/32Gi", true}, // 32Gi > 32G
		{"ram>=32Gi", "ram/32G", false},
		{"ram>=32Gi", "ram", false},       // no quantity segment
		{"ram>=32Gi", "ram/lots", false},  // not a quantity
		{"ram>=32Gi", "ram/64Gi/x", true}, // segments after the quantity are ignored
		{"ram>=1", "cpu/ram/64Gi", false}, // anchored at the first segment
		{"gpu/*/*/*/*/ram>=40Gi", h100, true},
		{"gpu/*/*/*/*/ram>=40Gi", a100, true},
		{"gpu/*/*/*/*/ram>=41Gi", a100, false},
		{"gpu/*/*/*/*/ram>=100Gi", mi300, true},
		{"gpu/vendor/nvidia/*/*/ram>=64Gi", mi300, false},
		{"cpu/cores>=16", "cpu/cores/16", true},
		{"cpu/cores>=17", "cpu/cores/16", false},
		{"cpu/cores>=18446744073709551615", "cpu/cores/18446744073709551615", true},
		{"cpu/cores>=1", "cpu/cores/99999999999999999999", false}, // an overflowing attribute never satisfies
	}
	for _, tc := range cases {
		req, err := ParseRequirement(tc.req)
		if err != nil {
			t.Fatalf("%q: %v", tc.req, err)
		}
		if got := req.Matches(tc.attr); got != tc.want {
			t.Errorf("%q matches %q = %v, want %v", tc.req, tc.attr, got, tc.want)
		}
	}
}

func TestMatchAll(t *testing.T) {
	attrs := []string{"gpu/vendor/nvidia/model/h100/ram/80Gi", "ram/64Gi", "cpu/cores/16"}
	cases := []struct {
		name  string
		reqs  []string
		attrs []string
		miss  string
	}{
		{"none", nil, attrs, ""},
		{"all met by different attributes", []string{"gpu/vendor/nvidia", "ram>=32Gi", "cpu/cores>=8"}, attrs, ""},
		{"the first unmet is named", []string{"gpu/vendor/nvidia", "ram>=128Gi", "cpu/cores>=64"}, attrs, "ram>=128Gi"},
		{"an unparsable requirement is unmet", []string{"ram>=lots"}, attrs, "ram>=lots"},
		{"against no attributes", []string{"*"}, nil, "*"},
	}
	for _, tc := range cases {
		if got := MatchAll(tc.reqs, tc.attrs); got != tc.miss {
			t.Errorf("%s: MatchAll = %q, want %q", tc.name, got, tc.miss)
		}
	}
}

func TestValidateAttribute(t *testing.T) {
	good := []string{"gpu/vendor/nvidia/model/h100/ram/80Gi", "ram/64Gi", "x", "a.b_c-d:e", strings.Repeat("a", 64)}
	for _, a := range good {
		if err := ValidateAttribute(a); err != nil {
			t.Errorf("ValidateAttribute(%q): %v", a, err)
		}
	}
	bad := []struct{ attr, err string }{
		{"", "want 1..128"},
		{strings.Repeat("a", 65), "is not"},
		{strings.Repeat("ab/", 43), "want 1..128"}, // 129 characters
		{strings.Repeat("a/", 16) + "a", "more than 16 segments"},
		{"gpu/*", `segment "*"`}, // wildcards are for requirements
		{"ram>=32Gi", `segment "ram>=32Gi"`},
		{"gpu//x", `segment ""`},
		{"gpu/\u00fc", "is not"},
		{"gpu/a\x00", "is not"},
	}
	for _, tc := range bad {
		err := ValidateAttribute(tc.attr)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("ValidateAttribute(%q) = %v, want an error saying %q", tc.attr, err, tc.err)
		}
	}
}
