package llm

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// TensorInfo describes one tensor of a GGUF file.
type TensorInfo struct {
	Name   string
	Type   uint32   // ggml type: 0 is F32
	Dims   []uint64 // ne[0], ne[1], ... as stored
	Size   uint64   // bytes of data
	Offset uint64   // where the data starts in the file
}

// ListTensors lists the tensors of the GGUF file at path in file order,
// after the checks Load makes on the header.
func ListTensors(path string) ([]TensorInfo, error) {
	g, err := readGGUFFile(path)
	if err != nil {
		return nil, err
	}
	out := make([]TensorInfo, len(g.Tensors))
	for i, t := range g.Tensors {
		out[i] = TensorInfo{Name: t.Name, Type: t.Type, Dims: slices.Clone(t.Dims), Size: t.Size, Offset: g.DataOffset + t.Offset}
	}
	return out, nil
}

// ReadTensors reads the named tensors' infos and data from the GGUF file
// at path, in the order of names; a name the file lacks is an error.
func ReadTensors(path string, names []string) ([]TensorInfo, [][]byte, error) {
	g, err := readGGUFFile(path)
	if err != nil {
		return nil, nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	infos := make([]TensorInfo, len(names))
	data := make([][]byte, len(names))
	for i, name := range names {
		t := g.tensor(name)
		if t == nil {
			return nil, nil, fmt.Errorf("%s has no tensor %s", path, name)
		}
		infos[i] = TensorInfo{Name: t.Name, Type: t.Type, Dims: slices.Clone(t.Dims), Size: t.Size, Offset: g.DataOffset + t.Offset}
		data[i] = make([]byte, t.Size)
		if _, err := f.ReadAt(data[i], int64(g.DataOffset+t.Offset)); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, nil, fmt.Errorf("cannot read tensor %s of %s: %w", name, path, err)
		}
	}
	return infos, data, nil
}

// InitBackend initializes llama.cpp for this process (once), takes over
// its log and checks that this CPU runs what ggml was compiled for: what
// a package that calls llama.cpp directly (runtime/llm/train) does first.
func InitBackend() error {
	if err := initBackend(); err != nil {
		return err
	}
	return CheckCPU()
}

// Backend is "cpu" or "cpu+<features>" for this build's ggml CPU backend,
// as it appears in determinism classes.
func Backend() string {
	if err := initBackend(); err == nil {
		if f := cpuFeatures(); len(f) > 0 {
			return "cpu+" + strings.Join(f, "+")
		}
	}
	return "cpu"
}
