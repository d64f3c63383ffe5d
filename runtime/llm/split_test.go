package llm

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// splitModel writes the slices of stories260K at cuts into a temp dir.
func splitModel(t testing.TB, at ...int) []SliceFile {
	t.Helper()
	info, err := Inspect(modelPath(t))
	if err != nil {
		t.Fatal(err)
	}
	ranges, err := Cuts(info.Layers, len(at)+1, at)
	if err != nil {
		t.Fatal(err)
	}
	out, err := WriteSlices(modelPath(t), t.TempDir(), ranges)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// loadStages loads every slice with o.
func loadStages(t testing.TB, files []SliceFile, o Options) []*Stage {
	t.Helper()
	var st []*Stage
	for _, f := range files {
		s, err := LoadStage(f.Path, o)
		if err != nil {
			t.Fatalf("loading %s: %v", f.Path, err)
		}
		t.Cleanup(s.Close)
		st = append(st, s)
	}
	return st
}

// pipeline is an in-process split generation: the prompt through every
// stage, then one token at a time, greedy, to maxTokens or an end token.
type pipeline struct {
	sessions []*Session
	hops     [][]float32 // every residual each non-final stage sent, in order
}

func newPipeline(t testing.TB, stages []*Stage) *pipeline {
	t.Helper()
	p := &pipeline{hops: make([][]float32, len(stages)-1)}
	for _, s := range stages {
		ss, err := s.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ss.Close)
		p.sessions = append(p.sessions, ss)
	}
	return p
}

// step runs tokens at pos0 through every stage and returns the last
// stage's output.
func (p *pipeline) step(pos0 int, tokens []int) (*StageOutput, error) {
	var rows []float32
	for i, ss := range p.sessions {
		var out *StageOutput
		var err error
		if i == 0 {
			out, err = ss.Forward(pos0, tokens, nil)
		} else {
			out, err = ss.Forward(pos0, nil, rows)
		}
		if err != nil {
			return nil, fmt.Errorf("stage %d: %w", i, err)
		}
		if i == len(p.sessions)-1 {
			return out, nil
		}
		rows = out.Rows
		p.hops[i] = append(p.hops[i], rows...)
	}
	panic("unreachable")
}

func (p *pipeline) generate(prompt []int, maxTokens int, eog func(int) bool) ([]int, []float32, error) {
	out, err := p.step(0, prompt)
	if err != nil {
		return nil, nil, err
	}
	var toks []int
	for pos := len(prompt); ; pos++ {
		toks = append(toks, out.Token)
		if eog(out.Token) || len(toks) == maxTokens {
			return toks, out.Logits, nil
		}
		if out, err = p.step(pos, []int{out.Token}); err != nil {
			return toks, nil, err
		}
	}
}

// TestSplitEqualsWhole: the tokens of a split generation equal the whole
// model's, token for token, for every cut point of stories260K, for three
// and five stages, and with chunked prefill (batch 2); the last logits are
// bit-identical.
func TestSplitEqualsWhole(t *testing.T) {
	const maxTokens = 40
	for _, batch := range []int{0, 2} {
		o := testOptions
		o.BatchSize = batch
		whole := loadModel(t, o)
		want := greedy(t, whole, maxTokens)
		// The whole model as one stage: same tokens as Model.Generate,
		// and the logits of its last step to compare bits with.
		one, err := LoadStage(modelPath(t), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(one.Close)
		oneToks, wantLogits, err := newPipeline(t, []*Stage{one}).generate(want.PromptTokens, maxTokens, whole.IsEOG)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(oneToks, want.Tokens) {
			t.Fatalf("the whole model as one stage gave %v, Generate %v", oneToks, want.Tokens)
		}
		for _, at := range [][]int{{1}, {2}, {3}, {4}, {2, 4}, {1, 2, 3, 4}} {
			t.Run(fmt.Sprintf("batch%d/cuts%v", batch, at), func(t *testing.T) {
				stages := loadStages(t, splitModel(t, at...), o)
				p := newPipeline(t, stages)
				got, logits, err := p.generate(want.PromptTokens, maxTokens, whole.IsEOG)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want.Tokens) {
					t.Fatalf("split tokens differ from the whole model's:\n got %v\nwant %v", got, want.Tokens)
				}
				if whole.Detokenize(got) != whole.Detokenize(want.Tokens) {
					t.Fatal("texts differ")
				}
				if len(logits) != len(wantLogits) {
					t.Fatalf("%d logits, want %d", len(logits), len(wantLogits))
				}
				for i := range logits {
					if math.Float32bits(logits[i]) != math.Float32bits(wantLogits[i]) {
						t.Fatalf("last-step logit %d: %v, whole %v: not bit-identical", i, logits[i], wantLogits[i])
					}
				}
				for i, h := range p.hops {
					if len(h) != (len(want.PromptTokens)+len(want.Tokens)-1)*stages[0].NEmbd() {
						t.Fatalf("hop %d carried %d floats", i, len(h))
					}
				}
			})
		}
	}
}

