package market

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
)

// Attributes are hierarchical paths of lower-case segments, most general
// first: gpu/vendor/nvidia/model/h100/ram/80Gi, cpu/cores/16, ram/64Gi.
//
// A requirement is a path pattern that some attribute must match:
//
//	gpu/vendor/nvidia            a prefix of an attribute (segment-wise)
//	gpu/vendor/*/model/h100      * matches any one segment
//	ram>=32Gi                    the segment after the prefix is a quantity
//	gpu/*/*/*/*/ram>=40Gi        at least the given one
//
// Quantities are integers with an optional suffix K M G T (powers of 1000)
// or Ki Mi Gi Ti (powers of 1024). No floats anywhere.

const (
	maxAttrLen = 128
	maxSegs    = 16
)

func validSegment(s string, wildcard bool) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	if wildcard && s == "*" {
		return true
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == ':'
		if !ok {
			return false
		}
	}
	return true
}

// ValidateAttribute checks a provider attribute.
func ValidateAttribute(a string) error {
	if a == "" || len(a) > maxAttrLen {
		return fmt.Errorf("attribute %q: want 1..%d characters", a, maxAttrLen)
	}
	segs := strings.Split(a, "/")
	if len(segs) > maxSegs {
		return fmt.Errorf("attribute %q: more than %d segments", a, maxSegs)
	}
	for _, s := range segs {
		if !validSegment(s, false) {
			return fmt.Errorf("attribute %q: segment %q is not [A-Za-z0-9._:-]+", a, s)
		}
	}
	return nil
}

// Requirement is a parsed requirement pattern.
type Requirement struct {
	Prefix []string
	// AtLeast, when HasQuantity, is compared with the segment after Prefix.
	HasQuantity bool
	AtLeast     uint64
}

// ParseRequirement parses a requirement pattern.
func ParseRequirement(r string) (Requirement, error) {
	var req Requirement
	if r == "" || len(r) > maxAttrLen {
		return req, fmt.Errorf("requirement %q: want 1..%d characters", r, maxAttrLen)
	}
	path := r
	if p, q, ok := strings.Cut(r, ">="); ok {
		n, err := ParseQuantity(q)
		if err != nil {
			return req, fmt.Errorf("requirement %q: %w", r, err)
		}
		path, req.HasQuantity, req.AtLeast = p, true, n
	}
	segs := strings.Split(path, "/")
	if len(segs) > maxSegs {
		return req, fmt.Errorf("requirement %q: more than %d segments", r, maxSegs)
	}
	for _, s := range segs {
		if !validSegment(s, true) {
			return req, fmt.Errorf("requirement %q: segment %q is not [A-Za-z0-9._:-]+ or *", r, s)
		}
	}
	req.Prefix = segs
	return req, nil
}

// ParseQuantity reads 64, 32Gi, 3G, ...
func ParseQuantity(s string) (uint64, error) {
	mult := uint64(1)
	for _, u := range []struct {
		suffix string
		mult   uint64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || s == "" || s[0] == '+' {
		return 0, fmt.Errorf("quantity %q: want digits with an optional K, M, G, T, Ki, Mi, Gi or Ti", s)
	}
	if n > ^uint64(0)/mult {
		return 0, fmt.Errorf("quantity %q overflows", s)
	}
	return n * mult, nil
}

// Matches reports whether attribute a satisfies the requirement.
func (req Requirement) Matches(a string) bool {
	return req.matchSegs(strings.Split(a, "/"))
}

func (req Requirement) matchSegs(segs []string) bool {
	if len(segs) < len(req.Prefix) || (req.HasQuantity && len(segs) < len(req.Prefix)+1) {
		return false
	}
	for i, p := range req.Prefix {
		if p != "*" && p != segs[i] {
			return false
		}
	}
	if !req.HasQuantity {
		return true
	}
	n, err := ParseQuantity(segs[len(req.Prefix)])
	return err == nil && n >= req.AtLeast
}

// matchAllRuns counts MatchAll calls, for tests that check that a refused
// transaction did not reach the matching (M2). It never reaches state.
var matchAllRuns atomic.Uint64

// MatchAllRuns is the number of MatchAll calls in this process so far.
func MatchAllRuns() uint64 { return matchAllRuns.Load() }

// MatchAll returns the first requirement none of attrs satisfies, or "".
// Each attribute is split once, not once per requirement.
func MatchAll(reqs, attrs []string) string {
	matchAllRuns.Add(1)
	if len(reqs) == 0 {
		return ""
	}
	segs := make([][]string, len(attrs))
	for i, a := range attrs {
		segs[i] = strings.Split(a, "/")
	}
	for _, r := range reqs {
		req, err := ParseRequirement(r)
		if err != nil {
			return r
		}
		ok := false
		for _, sg := range segs {
			if req.matchSegs(sg) {
				ok = true
				break
			}
		}
		if !ok {
			return r
		}
	}
	return ""
}
