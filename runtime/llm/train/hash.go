package train

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/ogpu-network/ogpu/runtime/llm"
)

// Tensor is one trained tensor: its name, ggml type, shape and data.
type Tensor struct {
	Name string
	Type uint32
	Dims []uint64 // ne[0].. as stored; missing trailing dims are 1
	Data []byte
}

// hashDomain starts every canonical encoding.
const hashDomain = "ogpu/train/tensors/v1\x00"

// HashTensors is the checkpoint hash of ts: sha256 over
//
//	"ogpu/train/tensors/v1\x00" | u32 count |
//	per tensor, by name (byte order): u32 len(name) | name | u32 ggml type |
//	    u64 ne[0] | u64 ne[1] | u64 ne[2] | u64 ne[3] (missing dims are 1) |
//	    u64 len(data) | data
//
// all little-endian. The encoding has no file metadata: saving the same
// tensors twice, or with another saver, hashes alike.
func HashTensors(ts []Tensor) (Hash, error) {
	ts = slices.Clone(ts)
	slices.SortFunc(ts, func(a, b Tensor) int { return cmp.Compare(a.Name, b.Name) })
	h := sha256.New()
	var b [8]byte
	u32 := func(v uint32) { binary.LittleEndian.PutUint32(b[:4], v); h.Write(b[:4]) }
	u64 := func(v uint64) { binary.LittleEndian.PutUint64(b[:], v); h.Write(b[:]) }
	h.Write([]byte(hashDomain))
	u32(uint32(len(ts)))
	for i, t := range ts {
		if i > 0 && ts[i-1].Name == t.Name {
			return Hash{}, fmt.Errorf("tensor %s is listed twice", t.Name)
		}
		if len(t.Dims) > 4 {
			return Hash{}, fmt.Errorf("tensor %s has %d dimensions, more than 4", t.Name, len(t.Dims))
		}
		u32(uint32(len(t.Name)))
		h.Write([]byte(t.Name))
		u32(t.Type)
		for d := range 4 {
			if d < len(t.Dims) {
				u64(t.Dims[d])
			} else {
				u64(1)
			}
		}
		u64(uint64(len(t.Data)))
		h.Write(t.Data)
	}
	var out Hash
	h.Sum(out[:0])
	return out, nil
}

// ReadCheckpoint reads the tensors of set from the GGUF file at path (a
// base model, a saved fine-tune or a checkpoint), checking that they are
// F32 and their data has the size of their shape.
func ReadCheckpoint(path, set string) ([]Tensor, error) {
	names, err := TrainedTensors(set)
	if err != nil {
		return nil, err
	}
	infos, data, err := llm.ReadTensors(path, names)
	if err != nil {
		return nil, err
	}
	out := make([]Tensor, len(infos))
	for i, ti := range infos {
		if ti.Type != 0 {
			return nil, fmt.Errorf("%s: tensor %s is of ggml type %d, not F32", path, ti.Name, ti.Type)
		}
		n := uint64(4)
		for _, d := range ti.Dims {
			n *= d
		}
		if n != uint64(len(data[i])) {
			return nil, fmt.Errorf("%s: tensor %s has %d bytes for its shape %v", path, ti.Name, len(data[i]), ti.Dims)
		}
		out[i] = Tensor{Name: ti.Name, Type: ti.Type, Dims: ti.Dims, Data: data[i]}
	}
	return out, nil
}

// HashCheckpoint is the checkpoint hash of the trained tensors of set in
// the GGUF file at path: h_0 for the base model, h_N for the final model.
func HashCheckpoint(path, set string) (Hash, error) {
	ts, err := ReadCheckpoint(path, set)
	if err != nil {
		return Hash{}, err
	}
	return HashTensors(ts)
}

// ErrCheckpointMismatch: a checkpoint's trained tensors do not hash to the
// value agreed on chain.
var ErrCheckpointMismatch = errors.New("the checkpoint does not match its commitment")

// VerifyCheckpoint checks that the trained tensors of the GGUF at path
// hash to want (the agreed h_{k−1} before a validator re-executes step k).
func VerifyCheckpoint(path, set string, want Hash) error {
	got, err := HashCheckpoint(path, set)
	if err != nil {
		return fmt.Errorf("bad checkpoint: %w", err)
	}
	if got != want {
		return fmt.Errorf("%w: %s's trained tensors hash %s, the commitment is %s: refuse it and ask its holder for the right one", ErrCheckpointMismatch, path, got, want)
	}
	return nil
}