// TestSplitResidualsBitIdentical: the residual a stage sends at a cut is
// the same bits whichever way the model is cut before it, and a two-stage
// split's last logits equal a one-process run of the same split.
func TestSplitResidualsBitIdentical(t *testing.T) {
	o := testOptions
	whole := loadModel(t, o)
	prompt, err := whole.Tokenize(prompt)
	if err != nil {
		t.Fatal(err)
	}
	// The residual after layer 4 (cut 4) computed as [0,4)+[4,5) and as
	// [0,2)+[2,4)+[4,5): the first hop of one against the second of the
	// other.
	a := newPipeline(t, loadStages(t, splitModel(t, 4), o))
	b := newPipeline(t, loadStages(t, splitModel(t, 2, 4), o))
	ta, _, err := a.generate(prompt, 20, whole.IsEOG)
	if err != nil {
		t.Fatal(err)
	}
	tb, _, err := b.generate(prompt, 20, whole.IsEOG)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ta, tb) {
		t.Fatalf("tokens differ: %v vs %v", ta, tb)
	}
	ha, hb := a.hops[0], b.hops[1]
	if len(ha) != len(hb) || len(ha) == 0 {
		t.Fatalf("hops of %d and %d floats", len(ha), len(hb))
	}
	for i := range ha {
		if math.Float32bits(ha[i]) != math.Float32bits(hb[i]) {
			t.Fatalf("float %d: %v vs %v: residuals at the same cut are not bit-identical", i, ha[i], hb[i])
		}
	}
}

// TestSliceDeterministic: slicing twice gives the same bytes; slices hold
// only their layers and say which they are.
func TestSliceDeterministic(t *testing.T) {
	a, b := splitModel(t, 2, 4), splitModel(t, 2, 4)
	whole, err := Inspect(modelPath(t))
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for i := range a {
		if a[i].Hash != b[i].Hash || a[i].Size != b[i].Size {
			t.Fatalf("slice %d: %x (%d bytes) vs %x (%d bytes)", i, a[i].Hash, a[i].Size, b[i].Hash, b[i].Hash)
		}
		ab, _ := os.ReadFile(a[i].Path)
		bb, _ := os.ReadFile(b[i].Path)
		if !bytes.Equal(ab, bb) {
			t.Fatalf("slice %d: same hash, different bytes", i)
		}
		info, err := Inspect(a[i].Path)
		if err != nil {
			t.Fatal(err)
		}
		if info.Slice == nil || *info.Slice != a[i].Range || info.Layers != a[i].Range.To-a[i].Range.From {
			t.Fatalf("slice %d describes itself as %+v, layers %d; want %v", i, info.Slice, info.Layers, a[i].Range)
		}
		if info.Hash != a[i].Hash || info.Size != a[i].Size {
			t.Fatalf("slice %d: Inspect hash %x size %d, written %x %d", i, info.Hash, info.Size, a[i].Hash, a[i].Size)
		}
		sum += a[i].Size
	}
	if a[1].Size >= whole.Size/2 {
		t.Fatalf("middle slice is %d bytes of the whole %d: it should hold 2 of 5 layers and no vocabulary", a[1].Size, whole.Size)
	}
	t.Logf("whole %d bytes; slices %d, %d, %d", whole.Size, a[0].Size, a[1].Size, a[2].Size)
}

