package llm

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// SplitManifest describes a model cut into stage slices: what a split job
// names and what a provider checks its slice against. Its JSON is the
// manifest file `ogpu model split` writes next to the slices.
type SplitManifest struct {
	Version      int    `json:"version"` // 1
	Model        string `json:"model"`   // sha256 hex of the whole model (its blob id)
	ModelSize    int64  `json:"model_size"`
	Architecture string `json:"architecture"`
	Layers       int    `json:"layers"`
	NEmbd        int    `json:"n_embd"`
	NVocab       int    `json:"n_vocab"`
	// Class is the determinism class family every stage runs in: split
	// runs are bit-identical to whole runs of this llama.cpp build, with
	// f32 residuals between stages. A job adds backend, threads, batch and
	// sampler (Model.Class).
	Class  string          `json:"class"`
	Stages []ManifestStage `json:"stages"`
}

// ManifestStage is one slice.
type ManifestStage struct {
	From  int    `json:"from"` // first layer
	To    int    `json:"to"`   // one past the last
	Slice string `json:"slice"`
	Size  int64  `json:"size"`
	File  string `json:"file,omitempty"` // base name where it was written
}

// SplitManifestVersion is the manifest format written here.
const SplitManifestVersion = 1

// splitClass is the manifest's class family.
func splitClass(arch string) string { return Version + "/" + arch + "/split-f32" }

// NewSplitManifest describes the slices of the whole model info.
func NewSplitManifest(whole *ModelInfo, slices []SliceFile) *SplitManifest {
	m := &SplitManifest{
		Version: SplitManifestVersion, Model: hex.EncodeToString(whole.Hash[:]), ModelSize: whole.Size,
		Architecture: whole.Architecture, Layers: whole.Layers, NEmbd: whole.NEmbd, NVocab: whole.NVocab,
		Class: splitClass(whole.Architecture),
	}
	for _, s := range slices {
		m.Stages = append(m.Stages, ManifestStage{From: s.Range.From, To: s.Range.To,
			Slice: hex.EncodeToString(s.Hash[:]), Size: s.Size, File: filepath.Base(s.Path)})
	}
	return m
}

// Validate checks the manifest on its own: every field present, hashes of
// the right form, stages covering the layers exactly once in order.
func (m *SplitManifest) Validate() error {
	hash := func(what, h string) error {
		if b, err := hex.DecodeString(h); err != nil || len(b) != 32 {
			return fmt.Errorf("manifest: %s %q is not a 64-digit sha256 hex", what, h)
		}
		return nil
	}
	switch {
	case m.Version != SplitManifestVersion:
		return fmt.Errorf("manifest: version %d, this build reads %d", m.Version, SplitManifestVersion)
	case !slices.Contains(SplitArchitectures, m.Architecture):
		return fmt.Errorf("manifest: architecture %q is not proven exact when split (proven: %v)", m.Architecture, SplitArchitectures)
	case m.Layers < 2 || m.NEmbd < 1 || m.NVocab < 1:
		return fmt.Errorf("manifest: %d layers, n_embd %d, n_vocab %d: want at least 2, 1, 1", m.Layers, m.NEmbd, m.NVocab)
	case m.Class != splitClass(m.Architecture):
		return fmt.Errorf("manifest: class %q, this build runs %q", m.Class, splitClass(m.Architecture))
	}
	if err := hash("model", m.Model); err != nil {
		return err
	}
	var ranges []LayerRange
	seen := map[string]bool{}
	for i, s := range m.Stages {
		if err := hash(fmt.Sprintf("stage %d slice", i), s.Slice); err != nil {
			return err
		}
		if seen[s.Slice] {
			return fmt.Errorf("manifest: stage %d has the same slice as an earlier stage", i)
		}
		seen[s.Slice] = true
		if s.Size <= 0 {
			return fmt.Errorf("manifest: stage %d has size %d", i, s.Size)
		}
		ranges = append(ranges, LayerRange{From: s.From, To: s.To, Of: m.Layers})
	}
	if err := checkRanges(ranges, m.Layers); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	return nil
}

// ReadSplitManifest reads and validates a manifest file; unknown fields
// are refused.
func ReadSplitManifest(path string) (*SplitManifest, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m SplitManifest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s is not a split manifest: %w", path, err)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &m, nil
}

// Write writes the manifest as indented JSON.
func (m *SplitManifest) Write(path string) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ErrSliceMismatch is a slice file that is not the manifest's slice.
var ErrSliceMismatch = errors.New("slice does not match the manifest")

