package llm

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
)

// GGUF layout (little-endian), as read by llama.cpp's gguf.cpp:
//
//	magic "GGUF" | version u32 | tensor count u64 | kv count u64
//	kv:     key string | value type u32 | value
//	tensor: name string | n_dims u32 | dims u64[n_dims] | ggml type u32 | offset u64
//	padding to the alignment (general.alignment, default 32) | tensor data
//
// Strings are a u64 length and that many bytes; arrays are an element type
// u32, a count u64 and the elements.

const (
	ggufMagic        = "GGUF"
	ggufMaxDims      = 4 // GGML_MAX_DIMS
	ggufDefaultAlign = 32
)

// GGUF value types.
const (
	ggufUint8   = 0
	ggufInt8    = 1
	ggufUint16  = 2
	ggufInt16   = 3
	ggufUint32  = 4
	ggufInt32   = 5
	ggufFloat32 = 6
	ggufBool    = 7
	ggufString  = 8
	ggufArray   = 9
	ggufUint64  = 10
	ggufInt64   = 11
	ggufFloat64 = 12
)

// ggufScalarSize is the encoded size of each fixed-size value type.
var ggufScalarSize = map[uint32]uint64{
	ggufUint8: 1, ggufInt8: 1, ggufBool: 1,
	ggufUint16: 2, ggufInt16: 2,
	ggufUint32: 4, ggufInt32: 4, ggufFloat32: 4,
	ggufUint64: 8, ggufInt64: 8, ggufFloat64: 8,
}

// ggmlTypeSize is (block size in elements, bytes per block) per ggml tensor
// type, from ggml.c's type_traits and ggml-common.h's block structs
// (ollama v0.9.6). Removed types (4, 5, 31..33, 36..38) are absent.
var ggmlTypeSize = map[uint32][2]uint64{
	0:  {1, 4},     // F32
	1:  {1, 2},     // F16
	2:  {32, 18},   // Q4_0
	3:  {32, 20},   // Q4_1
	6:  {32, 22},   // Q5_0
	7:  {32, 24},   // Q5_1
	8:  {32, 34},   // Q8_0
	9:  {32, 36},   // Q8_1
	10: {256, 84},  // Q2_K
	11: {256, 110}, // Q3_K
	12: {256, 144}, // Q4_K
	13: {256, 176}, // Q5_K
	14: {256, 210}, // Q6_K
	15: {256, 292}, // Q8_K
	16: {256, 66},  // IQ2_XXS
	17: {256, 74},  // IQ2_XS
	18: {256, 98},  // IQ3_XXS
	19: {256, 50},  // IQ1_S
	20: {32, 18},   // IQ4_NL
	21: {256, 110}, // IQ3_S
	22: {256, 82},  // IQ2_S
	23: {256, 136}, // IQ4_XS
	24: {1, 1},     // I8
	25: {1, 2},     // I16
	26: {1, 4},     // I32
	27: {1, 8},     // I64
	28: {1, 8},     // F64
	29: {256, 56},  // IQ1_M
	30: {1, 2},     // BF16
	34: {256, 54},  // TQ1_0
	35: {256, 66},  // TQ2_0
}

// ggufHeader is what checkGGUF learned about a model file.
type ggufHeader struct {
	Version    uint32
	Tensors    uint64
	KVs        uint64
	Alignment  uint64
	DataOffset uint64 // where the tensor data section starts
	MinSize    uint64 // DataOffset plus the end of the last tensor's data
}

// errTruncated marks a header that ends before its declared contents.
var errTruncated = errors.New("the file ends here")

// ggufReader reads little-endian GGUF fields and knows how many bytes remain.
type ggufReader struct {
	r    *bufio.Reader
	off  uint64
	size uint64
	rec  *bytes.Buffer // when set, every byte read or skipped is appended
}

func (g *ggufReader) left() uint64 { return g.size - g.off }

func (g *ggufReader) read(n int) ([]byte, error) {
	if uint64(n) > g.left() {
		return nil, errTruncated
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(g.r, b); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, errTruncated
		}
		return nil, err
	}
	g.off += uint64(n)
	if g.rec != nil {
		g.rec.Write(b)
	}
	return b, nil
}

