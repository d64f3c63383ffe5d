package llm

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// SplitPlan describes a model and, for a cut, each stage's layers and
// memory next to the whole model's: what `ogpu model inspect` and
// `ogpu model split` print.
type SplitPlan struct {
	Model        string      `json:"model"`
	SHA256       string      `json:"sha256"`
	Architecture string      `json:"architecture"`
	Layers       int         `json:"layers"`
	NEmbd        int         `json:"n_embd"`
	NVocab       int         `json:"n_vocab"`
	Whole        StageMemory `json:"whole_memory"`
	Manifest     string      `json:"manifest,omitempty"`
	Stages       []StagePlan `json:"stages,omitempty"`
	ContextSize  int         `json:"context_size"`
	BatchSize    int         `json:"batch_size"`
}

// StagePlan is one stage of a SplitPlan; Slice, File and Size are set once
// the slice is written.
type StagePlan struct {
	Stage  int         `json:"stage"`
	From   int         `json:"from"`
	To     int         `json:"to"`
	Slice  string      `json:"slice,omitempty"`
	File   string      `json:"file,omitempty"`
	Size   int64       `json:"size,omitempty"`
	Memory StageMemory `json:"memory"`
}

// PlanCut describes info cut into stages (evenly) or at the cut points at;
// with neither, only the whole model.
func PlanCut(info *ModelInfo, stages int, at []int, contextSize, batch int) (*SplitPlan, error) {
	p := &SplitPlan{Model: info.Path, SHA256: fmt.Sprintf("%x", info.Hash), Architecture: info.Architecture,
		Layers: info.Layers, NEmbd: info.NEmbd, NVocab: info.NVocab, ContextSize: contextSize, BatchSize: batch,
		Whole: EstimateStageMemory(info, LayerRange{From: 0, To: info.Layers, Of: info.Layers}, contextSize, batch)}
	if stages == 0 && len(at) == 0 {
		return p, nil
	}
	if stages == 0 {
		stages = len(at) + 1
	}
	ranges, err := Cuts(info.Layers, stages, at)
	if err != nil {
		return nil, err
	}
	for i, r := range ranges {
		p.Stages = append(p.Stages, StagePlan{Stage: i, From: r.From, To: r.To, Memory: EstimateStageMemory(info, r, contextSize, batch)})
	}
	return p, nil
}

// Ranges are the plan's stages as layer ranges.
func (p *SplitPlan) Ranges() []LayerRange {
	var out []LayerRange
	for _, s := range p.Stages {
		out = append(out, LayerRange{From: s.From, To: s.To, Of: p.Layers})
	}
	return out
}

// ParseCuts reads cut points written as "2,4" ("" is none).
func ParseCuts(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var at []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("cut points %q: %q is not a layer number", s, f)
		}
		at = append(at, n)
	}
	return at, nil
}

// IsGGUF reports whether the file at path starts with the GGUF magic.
func IsGGUF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var b [4]byte
	_, err = io.ReadFull(f, b[:])
	return err == nil && string(b[:]) == ggufMagic
}

// Write cuts the model file at the plan's stages into dir (created if
// missing), writes the manifest <model>.split-<K>.json beside the slices
// and fills in each stage's file, slice hash and size.
func (p *SplitPlan) Write(dir string) (*SplitManifest, error) {
	if len(p.Stages) == 0 {
		return nil, errors.New("the plan has no stages: say how to cut (stages or cut points)")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	info, err := Inspect(p.Model)
	if err != nil {
		return nil, err
	}
	files, err := WriteSlices(p.Model, dir, p.Ranges())
	if err != nil {
		return nil, err
	}
	m := NewSplitManifest(info, files)
	p.Manifest = filepath.Join(dir, fmt.Sprintf("%s.split-%d.json", strings.TrimSuffix(filepath.Base(p.Model), ".gguf"), len(files)))
	if err := m.Write(p.Manifest); err != nil {
		return nil, err
	}
	for i := range p.Stages {
		p.Stages[i].File, p.Stages[i].Slice, p.Stages[i].Size = files[i].Path, m.Stages[i].Slice, files[i].Size
	}
	return m, nil
}
