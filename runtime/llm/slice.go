package llm

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Slices: a GGUF model cut by layers into stage files, each holding only its
// layers, for split inference (shared/research/llm-split.md §3.1). A slice
// is a raw copy of the model's GGUF, deterministic byte for byte (the same
// model and cut give the same sha256, so a slice is a content-addressed
// blob like a model):
//
//   - every metadata key is copied, except <arch>.block_count (rewritten to
//     the slice's layers), per-layer arrays (sliced) and, on a middle stage,
//     the tokenizer (dropped: tokenizer.ggml.model "none", <arch>.vocab_size
//     1, so its logits buffer is one float per row); keys ogpu.slice.* say
//     what the slice is;
//   - blk.i.* for from <= i < to, renumbered from 0;
//   - output_norm.weight in every slice (llama.cpp's loader requires it);
//   - token_embd.weight in every slice (required too): the real tensor in
//     stage 0 and, when the model ties its output to it (no output.weight),
//     in the last stage; elsewhere zeros of its shape in Q4_0 (never read:
//     those stages take residuals through llama_batch.embd);
//   - output.weight in the last slice only; other global tensors in all.

// SplitArchitectures are the architectures whose split runs were proven
// bit-identical to whole-model runs (TestSplitEqualsWhole): llama. Others
// scale embedding input or index layers in ways that break a cut
// (llm-split.md §8) and are refused until such a test gates them.
var SplitArchitectures = []string{"llama"}

// Keys a slice carries about itself.
const (
	sliceKeyFrom   = "ogpu.slice.from"   // u32: first layer of the whole model
	sliceKeyTo     = "ogpu.slice.to"     // u32: one past the last layer
	sliceKeyLayers = "ogpu.slice.layers" // u32: the whole model's layer count
	sliceKeyModel  = "ogpu.slice.model"  // string: sha256 hex of the whole model
)

// ggufKV is one metadata key with its encoded value (after the type).
type ggufKV struct {
	Key  string
	Type uint32
	Raw  []byte
}

// ggufTensor is one tensor info; Offset is relative to the data section.
type ggufTensor struct {
	Name   string
	Dims   []uint64
	Type   uint32
	Offset uint64
	Size   uint64
}

// ggufFile is a GGUF file's metadata, read whole.
type ggufFile struct {
	Version    uint32
	Alignment  uint64
	KVs        []ggufKV
	Tensors    []ggufTensor
	DataOffset uint64
}

// kv returns the key's value, or nil.
func (g *ggufFile) kv(key string) *ggufKV {
	for i := range g.KVs {
		if g.KVs[i].Key == key {
			return &g.KVs[i]
		}
	}
	return nil
}

// tensor returns the named tensor, or nil.
func (g *ggufFile) tensor(name string) *ggufTensor {
	for i := range g.Tensors {
		if g.Tensors[i].Name == name {
			return &g.Tensors[i]
		}
	}
	return nil
}

// str is a string key's value.
func (g *ggufFile) str(key string) (string, error) {
	kv := g.kv(key)
	if kv == nil {
		return "", fmt.Errorf("the model has no %s", key)
	}
	if kv.Type != ggufString || len(kv.Raw) < 8 {
		return "", fmt.Errorf("%s has value type %d, want a string", key, kv.Type)
	}
	return string(kv.Raw[8:]), nil
}

// uint is an integer key's value.
func (g *ggufFile) uint(key string) (uint64, error) {
	kv := g.kv(key)
	if kv == nil {
		return 0, fmt.Errorf("the model has no %s", key)
	}
	v, ok := rawUint(kv.Type, kv.Raw)
	if !ok {
		return 0, fmt.Errorf("%s has value type %d, want an unsigned integer", key, kv.Type)
	}
	return v, nil
}

// rawUint decodes a non-negative integer value.
func rawUint(t uint32, raw []byte) (uint64, bool) {
	switch {
	case (t == ggufUint32 || t == ggufInt32) && len(raw) == 4:
		v := binary.LittleEndian.Uint32(raw)
		return uint64(v), t == ggufUint32 || int32(v) >= 0
	case (t == ggufUint64 || t == ggufInt64) && len(raw) == 8:
		v := binary.LittleEndian.Uint64(raw)
		return v, t == ggufUint64 || int64(v) >= 0
	case t == ggufUint16 && len(raw) == 2:
		return uint64(binary.LittleEndian.Uint16(raw)), true
	case t == ggufUint8 && len(raw) == 1:
		return uint64(raw[0]), true
	}
	return 0, false
}

