package train

import (
	"slices"
	"testing"
)

// SplitMix64 matches its reference (first outputs for seed 0), so the
// data order is the documented algorithm, not just some shuffle.
func TestSplitMix64Reference(t *testing.T) {
	s := splitmix64(0)
	want := []uint64{0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F}
	for i, w := range want {
		if g := s.next(); g != w {
			t.Fatalf("output %d: %#x, want %#x", i, g, w)
		}
	}
}

// Each epoch's order is a permutation, fixed by (seed, epoch), different
// between epochs and seeds; StepDatapoint walks the epochs.
func TestOrder(t *testing.T) {
	const n = 50
	a := Order(7, 0, n)
	sorted := slices.Clone(a)
	slices.Sort(sorted)
	for i := range sorted {
		if sorted[i] != i {
			t.Fatalf("order %v is not a permutation of 0..%d", a, n-1)
		}
	}
	if !slices.Equal(a, Order(7, 0, n)) {
		t.Fatal("the order is not deterministic")
	}
	if slices.Equal(a, Order(7, 1, n)) || slices.Equal(a, Order(8, 0, n)) {
		t.Fatal("the order does not depend on the epoch and the seed")
	}
	for k := 1; k <= 2*n; k++ {
		d, err := StepDatapoint(7, n, k)
		if err != nil {
			t.Fatal(err)
		}
		if want := Order(7, (k-1)/n, n)[(k-1)%n]; d != want {
			t.Fatalf("step %d: datapoint %d, want %d", k, d, want)
		}
	}
	if _, err := StepDatapoint(7, n, 0); err == nil {
		t.Fatal("step 0 accepted")
	}
	if got := Order(7, 0, 1); !slices.Equal(got, []int{0}) {
		t.Fatalf("one datapoint: %v", got)
	}
}

func TestDatapoints(t *testing.T) {
	for _, c := range []struct{ tokens, nctx, stride, want int }{
		{64, 64, 32, 0}, {65, 64, 32, 1}, {96, 64, 32, 1}, {97, 64, 32, 2}, {1000, 64, 64, 15},
	} {
		if got := Datapoints(c.tokens, c.nctx, c.stride); got != c.want {
			t.Errorf("Datapoints(%d, %d, %d) = %d, want %d", c.tokens, c.nctx, c.stride, got, c.want)
		}
	}
}

// The checkpoint hash covers every part of every trained tensor and does
// not depend on the order tensors are listed in.
func TestHashTensors(t *testing.T) {
	base := []Tensor{
		{Name: "output.weight", Type: 0, Dims: []uint64{2, 2}, Data: make([]byte, 16)},
		{Name: "output_norm.weight", Type: 0, Dims: []uint64{2}, Data: make([]byte, 8)},
	}
	h, err := HashTensors(base)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := HashTensors([]Tensor{base[1], base[0]}); r != h {
		t.Fatal("the hash depends on the listing order")
	}
	edits := map[string]func([]Tensor){
		"name":  func(ts []Tensor) { ts[1].Name = "output_norm.bias" },
		"type":  func(ts []Tensor) { ts[0].Type = 1 },
		"shape": func(ts []Tensor) { ts[0].Dims = []uint64{4, 1} },
		"data":  func(ts []Tensor) { ts[0].Data[15] = 1 },
		"drop":  func(ts []Tensor) {},
	}
	for name, edit := range edits {
		ts := []Tensor{base[0], base[1]}
		ts[0].Data = slices.Clone(base[0].Data)
		edit(ts)
		if name == "drop" {
			ts = ts[:1]
		}
		if g, err := HashTensors(ts); err != nil || g == h {
			t.Errorf("%s changed, hash unchanged (%v)", name, err)
		}
	}
	// Missing trailing dimensions are 1: [2,2] and [2,2,1,1] are one shape.
	same := []Tensor{base[0], base[1]}
	same[0].Dims = []uint64{2, 2, 1, 1}
	if g, _ := HashTensors(same); g != h {
		t.Error("[2 2] and [2 2 1 1] hash differently")
	}
	if _, err := HashTensors([]Tensor{base[0], base[0]}); err == nil {
		t.Error("a tensor listed twice was hashed")
	}
}

func TestHashText(t *testing.T) {
	var h Hash
	h[0], h[31] = 0xab, 0x01
	b, _ := h.MarshalText()
	var g Hash
	if err := g.UnmarshalText(b); err != nil || g != h {
		t.Fatalf("round trip: %v %s", err, g)
	}
	if err := g.UnmarshalText([]byte("zz")); err == nil {
		t.Fatal("bad hex accepted")
	}
}

// A checkpoint file reads back (through runtime/llm's GGUF checks) as the
// tensors written, with the same hash; its bytes depend on the tensors only.
func TestCheckpointRoundTrip(t *testing.T) {
	ts := []Tensor{
		{Name: "output_norm.weight", Type: 0, Dims: []uint64{3}, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}},
		{Name: "output.weight", Type: 0, Dims: []uint64{3, 2}, Data: make([]byte, 24)},
	}
	ts[1].Data[23] = 7
	path := t.TempDir() + "/ck.gguf"
	if err := WriteCheckpoint(path, ts); err != nil {
		t.Fatal(err)
	}
	got, err := ReadCheckpoint(path, SetHead)
	if err != nil {
		t.Fatal(err)
	}
	h1, _ := HashTensors(ts)
	h2, _ := HashTensors(got)
	if h1 != h2 {
		t.Fatal("the checkpoint file does not read back as written")
	}
	if h, err := HashCheckpoint(path, SetHead); err != nil || h != h1 {
		t.Fatalf("HashCheckpoint %s (%v), want %s", h, err, h1)
	}
	a, _ := EncodeCheckpoint(ts)
	b, _ := EncodeCheckpoint([]Tensor{ts[1], ts[0]})
	if !slices.Equal(a, b) {
		t.Fatal("the encoding depends on the listing order")
	}
	bad := []Tensor{{Name: "output.weight", Type: 1, Dims: []uint64{2}, Data: make([]byte, 4)}}
	if _, err := EncodeCheckpoint(bad); err == nil {
		t.Fatal("an F16 tensor was encoded")
	}
	bad = []Tensor{{Name: "output.weight", Type: 0, Dims: []uint64{3}, Data: make([]byte, 4)}}
	if _, err := EncodeCheckpoint(bad); err == nil {
		t.Fatal("a tensor of the wrong size was encoded")
	}
}