// TestSliceRefusals: bad cut points, an already-sliced file and an
// architecture not proven exact are refused with clear errors.
func TestSliceRefusals(t *testing.T) {
	for _, c := range []struct {
		layers, stages int
		at             []int
		want           string
	}{
		{5, 1, nil, "want 2..5"},
		{5, 6, nil, "want 2..5"},
		{5, 3, []int{2}, "1 cut points for 3 stages"},
		{5, 3, []int{3, 2}, "strictly increasing"},
		{5, 2, []int{5}, "strictly increasing"},
		{5, 2, []int{0}, "strictly increasing"},
	} {
		if _, err := Cuts(c.layers, c.stages, c.at); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Cuts(%d, %d, %v) = %v, want %q", c.layers, c.stages, c.at, err, c.want)
		}
	}
	if r, err := Cuts(5, 3, nil); err != nil || fmt.Sprint(r) != "[[0,2) of 5 [2,4) of 5 [4,5) of 5]" {
		t.Errorf("Cuts(5, 3) = %v, %v", r, err)
	}
	for _, c := range []struct {
		ranges []LayerRange
		want   string
	}{
		{[]LayerRange{{0, 3, 5}, {2, 5, 5}}, "overlaps"},
		{[]LayerRange{{0, 2, 5}, {3, 5, 5}}, "layers 2..2 are missing"},
		{[]LayerRange{{0, 2, 5}, {2, 4, 5}}, "layers 4..4 are missing"},
		{[]LayerRange{{0, 2, 6}, {2, 6, 6}}, "6-layer model"},
		{[]LayerRange{{0, 5, 5}}, "2 or more"},
	} {
		if _, err := WriteSlices(modelPath(t), t.TempDir(), c.ranges); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("WriteSlices(%v) = %v, want %q", c.ranges, err, c.want)
		}
	}
	s := splitModel(t, 3)
	if _, err := WriteSlices(s[0].Path, t.TempDir(), []LayerRange{{0, 1, 3}, {1, 3, 3}}); err == nil || !strings.Contains(err.Error(), "already a slice") {
		t.Errorf("slicing a slice: %v", err)
	}
	// Another architecture: the model with general.architecture renamed.
	data, err := os.ReadFile(modelPath(t))
	if err != nil {
		t.Fatal(err)
	}
	other := bytes.ReplaceAll(data, []byte("llama"), []byte("gemma"))
	p := filepath.Join(t.TempDir(), "other.gguf")
	if err := os.WriteFile(p, other, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteSlices(p, t.TempDir(), []LayerRange{{0, 2, 5}, {2, 5, 5}}); err == nil || !strings.Contains(err.Error(), `"gemma" is not proven exact`) {
		t.Errorf("gemma: %v", err)
	}
}

// TestStageForwardRefusals: bad residual frames never reach llama.cpp.
func TestStageForwardRefusals(t *testing.T) {
	stages := loadStages(t, splitModel(t, 3), testOptions)
	first, last := stages[0], stages[1]
	fs, err := first.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	ls, err := last.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Close()
	w := last.NEmbd()
	nan := make([]float32, w)
	nan[5] = float32(math.NaN())
	inf := make([]float32, w)
	inf[0] = float32(math.Inf(1))
	for _, c := range []struct {
		name string
		f    func() error
		want string
	}{
		{"rows to stage 0", func() error { _, err := fs.Forward(0, nil, make([]float32, w)); return err }, "takes tokens"},
		{"token out of vocab", func() error { _, err := fs.Forward(0, []int{1, 99999}, nil); return err }, "outside the vocabulary"},
		{"tokens to the last stage", func() error { _, err := ls.Forward(0, []int{1}, nil); return err }, "takes residual rows"},
		{"short row", func() error { _, err := ls.Forward(0, nil, make([]float32, w+3)); return err }, "not whole rows"},
		{"NaN", func() error { _, err := ls.Forward(0, nil, nan); return err }, "must be finite"},
		{"Inf", func() error { _, err := ls.Forward(0, nil, inf); return err }, "must be finite"},
		{"empty", func() error { _, err := ls.Forward(0, nil, []float32{}); return err }, "nothing to forward"},
		{"gap", func() error { _, err := ls.Forward(3, nil, make([]float32, w)); return err }, "the session is at 0"},
		{"beyond context", func() error { _, err := ls.Forward(0, nil, make([]float32, w*600)); return err }, "exceed the context size"},
	} {
		if err := c.f(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// Nothing was consumed: a valid frame still runs at position 0.
	out, err := fs.Forward(0, []int{1, 403}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ls.Forward(0, nil, out.Rows); err != nil {
		t.Fatal(err)
	}
	if ls.Next() != 2 || fs.Next() != 2 {
		t.Fatalf("sessions at %d and %d, want 2", fs.Next(), ls.Next())
	}
}

// TestSplitManifest: a manifest names the slices; a slice whose hash does
// not match, and manifests with overlapping or missing layers, are refused.
func TestSplitManifest(t *testing.T) {
	whole, err := Inspect(modelPath(t))
	if err != nil {
		t.Fatal(err)
	}
	files := splitModel(t, 2, 4)
	m := NewSplitManifest(whole, files)
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "m.json")
	if err := m.Write(p); err != nil {
		t.Fatal(err)
	}
	back, err := ReadSplitManifest(p)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(back) != fmt.Sprint(m) {
		t.Fatalf("read back %+v, wrote %+v", back, m)
	}
	for i, f := range files {
		if _, err := m.CheckSlice(f.Path, i); err != nil {
			t.Fatalf("stage %d: %v", i, err)
		}
	}
	// Stage 1's file offered as stage 2, and a tampered slice.
	if _, err := m.CheckSlice(files[1].Path, 2); !errors.Is(err, ErrSliceMismatch) {
		t.Fatalf("wrong stage: %v", err)
	}
	data, _ := os.ReadFile(files[1].Path)
	data[len(data)-1] ^= 1
	bad := filepath.Join(t.TempDir(), "bad.gguf")
	os.WriteFile(bad, data, 0o644)
	if _, err := m.CheckSlice(bad, 1); !errors.Is(err, ErrSliceMismatch) || !strings.Contains(err.Error(), "download it again") {
		t.Fatalf("tampered slice: %v", err)
	}

	for _, c := range []struct {
		edit func(m *SplitManifest)
		want string
	}{
		{func(m *SplitManifest) { m.Stages[1].From = 1 }, "overlaps"},
		{func(m *SplitManifest) { m.Stages[1].From = 3 }, "layers 2..2 are missing"},
		{func(m *SplitManifest) { m.Stages = m.Stages[:2] }, "layers 4..4 are missing"},
		{func(m *SplitManifest) { m.Stages[2].Slice = m.Stages[0].Slice }, "same slice"},
		{func(m *SplitManifest) { m.Stages[0].Slice = "abc" }, "not a 64-digit"},
		{func(m *SplitManifest) { m.Architecture = "gemma" }, "not proven exact"},
		{func(m *SplitManifest) { m.Version = 2 }, "version 2"},
		{func(m *SplitManifest) { m.Class = "other" }, "class"},
	} {
		mm := *m
		mm.Stages = slices.Clone(m.Stages)
		c.edit(&mm)
		if err := mm.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.want, err)
		}
	}
	raw, _ := os.ReadFile(p)
	os.WriteFile(p, bytes.Replace(raw, []byte(`"version"`), []byte(`"surprise": 1, "version"`), 1), 0o644)
	if _, err := ReadSplitManifest(p); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Fatalf("unknown field: %v", err)
	}

	// Memory: each stage needs less than the whole, and the stages'
	// weights add up to about the whole's (placeholders aside).
	full := EstimateStageMemory(whole, LayerRange{0, whole.Layers, whole.Layers}, 512, 512)
	for _, f := range files {
		sm := EstimateStageMemory(whole, f.Range, 512, 512)
		if sm.Total >= full.Total || sm.Weights == 0 {
			t.Fatalf("stage %v: %+v, whole %+v", f.Range, sm, full)
		}
	}
}

