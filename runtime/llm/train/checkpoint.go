package train

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
)

// checkpointAlign is GGUF's default alignment of tensor data.
const checkpointAlign = 32

// EncodeCheckpoint is a checkpoint file holding only the trained tensors:
// a GGUF v3 file with no key-values and ts sorted by name, each tensor's
// data aligned to 32 bytes. The bytes are a function of ts alone (the same
// tensors give the same file); RunStep applies such a file over the base
// model, and HashCheckpoint hashes it like a whole model.
func EncodeCheckpoint(ts []Tensor) ([]byte, error) {
	ts = slices.Clone(ts)
	slices.SortFunc(ts, func(a, b Tensor) int { return cmp.Compare(a.Name, b.Name) })
	var b bytes.Buffer
	le := func(v any) { binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("GGUF")
	le(uint32(3))
	le(uint64(len(ts)))
	le(uint64(0)) // key-values
	var off uint64
	for i, t := range ts {
		if i > 0 && ts[i-1].Name == t.Name {
			return nil, fmt.Errorf("tensor %s is listed twice", t.Name)
		}
		if len(t.Dims) < 1 || len(t.Dims) > 4 || t.Type != 0 {
			return nil, fmt.Errorf("tensor %s: want F32 with 1 to 4 dimensions", t.Name)
		}
		n := uint64(4)
		for _, d := range t.Dims {
			n *= d
		}
		if n != uint64(len(t.Data)) {
			return nil, fmt.Errorf("tensor %s has %d bytes for its shape %v", t.Name, len(t.Data), t.Dims)
		}
		le(uint64(len(t.Name)))
		b.WriteString(t.Name)
		le(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			le(d)
		}
		le(t.Type)
		le(off)
		off += (n + checkpointAlign - 1) / checkpointAlign * checkpointAlign
	}
	pad := func() {
		for b.Len()%checkpointAlign != 0 {
			b.WriteByte(0)
		}
	}
	pad()
	for _, t := range ts {
		b.Write(t.Data)
		pad()
	}
	return b.Bytes(), nil
}

// WriteCheckpoint writes EncodeCheckpoint(ts) to path.
func WriteCheckpoint(path string, ts []Tensor) error {
	b, err := EncodeCheckpoint(ts)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
