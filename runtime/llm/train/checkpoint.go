package train

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/ogpu-network/ogpu/runtime/llm"
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

// WriteModel writes the fine-tuned model: a copy of the base GGUF at base
// with the data of the trained tensors ts replaced, to out. Everything
// else, metadata included, is the base's: llama.cpp's own saver would
// write the training context (n_ctx) as the model's context_length and
// add keys of its own. The bytes are a function of the base file and ts.
func WriteModel(base, out string, ts []Tensor) error {
	infos, err := llm.ListTensors(base)
	if err != nil {
		return fmt.Errorf("cannot read the base model: %w", err)
	}
	src, err := os.Open(base)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp := out + ".tmp"
	dst, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("cannot write the fine-tuned model: %w", err)
	}
	defer os.Remove(tmp)
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return fmt.Errorf("cannot write the fine-tuned model: %w", err)
	}
	for _, t := range ts {
		i := slices.IndexFunc(infos, func(ti llm.TensorInfo) bool { return ti.Name == t.Name })
		if i < 0 {
			dst.Close()
			return fmt.Errorf("the base model has no tensor %s", t.Name)
		}
		ti := infos[i]
		if ti.Type != t.Type || ti.Size != uint64(len(t.Data)) || !sameShape(ti.Dims, t.Dims) {
			dst.Close()
			return fmt.Errorf("tensor %s (type %d, shape %v, %d bytes) does not fit the base model's (type %d, shape %v)", t.Name, t.Type, t.Dims, len(t.Data), ti.Type, ti.Dims)
		}
		if _, err := dst.WriteAt(t.Data, int64(ti.Offset)); err != nil {
			dst.Close()
			return fmt.Errorf("cannot write the fine-tuned model: %w", err)
		}
	}
	if err := dst.Close(); err != nil {
		return fmt.Errorf("cannot write the fine-tuned model: %w", err)
	}
	return os.Rename(tmp, out)
}

// sameShape compares shapes with missing trailing dimensions as 1.
func sameShape(a, b []uint64) bool {
	for i := range max(len(a), len(b)) {
		x, y := uint64(1), uint64(1)
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return false
		}
	}
	return true
}