// TestVocab: the vocabulary of the whole model and of stage 0's slice
// tokenize like the model; a middle slice has none.
func TestVocab(t *testing.T) {
	m := loadModel(t, testOptions)
	want, err := m.Tokenize(prompt)
	if err != nil {
		t.Fatal(err)
	}
	files := splitModel(t, 2, 4)
	for _, p := range []string{modelPath(t), files[0].Path} {
		v, err := LoadVocab(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := v.Tokenize(prompt)
		v.Close()
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("%s: %v, %v; want %v", p, got, err, want)
		}
		if v.Detokenize(got[1:]) != m.Detokenize(want[1:]) || v.NumVocab() != m.NumVocab() || !v.IsEOG(2) {
			t.Fatalf("%s: detokenize or eog differ", p)
		}
	}
	if _, err := LoadVocab(files[1].Path); err == nil || !strings.Contains(err.Error(), "no vocabulary") {
		t.Fatalf("middle slice: %v", err)
	}
	if c, s := CPUClass(testOptions, Sampler{}), m.Class(Sampler{}); c != s {
		t.Fatalf("CPUClass %q, Model.Class %q", c, s)
	}
}

// TestPlanStages: the whole model when it fits; else the fewest even
// stages that enough providers can hold; an error when nothing fits.
func TestPlanStages(t *testing.T) {
	info, err := Inspect(modelPath(t))
	if err != nil {
		t.Fatal(err)
	}
	whole := EstimateStageMemory(info, LayerRange{0, 5, 5}, 512, 512).Total
	two, _ := Cuts(5, 2, nil)
	var twoMost uint64
	for _, r := range two {
		twoMost = max(twoMost, EstimateStageMemory(info, r, 512, 512).Total)
	}
	for _, c := range []struct {
		name   string
		mems   []uint64
		stages int // 0: whole
		err    string
	}{
		{"fits whole", []uint64{whole, whole}, 0, ""},
		{"one big, one small: split", []uint64{whole, twoMost, twoMost, twoMost}, 2, ""},
		{"half fits", []uint64{twoMost, twoMost, twoMost, twoMost}, 2, ""},
		{"too few providers for 2x2", []uint64{twoMost, twoMost, twoMost}, -1, "cannot hold it"},
		{"nothing fits", []uint64{1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024}, -1, "cannot hold it"},
		{"no providers", nil, -1, "no provider"},
	} {
		r, err := PlanStages(info, c.mems, 2, 512, 512)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, %v; want %q", c.name, r, err, c.err)
			}
		case err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.stages == 0 && r != nil, c.stages > 0 && len(r) != c.stages:
			t.Errorf("%s: %v, want %d stages", c.name, r, c.stages)
		}
	}
}