// putUint encodes v in integer type t (as rawUint reads it).
func putUint(t uint32, v uint64) []byte {
	switch t {
	case ggufUint8:
		return []byte{byte(v)}
	case ggufUint16:
		return binary.LittleEndian.AppendUint16(nil, uint16(v))
	case ggufUint32, ggufInt32:
		return binary.LittleEndian.AppendUint32(nil, uint32(v))
	}
	return binary.LittleEndian.AppendUint64(nil, v)
}

// tensorBytes is the data size of a tensor of type t and dims.
func tensorBytes(t uint32, dims []uint64) uint64 {
	n := uint64(1)
	for _, d := range dims {
		n *= d
	}
	bs := ggmlTypeSize[t]
	return n / bs[0] * bs[1]
}

// readGGUFFile reads the whole metadata of the GGUF file at path, after
// checkGGUF validated it (so sizes and counts are already bounded).
func readGGUFFile(path string) (*ggufFile, error) {
	h, err := checkGGUF(path)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	g := &ggufReader{r: bufio.NewReaderSize(f, 1<<16), size: uint64(st.Size())}
	if err := g.skip(4 + 4 + 8 + 8); err != nil {
		return nil, err
	}
	out := &ggufFile{Version: h.Version, Alignment: h.Alignment, DataOffset: h.DataOffset}
	for range h.KVs {
		key, err := g.str()
		if err != nil {
			return nil, err
		}
		t, err := g.u32()
		if err != nil {
			return nil, err
		}
		start := g.off
		var raw bytes.Buffer
		g.rec = &raw
		err = g.skipValue(t)
		g.rec = nil
		if err != nil {
			return nil, fmt.Errorf("reading key-value %q: %w", key, err)
		}
		if uint64(raw.Len()) != g.off-start {
			return nil, fmt.Errorf("reading key-value %q: recorded %d bytes of %d", key, raw.Len(), g.off-start)
		}
		out.KVs = append(out.KVs, ggufKV{Key: key, Type: t, Raw: raw.Bytes()})
	}
	for range h.Tensors {
		var ti ggufTensor
		if ti.Name, err = g.str(); err != nil {
			return nil, err
		}
		nd, err := g.u32()
		if err != nil {
			return nil, err
		}
		ti.Dims = make([]uint64, nd)
		for d := range ti.Dims {
			if ti.Dims[d], err = g.u64(); err != nil {
				return nil, err
			}
		}
		if ti.Type, err = g.u32(); err != nil {
			return nil, err
		}
		if ti.Offset, err = g.u64(); err != nil {
			return nil, err
		}
		ti.Size = tensorBytes(ti.Type, ti.Dims)
		out.Tensors = append(out.Tensors, ti)
	}
	return out, nil
}

// ModelInfo describes a GGUF model or slice for splitting and planning.
type ModelInfo struct {
	Path         string
	Hash         [32]byte // sha256 of the file
	Size         int64
	Architecture string
	Layers       int // block_count of this file
	NEmbd        int
	NVocab       int
	NHeadKV      int // key-value heads (for the KV cache estimate)
	NHead        int
	// Slice is set when the file is a slice: its range in the whole model,
	// and SliceOf the whole model's sha256 hex.
	Slice   *LayerRange
	SliceOf string
	// LayerBytes is the weight bytes of each layer; GlobalBytes of the rest
	// (embeddings, output norm, head).
	LayerBytes  []uint64
	GlobalBytes map[string]uint64
	TiedOutput  bool // no output.weight: the head reuses token_embd
}

// LayerRange is the layers [From, To) of a model of Of layers.
type LayerRange struct{ From, To, Of int }

func (r LayerRange) String() string { return fmt.Sprintf("[%d,%d) of %d", r.From, r.To, r.Of) }

// Inspect reads the GGUF file at path and describes it.
func Inspect(path string) (*ModelInfo, error) {
	g, err := readGGUFFile(path)
	if err != nil {
		return nil, err
	}
	sum, size, err := hashFile(path)
	if err != nil {
		return nil, err
	}
	info, err := describe(g)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	info.Path, info.Hash, info.Size = path, sum, size
	return info, nil
}

