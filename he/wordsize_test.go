package he

import (
	"errors"
	"math/bits"
	"testing"
)

// TestWordSize: presets load on 64-bit builds and are refused on 32-bit
// ones, where lattigo's arithmetic is not the same. `make test` also runs
// it as GOARCH=386.
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