func (g *ggufReader) skip(n uint64) error {
	if n > g.left() {
		return errTruncated
	}
	if g.rec != nil {
		_, err := g.read(int(n))
		return err
	}
	if _, err := g.r.Discard(int(n)); err != nil {
		if errors.Is(err, io.EOF) {
			return errTruncated
		}
		return err
	}
	g.off += n
	return nil
}

func (g *ggufReader) u32() (uint32, error) {
	b, err := g.read(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (g *ggufReader) u64() (uint64, error) {
	b, err := g.read(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

func (g *ggufReader) str() (string, error) {
	n, err := g.u64()
	if err != nil {
		return "", err
	}
	if n > g.left() {
		return "", errTruncated
	}
	if n > 1<<20 {
		return "", fmt.Errorf("string of %d bytes is implausibly long", n)
	}
	b, err := g.read(int(n))
	return string(b), err
}

// skipValue skips one value of type t.
func (g *ggufReader) skipValue(t uint32) error {
	if sz, ok := ggufScalarSize[t]; ok {
		return g.skip(sz)
	}
	switch t {
	case ggufString:
		n, err := g.u64()
		if err != nil {
			return err
		}
		return g.skip(n)
	case ggufArray:
		et, err := g.u32()
		if err != nil {
			return err
		}
		if et == ggufArray {
			return errors.New("nested arrays are not supported")
		}
		n, err := g.u64()
		if err != nil {
			return err
		}
		if sz, ok := ggufScalarSize[et]; ok {
			if n > g.left()/sz {
				return errTruncated
			}
			return g.skip(n * sz)
		}
		if et != ggufString {
			return fmt.Errorf("array of unknown value type %d", et)
		}
		if n > g.left()/8 { // each string has at least its length
			return errTruncated
		}
		for range n {
			if err := g.skipValue(ggufString); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unknown value type %d", t)
}

// readGGUF parses a GGUF header from r, a file of size bytes.
func readGGUF(r io.Reader, size uint64) (ggufHeader, error) {
	var h ggufHeader
	g := &ggufReader{r: bufio.NewReaderSize(r, 1<<16), size: size}
	magic, err := g.read(4)
	if err != nil {
		return h, fmt.Errorf("reading the magic: %w", errTruncated)
	}
	if string(magic) != ggufMagic {
		return h, fmt.Errorf("not a GGUF file: it starts with %q, want %q", magic, ggufMagic)
	}
	if h.Version, err = g.u32(); err != nil {
		return h, fmt.Errorf("reading the version: %w", err)
	}
	switch {
	case h.Version&0xffff == 0:
		return h, fmt.Errorf("GGUF version %#x looks big-endian, which llama.cpp does not read; convert the model on a little-endian machine", h.Version)
	case h.Version == 1:
		return h, errors.New("GGUF version 1 is no longer supported by llama.cpp; convert the model again")
	case h.Version > 3:
		return h, fmt.Errorf("GGUF version %d is newer than this llama.cpp reads (3)", h.Version)
	}
	if h.Tensors, err = g.u64(); err != nil {
		return h, fmt.Errorf("reading the tensor count: %w", err)
	}
	if h.KVs, err = g.u64(); err != nil {
		return h, fmt.Errorf("reading the key-value count: %w", err)
	}
	// Every kv takes at least 12 bytes and every tensor info at least 24.
	if h.KVs > g.left()/12 {
		return h, fmt.Errorf("%d key-values do not fit in the file: %w", h.KVs, errTruncated)
	}
	if h.Tensors > g.left()/24 {
		return h, fmt.Errorf("%d tensors do not fit in the file: %w", h.Tensors, errTruncated)
	}
	h.Alignment = ggufDefaultAlign
	for i := range h.KVs {
		key, err := g.str()
		if err != nil {
			return h, fmt.Errorf("reading key-value %d of %d: %w", i+1, h.KVs, err)
		}
		t, err := g.u32()
		if err != nil {
			return h, fmt.Errorf("reading key-value %q: %w", key, err)
		}
		if key == "general.alignment" {
			if t != ggufUint32 {
				return h, fmt.Errorf("general.alignment has value type %d, want uint32", t)
			}
			a, err := g.u32()
			if err != nil {
				return h, fmt.Errorf("reading key-value %q: %w", key, err)
			}
			if a == 0 || a&(a-1) != 0 {
				return h, fmt.Errorf("general.alignment %d is not a power of two", a)
			}
			h.Alignment = uint64(a)
			continue
		}
		if err := g.skipValue(t); err != nil {
			return h, fmt.Errorf("reading key-value %q: %w", key, err)
		}
	}
	var dataEnd uint64
	for i := range h.Tensors {
		name, err := g.str()
		if err != nil {
			return h, fmt.Errorf("reading tensor info %d of %d: %w", i+1, h.Tensors, err)
		}
		nd, err := g.u32()
		if err != nil {
			return h, fmt.Errorf("reading tensor %q: %w", name, err)
		}
		if nd == 0 || nd > ggufMaxDims {
			return h, fmt.Errorf("tensor %q has %d dimensions, want 1..%d", name, nd, ggufMaxDims)
		}
		elems := uint64(1)
		var ne0 uint64
		for d := range nd {
			n, err := g.u64()
			if err != nil {
				return h, fmt.Errorf("reading tensor %q: %w", name, err)
			}
			if n > math.MaxInt64 {
				return h, fmt.Errorf("tensor %q has a negative dimension", name)
			}
			if d == 0 {
				ne0 = n
			}
			hi, lo := bits.Mul64(elems, n)
			if hi != 0 || lo > math.MaxInt64 {
				return h, fmt.Errorf("tensor %q has too many elements", name)
			}
			elems = lo
		}
		typ, err := g.u32()
		if err != nil {
			return h, fmt.Errorf("reading tensor %q: %w", name, err)
		}
		bs, ok := ggmlTypeSize[typ]
		if !ok {
			return h, fmt.Errorf("tensor %q has unknown ggml type %d", name, typ)
		}
		if ne0%bs[0] != 0 {
			return h, fmt.Errorf("tensor %q: row length %d is not a multiple of the block size %d of type %d", name, ne0, bs[0], typ)
		}
		off, err := g.u64()
		if err != nil {
			return h, fmt.Errorf("reading tensor %q: %w", name, err)
		}
		if off%h.Alignment != 0 {
			return h, fmt.Errorf("tensor %q: data offset %d is not a multiple of the alignment %d", name, off, h.Alignment)
		}
		hi, nbytes := bits.Mul64(elems/bs[0], bs[1])
		end, carry := bits.Add64(off, nbytes, 0)
		if hi != 0 || carry != 0 || end > math.MaxInt64 {
			return h, fmt.Errorf("tensor %q: data offset %d plus %d bytes overflows", name, off, nbytes)
		}
		dataEnd = max(dataEnd, end)
	}
	h.DataOffset = (g.off + h.Alignment - 1) / h.Alignment * h.Alignment
	h.MinSize = h.DataOffset + dataEnd
	return h, nil
}

// checkGGUF validates the model file at path before llama.cpp sees it, so
// that an empty, foreign, corrupt or truncated file gives a clear error
// instead of a llama.cpp failure or a crash while it maps the tensors.
func checkGGUF(path string) (ggufHeader, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return ggufHeader{}, fmt.Errorf("model file %s does not exist; download it or fix the path", path)
		}
		return ggufHeader{}, fmt.Errorf("cannot open model file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ggufHeader{}, fmt.Errorf("cannot stat model file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return ggufHeader{}, fmt.Errorf("model file %s is not a regular file", path)
	}
	size := uint64(st.Size())
	if size == 0 {
		return ggufHeader{}, fmt.Errorf("model file %s is empty; download it again", path)
	}
	h, err := readGGUF(f, size)
	if errors.Is(err, errTruncated) {
		return h, fmt.Errorf("model file %s is truncated: %d bytes, its GGUF header ends early (%v); download it again", path, size, err)
	}
	if err != nil {
		return h, fmt.Errorf("model file %s is not a valid GGUF model: %w", path, err)
	}
	if h.MinSize > size {
		return h, fmt.Errorf("model file %s is truncated: %d bytes, the header describes at least %d; download it again", path, size, h.MinSize)
	}
	return h, nil
}
