package llm

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/ollama/ollama/llama"
)

// A Stage runs one slice of a split model (slice.go): stage 0 takes tokens,
// later stages take the f32 residual the stage before sent, fed through
// llama_batch.embd; a non-final stage returns the residual after its last
// layer ("l_out-<n-1>", copied out by a cb_eval callback that then ends the
// graph), the final stage the logits and the greedy token. Positions are
// global, each session has its own KV cache holding only the stage's
// layers, and prompts are decoded in BatchSize chunks as Model.Generate
// decodes them. On CPU the result is bit-identical to the whole model's
// (TestSplitEqualsWhole), so a split generation is in the whole model's
// determinism class.
type Stage struct {
	path   string
	opts   Options
	info   *ModelInfo
	rng    LayerRange
	nVocab int

	life sync.RWMutex
	lm   *llama.Model // nil after Close
}

// LoadStage loads a slice written by WriteSlices (or a whole model, which
// is the single stage [0, n)).
func LoadStage(path string, o Options) (*Stage, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	info, err := Inspect(path)
	if err != nil {
		return nil, err
	}
	rng := LayerRange{From: 0, To: info.Layers, Of: info.Layers}
	if info.Slice != nil {
		rng = *info.Slice
	}
	if err := initBackend(); err != nil {
		return nil, err
	}
	if err := CheckCPU(); err != nil {
		return nil, err
	}
	if o.GPULayers > 0 {
		return nil, errors.New("split stages run on the CPU backend only: the residual capture ends only the current backend split (llm-split.md §8)")
	}
	loadMu.Lock()
	defer loadMu.Unlock()
	takeLogErrors()
	lm, err := llama.LoadModelFromFile(path, llama.ModelParams{UseMmap: true})
	if err != nil {
		return nil, loadError("cannot load stage "+path, err)
	}
	if lm.NEmbd() != info.NEmbd {
		llama.FreeModel(lm)
		return nil, fmt.Errorf("llama.cpp reads n_embd %d from %s, the header says %d", lm.NEmbd(), path, info.NEmbd)
	}
	return &Stage{path: path, opts: o, info: info, rng: rng, lm: lm, nVocab: lm.NumVocab()}, nil
}

// Range is the layers the stage holds.
func (s *Stage) Range() LayerRange { return s.rng }

// First reports whether the stage takes tokens; Last whether it returns
// logits.
func (s *Stage) First() bool { return s.rng.From == 0 }
func (s *Stage) Last() bool  { return s.rng.To == s.rng.Of }

// NEmbd is the width of a residual row.
func (s *Stage) NEmbd() int { return s.info.NEmbd }

// NumVocab is the vocabulary size (1 on a middle stage: it has none).
func (s *Stage) NumVocab() int { return s.nVocab }

// Info describes the loaded file.
func (s *Stage) Info() *ModelInfo { return s.info }

// Options are the load options, defaults applied.
func (s *Stage) Options() Options { return s.opts }

// Class is the determinism class of the stage: the same string as a whole
// model's (Model.Class) with the same options, because split runs are
// bit-identical to whole runs.
func (s *Stage) Class(sm Sampler) string { return CPUClass(s.opts, sm) }

// CPUClass is the determinism class of CPU runs (whole or split) of this
// build with options o and sampler sm, without loading a model.
func CPUClass(o Options, sm Sampler) string {
	o, _ = o.withDefaults()
	backend := "cpu"
	if err := initBackend(); err == nil {
		if f := cpuFeatures(); len(f) > 0 {
			backend = "cpu+" + strings.Join(f, "+")
		}
	}
	return classOf(backend, o, sm)
}

// Close releases the stage; open sessions must be closed first.
func (s *Stage) Close() {
	s.life.Lock()
	defer s.life.Unlock()
	if s.lm != nil {
		llama.FreeModel(s.lm)
		s.lm = nil
	}
}

// Session is one sequence through a stage: its own llama context and KV
// cache. Not safe for concurrent use.
type Session struct {
	st    *Stage
	lctx  *llama.Context
	batch *llama.Batch
	cap   *capture // non-final stages
	next  int      // the next position expected
}

// StageOutput is what one Forward produced.
type StageOutput struct {
	// Rows is n×NEmbd residual floats (non-final stages).
	Rows []float32
	// Logits are the last row's logits and Token their argmax (lowest id
	// on ties), on the final stage.
	Logits []float32
	Token  int
}

