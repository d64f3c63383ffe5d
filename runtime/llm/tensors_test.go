package llm

import (
	"encoding/binary"
	"math"
	"testing"
)

// ListTensors and ReadTensors read stories260K's head: its shape, type
// and data of the size the shape says; a missing name is an error.
func TestReadTensors(t *testing.T) {
	path := modelPath(t)
	ts, err := ListTensors(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 48 {
		t.Fatalf("%d tensors, want stories260K's 48", len(ts))
	}
	infos, data, err := ReadTensors(path, []string{"output_norm.weight", "output.weight"})
	if err != nil {
		t.Fatal(err)
	}
	if infos[0].Name != "output_norm.weight" || infos[0].Type != 0 || len(infos[0].Dims) != 1 || infos[0].Dims[0] != 64 || len(data[0]) != 256 {
		t.Fatalf("output_norm.weight: %+v, %d bytes", infos[0], len(data[0]))
	}
	if infos[1].Dims[0] != 64 || infos[1].Dims[1] != 512 || len(data[1]) != 64*512*4 {
		t.Fatalf("output.weight: %+v, %d bytes", infos[1], len(data[1]))
	}
	// A norm's weights are finite and not all zero: real data, not padding.
	nonzero := false
	for i := 0; i < len(data[0]); i += 4 {
		f := math.Float32frombits(binary.LittleEndian.Uint32(data[0][i:]))
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			t.Fatalf("output_norm.weight[%d] = %v", i/4, f)
		}
		nonzero = nonzero || f != 0
	}
	if !nonzero {
		t.Fatal("output_norm.weight read as zeros")
	}
	if _, _, err := ReadTensors(path, []string{"no.such.tensor"}); err == nil {
		t.Fatal("a missing tensor was read")
	}
}
