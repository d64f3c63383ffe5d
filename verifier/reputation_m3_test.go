package verifier

import (
	"testing"

	"github.com/holiman/uint256"
)

// TestM3CreditAgreedBelowMinimum: an agreed result paid less than the
// minimum counts for nothing; at the minimum it counts once.
func TestM3CreditAgreedBelowMinimum(t *testing.T) {
	min := uint256.NewInt(1_000)
	var r Reputation
	for i := 0; i < 12; i++ {
		r.CreditAgreed(uint256.NewInt(1), min)
	}
	if r != (Reputation{}) || r.Score() != 500 {
		t.Fatalf("12 one-unit jobs gave %+v, score %d; want nothing", r, r.Score())
	}
	r.CreditAgreed(min, min)
	if r.Done != 1 || r.Agreed != 1 {
		t.Fatalf("a job paying the minimum gave %+v", r)
	}
	var free Reputation
	free.CreditAgreed(uint256.NewInt(1), nil)
	if free.Agreed != 1 {
		t.Fatalf("no minimum: %+v", free)
	}
}