// CheckSlice verifies that the file at path is stage's slice: its sha256
// and its layer range. A provider runs it before loading a slice.
func (m *SplitManifest) CheckSlice(path string, stage int) (*ModelInfo, error) {
	if stage < 0 || stage >= len(m.Stages) {
		return nil, fmt.Errorf("stage %d: the manifest has %d", stage, len(m.Stages))
	}
	want := m.Stages[stage]
	info, err := Inspect(path)
	if err != nil {
		return nil, err
	}
	if got := hex.EncodeToString(info.Hash[:]); got != want.Slice {
		return nil, fmt.Errorf("%w: %s has sha256 %s, stage %d's slice is %s; download it again", ErrSliceMismatch, path, got, stage, want.Slice)
	}
	if info.Slice == nil || info.Slice.From != want.From || info.Slice.To != want.To || info.Slice.Of != m.Layers {
		return nil, fmt.Errorf("%w: %s holds layers %v, stage %d is [%d,%d) of %d", ErrSliceMismatch, path, info.Slice, stage, want.From, want.To, m.Layers)
	}
	return info, nil
}

// StageMemory estimates what llama.cpp allocates to run layers r of a
// model described by info with contextSize tokens and batch rows: the
// weights (mapped from the file), the KV cache (f16 K and V per layer) and
// the output buffer (logits and embeddings per batch row; a middle stage
// has a one-token vocabulary).
type StageMemory struct {
	Weights uint64 `json:"weights"`
	KV      uint64 `json:"kv_cache"`
	Output  uint64 `json:"output"`
	Total   uint64 `json:"total"`
}

// EstimateStageMemory estimates the memory of stage r of the whole model
// info (see StageMemory).
// For a slice file's own info (info.Slice set), r is ignored: the file's
// tensors are what it maps.
func EstimateStageMemory(info *ModelInfo, r LayerRange, contextSize, batch int) StageMemory {
	var m StageMemory
	if info.Slice != nil {
		r = LayerRange{From: 0, To: info.Layers, Of: info.Layers}
		for _, b := range info.LayerBytes {
			m.Weights += b
		}
		for _, b := range info.GlobalBytes {
			m.Weights += b
		}
		return m.finish(info, r, contextSize, batch, uint64(info.NVocab))
	}
	for l := r.From; l < r.To; l++ {
		m.Weights += info.LayerBytes[l]
	}
	first, last := r.From == 0, r.To == r.Of
	for name, b := range info.GlobalBytes {
		switch {
		case name == "output.weight" && !last:
		case name == "token_embd.weight" && !first && !(last && info.TiedOutput):
			m.Weights += placeholderBytes(info.NEmbd, info.NVocab, !last)
		default:
			m.Weights += b
		}
	}
	vocab := uint64(info.NVocab)
	if !first && !last {
		vocab = 1
	}
	return m.finish(info, r, contextSize, batch, vocab)
}

func (m StageMemory) finish(info *ModelInfo, r LayerRange, contextSize, batch int, vocab uint64) StageMemory {
	kvWidth := uint64(info.NEmbd)
	if info.NHead > 0 && info.NHeadKV > 0 {
		kvWidth = kvWidth * uint64(info.NHeadKV) / uint64(info.NHead)
	}
	m.KV = 2 * 2 * uint64(r.To-r.From) * uint64(contextSize) * kvWidth
	m.Output = uint64(batch) * (vocab + uint64(info.NEmbd)) * 4
	m.Total = m.Weights + m.KV + m.Output
	return m
}

// placeholderBytes is the size of the zero token_embd a slice carries where
// it never reads it: Q4_0 (F16 where a row is not whole blocks), one token
// wide on a middle stage (writeSlice).
func placeholderBytes(nEmbd, nVocab int, middle bool) uint64 {
	if middle {
		nVocab = 1
	}
	if nEmbd%32 == 0 {
		return uint64(nEmbd/32*18) * uint64(nVocab)
	}
	return uint64(nEmbd*2) * uint64(nVocab)
}

// Hashes are the model's and the slices' sha256 (the manifest must have
// passed Validate).
func (m *SplitManifest) Hashes() (model [32]byte, slices [][32]byte) {
	dec := func(s string) (h [32]byte) {
		b, _ := hex.DecodeString(s)
		copy(h[:], b)
		return h
	}
	for _, s := range m.Stages {
		slices = append(slices, dec(s.Slice))
	}
	return dec(m.Model), slices
}