// describe reads the facts splitting needs out of g.
func describe(g *ggufFile) (*ModelInfo, error) {
	arch, err := g.str("general.architecture")
	if err != nil {
		return nil, err
	}
	info := &ModelInfo{Architecture: arch, GlobalBytes: map[string]uint64{}}
	n, err := g.uint(arch + ".block_count")
	if err != nil {
		return nil, err
	}
	if n == 0 || n > 1<<16 {
		return nil, fmt.Errorf("%s.block_count %d: want 1..65536", arch, n)
	}
	info.Layers = int(n)
	if e, err := g.uint(arch + ".embedding_length"); err == nil && e > 0 && e < 1<<24 {
		info.NEmbd = int(e)
	} else {
		return nil, fmt.Errorf("the model has no usable %s.embedding_length", arch)
	}
	info.NHead = int(g.uintOr(arch+".attention.head_count", 0))
	info.NHeadKV = int(g.uintOr(arch+".attention.head_count_kv", uint64(info.NHead)))
	if v := g.kv("tokenizer.ggml.tokens"); v != nil && v.Type == ggufArray && len(v.Raw) >= 12 {
		info.NVocab = int(binary.LittleEndian.Uint64(v.Raw[4:12]))
	} else {
		info.NVocab = int(g.uintOr(arch+".vocab_size", 0))
	}
	info.LayerBytes = make([]uint64, info.Layers)
	for _, t := range g.Tensors {
		if l, _, ok := blockTensor(t.Name); ok {
			if l >= info.Layers {
				return nil, fmt.Errorf("tensor %s is beyond the %d layers", t.Name, info.Layers)
			}
			info.LayerBytes[l] += t.Size
		} else {
			info.GlobalBytes[t.Name] += t.Size
		}
	}
	info.TiedOutput = g.tensor("output.weight") == nil
	if from, err := g.uint(sliceKeyFrom); err == nil {
		to, _ := g.uint(sliceKeyTo)
		of, _ := g.uint(sliceKeyLayers)
		info.Slice = &LayerRange{From: int(from), To: int(to), Of: int(of)}
		info.SliceOf, _ = g.str(sliceKeyModel)
		if info.Slice.To-info.Slice.From != info.Layers || info.Slice.To > info.Slice.Of {
			return nil, fmt.Errorf("slice metadata %v does not match its %d layers", info.Slice, info.Layers)
		}
	}
	return info, nil
}

// uintOr is an integer key's value, or def where it is absent or not one.
func (g *ggufFile) uintOr(key string, def uint64) uint64 {
	if v, err := g.uint(key); err == nil {
		return v
	}
	return def
}

// blockTensor splits "blk.<i>.<rest>".
func blockTensor(name string) (layer int, rest string, ok bool) {
	s, found := strings.CutPrefix(name, "blk.")
	if !found {
		return 0, "", false
	}
	num, rest, found := strings.Cut(s, ".")
	if !found {
		return 0, "", false
	}
	l, err := strconv.Atoi(num)
	if err != nil || l < 0 || strconv.Itoa(l) != num {
		return 0, "", false
	}
	return l, rest, true
}

// hashFile is the sha256 and size of the file at path.
func hashFile(path string) ([32]byte, int64, error) {
	var sum [32]byte
	f, err := os.Open(path)
	if err != nil {
		return sum, 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return sum, 0, fmt.Errorf("reading %s: %w", path, err)
	}
	copy(sum[:], h.Sum(nil))
	return sum, n, nil
}

// Cuts turns a stage count and optional cut points into layer ranges of a
// model of layers layers. Without cut points the layers are shared as
// evenly as possible, earlier stages taking the remainder.
func Cuts(layers, stages int, at []int) ([]LayerRange, error) {
	if layers < 1 {
		return nil, fmt.Errorf("the model has %d layers", layers)
	}
	if stages < 2 || stages > layers {
		return nil, fmt.Errorf("%d stages: want 2..%d (one layer per stage at least)", stages, layers)
	}
	if len(at) == 0 {
		c := 0
		for s := range stages - 1 {
			c += layers / stages
			if s < layers%stages {
				c++
			}
			at = append(at, c)
		}
	}
	if len(at) != stages-1 {
		return nil, fmt.Errorf("%d cut points for %d stages: want %d", len(at), stages, stages-1)
	}
	var out []LayerRange
	from := 0
	for _, c := range at {
		if c <= from || c >= layers {
			return nil, fmt.Errorf("cut points %v: want strictly increasing layers between 1 and %d", at, layers-1)
		}
		out = append(out, LayerRange{From: from, To: c, Of: layers})
		from = c
	}
	return append(out, LayerRange{From: from, To: layers, Of: layers}), nil
}

// SliceFile is one written slice.
type SliceFile struct {
	Path  string
	Range LayerRange
	Hash  [32]byte
	Size  int64
}

