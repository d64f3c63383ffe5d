package llm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ggufBuilder writes GGUF bytes for tests.
type ggufBuilder struct{ bytes.Buffer }

func (b *ggufBuilder) u32(v uint32) *ggufBuilder {
	binary.Write(&b.Buffer, binary.LittleEndian, v)
	return b
}

func (b *ggufBuilder) u64(v uint64) *ggufBuilder {
	binary.Write(&b.Buffer, binary.LittleEndian, v)
	return b
}

func (b *ggufBuilder) str(s string) *ggufBuilder {
	b.u64(uint64(len(s)))
	b.WriteString(s)
	return b
}

// tinyGGUF is a valid GGUF v3 file with two kvs (a string and a string array)
// and one F32 tensor of 4×2 elements at data offset 0.
func tinyGGUF() []byte {
	var b ggufBuilder
	b.WriteString("GGUF")
	b.u32(3).u64(1).u64(2)
	b.str("general.architecture").u32(ggufString).str("llama")
	b.str("tokenizer.ggml.tokens").u32(ggufArray).u32(ggufString).u64(2).str("a").str("b")
	b.str("w").u32(2).u64(4).u64(2).u32(0).u64(0)
	for b.Len()%ggufDefaultAlign != 0 {
		b.WriteByte(0)
	}
	b.Write(make([]byte, 4*2*4))
	return b.Bytes()
}

func TestReadGGUF(t *testing.T) {
	good := tinyGGUF()
	h, err := readGGUF(bytes.NewReader(good), uint64(len(good)))
	if err != nil {
		t.Fatal(err)
	}
	if h.Version != 3 || h.Tensors != 1 || h.KVs != 2 || h.MinSize != uint64(len(good)) || h.DataOffset != uint64(len(good)-32) {
		t.Fatalf("header %+v, file %d bytes", h, len(good))
	}

	header := func(version uint32, tensors, kvs uint64) *ggufBuilder {
		var b ggufBuilder
		b.WriteString("GGUF")
		b.u32(version).u64(tensors).u64(kvs)
		return &b
	}
	for _, tc := range []struct {
		name      string
		data      []byte
		want      string
		truncated bool
	}{
		{"magic only", []byte("GGUF"), "reading the version", true},
		{"wrong magic", []byte("GGML\x03\x00\x00\x00"), "not a GGUF file", false},
		{"version 1", header(1, 0, 0).Bytes(), "version 1", false},
		{"big-endian", []byte("GGUF\x00\x00\x00\x03" + strings.Repeat("\x00", 16)), "big-endian", false},
		{"future version", header(4, 0, 0).Bytes(), "newer", false},
		{"huge kv count", header(3, 0, 1<<60).Bytes(), "key-values do not fit", true},
		{"huge tensor count", header(3, 1<<60, 0).Bytes(), "tensors do not fit", true},
		{"kv cut short", good[:60], "reading key-value", true},
		{"tensor info cut short", good[:170], "reading tensor", true},
		{"huge string", func() []byte {
			b := header(3, 0, 1)
			b.u64(1 << 62)
			b.Write(make([]byte, 64))
			return b.Bytes()
		}(), "reading key-value 1 of 1", true},
		{"unknown value type", func() []byte {
			b := header(3, 0, 1)
			b.str("k").u32(99).u64(0)
			return b.Bytes()
		}(), "unknown value type 99", false},
		{"nested array", func() []byte {
			b := header(3, 0, 1)
			b.str("k").u32(ggufArray).u32(ggufArray).u64(1).u32(ggufUint8).u64(0)
			return b.Bytes()
		}(), "nested arrays", false},
		{"bad alignment", func() []byte {
			b := header(3, 0, 1)
			b.str("general.alignment").u32(ggufUint32).u32(24)
			return b.Bytes()
		}(), "not a power of two", false},
		{"too many dims", func() []byte {
			b := header(3, 1, 0)
			b.str("w").u32(5).u64(1).u64(1).u64(1).u64(1).u64(1).u32(0).u64(0)
			return b.Bytes()
		}(), "5 dimensions", false},
		{"unknown tensor type", func() []byte {
			b := header(3, 1, 0)
			b.str("w").u32(1).u64(32).u32(4).u64(0)
			return b.Bytes()
		}(), "unknown ggml type 4", false},
		{"partial block", func() []byte {
			b := header(3, 1, 0)
			b.str("w").u32(1).u64(31).u32(2).u64(0)
			return b.Bytes()
		}(), "not a multiple of the block size", false},
		{"misaligned offset", func() []byte {
			b := header(3, 1, 0)
			b.str("w").u32(1).u64(1).u32(0).u64(4)
			return b.Bytes()
		}(), "not a multiple of the alignment", false},
		{"element overflow", func() []byte {
			b := header(3, 1, 0)
			b.str("w").u32(2).u64(1 << 40).u64(1 << 40).u32(0).u64(0)
			return b.Bytes()
		}(), "too many elements", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readGGUF(bytes.NewReader(tc.data), uint64(len(tc.data)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if got := errors.Is(err, errTruncated); got != tc.truncated {
				t.Fatalf("errors.Is(%v, errTruncated) = %v, want %v", err, got, tc.truncated)
			}
		})
	}
}

func TestCheckGGUFTruncatedData(t *testing.T) {
	good := tinyGGUF()
	path := filepath.Join(t.TempDir(), "cut.gguf")
	if err := os.WriteFile(path, good[:len(good)-1], 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := checkGGUF(path)
	want := "is truncated: 223 bytes, the header describes at least 224"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one containing %q", err, want)
	}
}

// FuzzReadGGUF checks that no input makes the GGUF reader panic or accept a
// header that describes more data than the input holds.
func FuzzReadGGUF(f *testing.F) {
	good := tinyGGUF()
	f.Add(good)
	f.Add(good[:40])
	f.Add([]byte("GGUF"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := readGGUF(bytes.NewReader(data), uint64(len(data)))
		if err == nil && h.DataOffset < 24 {
			t.Fatalf("accepted a header ending at %d", h.DataOffset)
		}
	})
}