// NewSession opens a session with an empty KV cache at position 0.
func (s *Stage) NewSession() (*Session, error) {
	s.life.RLock()
	defer s.life.RUnlock()
	if s.lm == nil {
		return nil, ErrClosed
	}
	o := s.opts
	cp := llama.NewContextParams(o.ContextSize, o.BatchSize, 1, o.Threads, false, "")
	if err := checkParamsMirror(&cp, o.ContextSize, o.BatchSize, o.Threads); err != nil {
		return nil, err
	}
	ss := &Session{st: s}
	if !s.Last() {
		c, err := newCapture(fmt.Sprintf("l_out-%d", s.rng.To-s.rng.From-1))
		if err != nil {
			return nil, err
		}
		ss.cap = c
		setCapture(&cp, c)
	}
	lctx, err := llama.NewContextWithModel(s.lm, cp)
	if err != nil {
		ss.free()
		return nil, loadError("cannot create a llama.cpp context for stage "+s.path, err)
	}
	if err := checkContext(lctx, s.lm); err != nil {
		ss.free()
		return nil, err
	}
	ss.lctx = lctx
	if n := contextSize(lctx); n < o.ContextSize {
		ss.free()
		return nil, fmt.Errorf("llama.cpp allocated a context of %d tokens, want %d", n, o.ContextSize)
	}
	embd := 0
	if !s.First() {
		embd = s.info.NEmbd
	}
	if ss.batch, err = llama.NewBatch(o.BatchSize, 1, embd); err != nil {
		ss.free()
		return nil, fmt.Errorf("cannot allocate a batch of %d rows: %w", o.BatchSize, err)
	}
	return ss, nil
}

func (ss *Session) free() {
	if ss.lctx != nil {
		freeContext(ss.lctx)
		ss.lctx = nil
	}
	if ss.batch != nil {
		ss.batch.Free()
		ss.batch = nil
	}
	if ss.cap != nil {
		ss.cap.free()
		ss.cap = nil
	}
}

// Close releases the session.
func (ss *Session) Close() { ss.free() }

// Next is the position the next Forward must start at.
func (ss *Session) Next() int { return ss.next }

// Reset empties the KV cache: the next Forward starts at position 0.
func (ss *Session) Reset() {
	if ss.lctx != nil {
		ss.lctx.KvCacheClear()
	}
	ss.next = 0
}

// Forward runs positions pos0 .. pos0+n-1: tokens (stage 0) or n×NEmbd rows
// (later stages) in. pos0 must be Next(): a session is one sequence, and a
// gap or a repeat would make its KV cache differ from every replica's. It
// decodes in BatchSize chunks (a prompt arrives whole and is chunked as
// Model.Generate chunks it). Inputs are checked before llama.cpp sees them:
// tokens in the vocabulary, rows of the stage's width, all finite.
func (ss *Session) Forward(pos0 int, tokens []int, rows []float32) (*StageOutput, error) {
	st := ss.st
	st.life.RLock()
	defer st.life.RUnlock()
	if st.lm == nil || ss.lctx == nil {
		return nil, ErrClosed
	}
	w := st.info.NEmbd
	var n int
	if st.First() {
		if rows != nil {
			return nil, errors.New("stage 0 takes tokens, not residual rows")
		}
		n = len(tokens)
		for i, t := range tokens {
			if t < 0 || t >= st.nVocab {
				return nil, fmt.Errorf("token %d is %d, outside the vocabulary of %d", i, t, st.nVocab)
			}
		}
	} else {
		if tokens != nil {
			return nil, fmt.Errorf("stage %v takes residual rows, not tokens", st.rng)
		}
		if len(rows)%w != 0 {
			return nil, fmt.Errorf("%d floats are not whole rows of width %d", len(rows), w)
		}
		n = len(rows) / w
		for i, x := range rows {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return nil, fmt.Errorf("row %d column %d is %v: residuals must be finite", i/w, i%w, x)
			}
		}
	}
	switch {
	case n == 0:
		return nil, errors.New("nothing to forward: no rows")
	case pos0 != ss.next:
		return nil, fmt.Errorf("position %d: the session is at %d (reset it to start again)", pos0, ss.next)
	case pos0+n > st.opts.ContextSize:
		return nil, fmt.Errorf("positions %d..%d exceed the context size %d", pos0, pos0+n-1, st.opts.ContextSize)
	}
	out := &StageOutput{}
	bs := st.opts.BatchSize
	for start := 0; start < n; {
		// Chunk at multiples of BatchSize from position 0, as
		// Model.decodePrompt does.
		end := min(n, start+bs-(pos0+start)%bs)
		ss.batch.Clear()
		for i := start; i < end; i++ {
			// Non-final stages need every row as an output: llama.cpp
			// prunes the last layer to the output rows otherwise.
			want := !st.Last() || i == n-1
			if st.First() {
				ss.batch.Add(tokens[i], nil, pos0+i, want, 0)
			} else {
				ss.batch.Add(0, rows[i*w:(i+1)*w], pos0+i, want, 0)
			}
		}
		if ss.cap != nil {
			ss.cap.reset()
		}
		if err := ss.decode(); err != nil {
			return nil, fmt.Errorf("cannot decode positions %d..%d: %w", pos0+start, pos0+end-1, err)
		}
		if ss.cap != nil {
			r, err := ss.cap.rows(end-start, w)
			if err != nil {
				return nil, err
			}
			out.Rows = append(out.Rows, r...)
		}
		start = end
	}
	ss.next = pos0 + n
	if st.Last() {
		logits, err := logitsAt(ss.lctx, ss.batch.NumTokens()-1, st.nVocab)
		if err != nil {
			return nil, err
		}
		out.Logits = append([]float32(nil), logits...)
		out.Token = argmax(out.Logits)
	}
	return out, nil
}

func (ss *Session) decode() error {
	decodeMu.Lock()
	defer decodeMu.Unlock()
	return ss.lctx.Decode(ss.batch)
}