// WriteSlices cuts the model at path into one file per range in dir,
// named <model base>.<from>-<to>.gguf, and returns them in stage order.
// The model's architecture must be in SplitArchitectures.
func WriteSlices(path, dir string, ranges []LayerRange) ([]SliceFile, error) {
	g, err := readGGUFFile(path)
	if err != nil {
		return nil, err
	}
	info, err := describe(g)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if info.Slice != nil {
		return nil, fmt.Errorf("%s is already a slice (layers %v); split the whole model", path, info.Slice)
	}
	if !slices.Contains(SplitArchitectures, info.Architecture) {
		return nil, fmt.Errorf("architecture %q is not proven exact when split by layers (proven: %s); it is refused until a whole-versus-split equality test covers it", info.Architecture, strings.Join(SplitArchitectures, ", "))
	}
	if err := checkRanges(ranges, info.Layers); err != nil {
		return nil, err
	}
	sum, _, err := hashFile(path)
	if err != nil {
		return nil, err
	}
	src, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	base := strings.TrimSuffix(filepath.Base(path), ".gguf")
	var out []SliceFile
	for _, r := range ranges {
		name := filepath.Join(dir, fmt.Sprintf("%s.%d-%d.gguf", base, r.From, r.To))
		sf, err := writeSlice(g, info, hex.EncodeToString(sum[:]), src, name, r)
		if err != nil {
			return nil, fmt.Errorf("writing slice %v: %w", r, err)
		}
		out = append(out, sf)
	}
	return out, nil
}

// checkRanges verifies that ranges cover 0..layers exactly once, in order.
func checkRanges(ranges []LayerRange, layers int) error {
	if len(ranges) < 2 {
		return fmt.Errorf("%d stages: a split needs 2 or more", len(ranges))
	}
	next := 0
	for i, r := range ranges {
		switch {
		case r.Of != layers:
			return fmt.Errorf("stage %d is a range of a %d-layer model, this one has %d", i, r.Of, layers)
		case r.From < next:
			return fmt.Errorf("stage %d (layers %d..%d) overlaps the layers before it (up to %d)", i, r.From, r.To-1, next-1)
		case r.From > next:
			return fmt.Errorf("stage %d starts at layer %d: layers %d..%d are missing", i, r.From, next, r.From-1)
		case r.To <= r.From:
			return fmt.Errorf("stage %d has no layers (%d..%d)", i, r.From, r.To)
		}
		next = r.To
	}
	if next != layers {
		return fmt.Errorf("the stages end at layer %d: layers %d..%d are missing", next, next, layers-1)
	}
	return nil
}

