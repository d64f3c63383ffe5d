package he

import (
	"errors"
	"math/bits"
	"testing"
)

// TestWordSize: presets load on 64-bit builds. 32-bit builds of he do not
// compile (wordsize32.go): `make wordsize` builds, never runs, a GOARCH=386
// package and requires that refusal; NewParams keeps a runtime check too.
func TestWordSize(t *testing.T) {
	_, err := NewParams("N13")
	switch {
	case bits.UintSize == 64 && err != nil:
		t.Fatal(err)
	case bits.UintSize != 64 && !errors.Is(err, ErrNot64Bit):
		t.Fatalf("%d-bit build: got %v, want ErrNot64Bit", bits.UintSize, err)
	}
	if err != nil {
		t.Log(err)
	}
}
