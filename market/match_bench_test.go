package market

import (
	"fmt"
	"testing"
)

// worstMatch is the most matching a bid can cause: 64 requirements, 64
// attributes, each requirement matched only by the last attribute.
func worstMatch() (reqs, attrs []string) {
	for i := 0; i < MaxAttributes; i++ {
		attrs = append(attrs, fmt.Sprintf("gpu/vendor/nvidia/model/x%d/ram/%dGi", i, i+1))
		reqs = append(reqs, fmt.Sprintf("gpu/vendor/nvidia/model/x%d/ram>=%dGi", MaxAttributes-1, i%8+1))
	}
	return reqs, attrs
}

// matchAllPerPair is MatchAll as it was before M2: each attribute split
// once per requirement. It is the anchor of BenchmarkM2MatchAll.
func matchAllPerPair(reqs, attrs []string) string {
	for _, r := range reqs {
		req, err := ParseRequirement(r)
		if err != nil {
			return r
		}
		ok := false
		for _, a := range attrs {
			if req.Matches(a) {
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

// BenchmarkM2MatchAll: the worst-case eligibility matching of one bid,
// MatchAll (attributes split once) against the per-pair anchor.
func BenchmarkM2MatchAll(b *testing.B) {
	reqs, attrs := worstMatch()
	if MatchAll(reqs, attrs) != "" || matchAllPerPair(reqs, attrs) != "" {
		b.Fatal("the worst case must match")
	}
	b.Run("per-pair-anchor", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			matchAllPerPair(reqs, attrs)
		}
	})
	b.Run("split-once", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			MatchAll(reqs, attrs)
		}
	})
}