// writeSlice writes the slice r of g (read from src) to name.
func writeSlice(g *ggufFile, info *ModelInfo, modelHex string, src io.ReaderAt, name string, r LayerRange) (SliceFile, error) {
	first, last := r.From == 0, r.To == r.Of
	middle := !first && !last
	arch := info.Architecture
	// Metadata.
	var kvs []ggufKV
	for _, kv := range g.KVs {
		switch {
		case kv.Key == arch+".block_count":
			kv.Raw = putUint(kv.Type, uint64(r.To-r.From))
		case strings.HasPrefix(kv.Key, sliceKeyFrom[:len("ogpu.slice.")]):
			continue
		case middle && (strings.HasPrefix(kv.Key, "tokenizer.") || kv.Key == arch+".vocab_size"):
			continue
		case strings.HasPrefix(kv.Key, arch+".") && kv.Type == ggufArray:
			sliced, ok := sliceLayerArray(kv.Raw, info.Layers, r)
			if !ok {
				return SliceFile{}, fmt.Errorf("per-layer array %s cannot be sliced", kv.Key)
			}
			kv.Raw = sliced
		}
		kvs = append(kvs, kv)
	}
	if middle {
		kvs = append(kvs,
			ggufKV{Key: "tokenizer.ggml.model", Type: ggufString, Raw: rawString("none")},
			ggufKV{Key: arch + ".vocab_size", Type: ggufUint32, Raw: putUint(ggufUint32, 1)})
	}
	kvs = append(kvs,
		ggufKV{Key: sliceKeyFrom, Type: ggufUint32, Raw: putUint(ggufUint32, uint64(r.From))},
		ggufKV{Key: sliceKeyTo, Type: ggufUint32, Raw: putUint(ggufUint32, uint64(r.To))},
		ggufKV{Key: sliceKeyLayers, Type: ggufUint32, Raw: putUint(ggufUint32, uint64(r.Of))},
		ggufKV{Key: sliceKeyModel, Type: ggufString, Raw: rawString(modelHex)})

	// Tensors: source (nil for zeros) and the info to write.
	type part struct {
		info ggufTensor
		src  *ggufTensor
	}
	var parts []part
	for i := range g.Tensors {
		t := g.Tensors[i]
		out := t
		switch l, rest, isBlock := blockTensor(t.Name); {
		case isBlock:
			if l < r.From || l >= r.To {
				continue
			}
			out.Name = fmt.Sprintf("blk.%d.%s", l-r.From, rest)
		case t.Name == "output.weight":
			if !last {
				continue
			}
		case t.Name == "token_embd.weight":
			if first || last && info.TiedOutput {
				break
			}
			// A placeholder: never read by a stage fed residuals.
			out.Type, out.Dims = 1, slices.Clone(t.Dims) // F16 zeros
			if t.Dims[0]%32 == 0 {
				out.Type = 2 // Q4_0 zeros: all-zero blocks decode to 0
			}
			if middle && len(out.Dims) == 2 {
				out.Dims[1] = 1 // one dummy token
			}
			out.Size = tensorBytes(out.Type, out.Dims)
			parts = append(parts, part{info: out})
			continue
		}
		parts = append(parts, part{info: out, src: &g.Tensors[i]})
	}

	tmp, err := os.CreateTemp(filepath.Dir(name), ".slice-*")
	if err != nil {
		return SliceFile{}, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	h := sha256.New()
	w := bufio.NewWriterSize(io.MultiWriter(tmp, h), 1<<20)
	var hdr bytes.Buffer
	le := func(v any) { binary.Write(&hdr, binary.LittleEndian, v) }
	hdr.WriteString(ggufMagic)
	le(uint32(3))
	le(uint64(len(parts)))
	le(uint64(len(kvs)))
	for _, kv := range kvs {
		hdr.Write(rawString(kv.Key))
		le(kv.Type)
		hdr.Write(kv.Raw)
	}
	align := g.Alignment
	pad := func(n uint64) uint64 { return (n + align - 1) / align * align }
	var off uint64
	for i := range parts {
		p := &parts[i].info
		p.Offset = off
		hdr.Write(rawString(p.Name))
		le(uint32(len(p.Dims)))
		for _, d := range p.Dims {
			le(d)
		}
		le(p.Type)
		le(p.Offset)
		off = pad(off + p.Size)
	}
	hdr.Write(make([]byte, pad(uint64(hdr.Len()))-uint64(hdr.Len())))
	if _, err := w.Write(hdr.Bytes()); err != nil {
		return SliceFile{}, err
	}
	var written uint64
	for _, p := range parts {
		if p.src == nil {
			if _, err := io.CopyN(w, zeroReader{}, int64(p.info.Size)); err != nil {
				return SliceFile{}, err
			}
		} else {
			sr := io.NewSectionReader(src, int64(g.DataOffset+p.src.Offset), int64(p.src.Size))
			if n, err := io.Copy(w, sr); err != nil || uint64(n) != p.src.Size {
				return SliceFile{}, fmt.Errorf("copying tensor %s: %d of %d bytes: %v", p.src.Name, n, p.src.Size, err)
			}
		}
		written += p.info.Size
		if z := pad(written) - written; z > 0 {
			w.Write(make([]byte, z))
			written += z
		}
	}
	if err := w.Flush(); err != nil {
		return SliceFile{}, err
	}
	if err := tmp.Chmod(0o644); err != nil {
		return SliceFile{}, err
	}
	if err := tmp.Close(); err != nil {
		return SliceFile{}, err
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return SliceFile{}, err
	}
	sf := SliceFile{Path: name, Range: r, Size: int64(uint64(hdr.Len()) + written)}
	copy(sf.Hash[:], h.Sum(nil))
	return sf, nil
}

// rawString is a GGUF string: u64 length and bytes.
func rawString(s string) []byte {
	return append(binary.LittleEndian.AppendUint64(nil, uint64(len(s))), s...)
}

// sliceLayerArray slices an encoded array of scalars whose length is the
// layer count; other arrays are returned unchanged.
func sliceLayerArray(raw []byte, layers int, r LayerRange) ([]byte, bool) {
	if len(raw) < 12 {
		return nil, false
	}
	et, n := binary.LittleEndian.Uint32(raw), binary.LittleEndian.Uint64(raw[4:12])
	if n != uint64(layers) {
		return raw, true
	}
	sz, ok := ggufScalarSize[et]
	if !ok {
		return nil, false // a per-layer array of strings: not seen in any model
	}
	out := binary.LittleEndian.AppendUint32(nil, et)
	out = binary.LittleEndian.AppendUint64(out, uint64(r.To-r.From))
	return append(out, raw[12+uint64(r.From)*sz:12+uint64(r.To)*sz]...), true
}

// zeroReader reads zeros.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// errNotSlice marks a file without slice metadata.
var errNotSlice = errors.New("not a slice: it has no ogpu.slice.* metadata; cut one with `ogpu model split`")
