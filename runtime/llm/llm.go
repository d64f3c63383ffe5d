// Package llm runs GGUF language models with llama.cpp (through the cgo
// bindings of github.com/ollama/ollama v0.9.6) so that replicas agree exactly:
// fixed threads and batch size, greedy decoding by an argmax computed here,
// or sampling with a fixed seed. Verify checks a claimed greedy output with
// one teacher-forced batched pass, much cheaper than generating it.
package llm

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/ollama/ollama/llama"
)

// Version names the llama.cpp build this package runs; it is part of every
// determinism class.
const Version = "llama.cpp/ollama-v0.9.6"

// Defaults for zero Options fields.
const (
	DefaultBatchSize   = 512
	DefaultContextSize = 2048
)

// ErrClosed is returned by a Model after Close.
var ErrClosed = errors.New("llm: model is closed")

// DefaultThreads is min(4, runtime.NumCPU()), a thread count to put in
// Options.Threads. Replicas in one determinism class use the same count, so it
// is not applied implicitly.
func DefaultThreads() int { return min(4, runtime.NumCPU()) }

// Options configures a loaded model. They fix the computation: replicas that
// must agree use equal Threads and BatchSize (see Model.Class).
type Options struct {
	Threads     int // CPU threads; required, > 0 (see DefaultThreads)
	BatchSize   int // logical batch for prompt and verification decodes; 0 means 512
	ContextSize int // tokens of context (prompt + generated); 0 means 2048
	GPULayers   int // layers offloaded to a GPU backend; 0 means CPU only
}

// withDefaults returns o with defaults applied, or a field-specific error.
func (o Options) withDefaults() (Options, error) {
	if o.Threads <= 0 {
		return o, fmt.Errorf("options: threads %d: want > 0 (fixed for determinism; DefaultThreads() gives %d here)", o.Threads, DefaultThreads())
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.ContextSize == 0 {
		o.ContextSize = DefaultContextSize
	}
	switch {
	case o.BatchSize < 1:
		return o, fmt.Errorf("options: batch size %d: want > 0", o.BatchSize)
	case o.ContextSize < 1:
		return o, fmt.Errorf("options: context size %d: want > 0", o.ContextSize)
	case o.BatchSize > o.ContextSize:
		return o, fmt.Errorf("options: batch size %d exceeds the context size %d", o.BatchSize, o.ContextSize)
	case o.GPULayers < 0:
		return o, fmt.Errorf("options: gpu layers %d: want >= 0", o.GPULayers)
	}
	return o, nil
}

var (
	backendOnce sync.Once
	backendErr  error
	// loadMu serializes loads so that llama.cpp's error log belongs to one.
	loadMu sync.Mutex
)

// initBackend initializes llama.cpp once per process and takes over its log.
func initBackend() error {
	backendOnce.Do(func() {
		if backendErr = checkContextLayout(); backendErr != nil {
			return
		}
		setLogCallback()
		llama.BackendInit()
	})
	return backendErr
}

// Model is a loaded model with one llama.cpp context. It is safe for
// concurrent use; generations and verifications run one at a time.
type Model struct {
	path    string
	opts    Options
	nVocab  int
	backend string   // "cpu", "cpu+<features>" or the GPU backend's name
	pieces  []string // text of each token, read once at load
	eog     []bool   // whether each token ends generation

	life sync.RWMutex // held for reading while in use, for writing by Close
	lm   *llama.Model // nil after Close

	run   sync.Mutex // serializes use of lctx and batch
	lctx  *llama.Context
	batch *llama.Batch
}

// Load validates the GGUF file at path and loads it with llama.cpp.
func Load(path string, o Options) (*Model, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	if _, err := checkGGUF(path); err != nil {
		return nil, err
	}
	if err := initBackend(); err != nil {
		return nil, err
	}
	if err := CheckCPU(); err != nil {
		return nil, err
	}
	loadMu.Lock()
	defer loadMu.Unlock()
	takeLogErrors()
	lm, err := llama.LoadModelFromFile(path, llama.ModelParams{NumGpuLayers: o.GPULayers, UseMmap: true})
	if err != nil {
		return nil, loadError("cannot load model "+path, err)
	}
	m := &Model{path: path, opts: o, lm: lm, nVocab: lm.NumVocab(), backend: "cpu"}
	m.pieces, m.eog = make([]string, m.nVocab), make([]bool, m.nVocab)
	for t := range m.nVocab {
		m.pieces[t], m.eog[t] = lm.TokenToPiece(t), lm.TokenIsEog(t)
	}
	if b := gpuBackend(); o.GPULayers > 0 && b != "" {
		m.backend = b
	} else if f := cpuFeatures(); len(f) > 0 {
		m.backend = "cpu+" + strings.Join(f, "+")
	}
	cp := llama.NewContextParams(o.ContextSize, o.BatchSize, 1, o.Threads, false, "")
	if m.lctx, err = llama.NewContextWithModel(lm, cp); err != nil {
		llama.FreeModel(lm)
		return nil, loadError("cannot create a llama.cpp context for "+path, err)
	}
	if err := checkContext(m.lctx, lm); err != nil {
		// The context pointer cannot be trusted, so the context leaks.
		llama.FreeModel(lm)
		return nil, err
	}
	if n := contextSize(m.lctx); n < o.ContextSize {
		m.free()
		return nil, fmt.Errorf("llama.cpp allocated a context of %d tokens, want %d", n, o.ContextSize)
	}
	if m.batch, err = llama.NewBatch(o.BatchSize, 1, 0); err != nil {
		m.free()
		return nil, fmt.Errorf("cannot allocate a batch of %d tokens: %w", o.BatchSize, err)
	}
	return m, nil
}

// loadError explains a failed load with what llama.cpp logged as errors, or
// with err where it logged none.
func loadError(what string, err error) error {
	if msg := takeLogErrors(); msg != "" {
		return fmt.Errorf("%s: llama.cpp: %s", what, strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", "; ")), " "))
	}
	return fmt.Errorf("%s: %w", what, err)
}

// free releases the C resources.
func (m *Model) free() {
	if m.lctx != nil {
		freeContext(m.lctx)
		m.lctx = nil
	}
	if m.batch != nil {
		m.batch.Free()
		m.batch = nil
	}
	if m.lm != nil {
		llama.FreeModel(m.lm)
		m.lm = nil
	}
}

// Close releases the model. It waits for a running generation to finish;
// later calls return ErrClosed.
func (m *Model) Close() {
	m.life.Lock()
	defer m.life.Unlock()
	m.free()
}

// acquire locks m for use; it fails after Close.
func (m *Model) acquire() error {
	m.life.RLock()
	if m.lm == nil {
		m.life.RUnlock()
		return ErrClosed
	}
	return nil
}

func (m *Model) release() { m.life.RUnlock() }

// Path is the model file's path.
func (m *Model) Path() string { return m.path }

// Options are the options the model was loaded with, defaults applied.
func (m *Model) Options() Options { return m.opts }

// NumVocab is the vocabulary size; token ids are 0..NumVocab()-1.
func (m *Model) NumVocab() int { return m.nVocab }

// validToken reports whether tok is a token id of the vocabulary.
func (m *Model) validToken(tok int) bool { return tok >= 0 && tok < m.nVocab }

// Tokenize converts text to tokens, with the beginning-of-sequence token if
// the model wants one. Special-token text such as "</s>" is not parsed.
func (m *Model) Tokenize(text string) ([]int, error) {
	if err := m.acquire(); err != nil {
		return nil, err
	}
	defer m.release()
	toks, err := m.lm.Tokenize(text, true, false)
	if err != nil {
		return nil, fmt.Errorf("cannot tokenize: %w", err)
	}
	return toks, nil
}

// Piece is the text of token tok (control tokens render as their text, such
// as "</s>"); "" for an id outside the vocabulary. Piece, Detokenize and
// IsEOG read tables made at load: they never block and work after Close.
func (m *Model) Piece(tok int) string {
	if !m.validToken(tok) {
		return ""
	}
	return m.pieces[tok]
}

// Detokenize concatenates the pieces of tokens, skipping ids outside the
// vocabulary. Pieces are bytes: a character may span several tokens.
func (m *Model) Detokenize(tokens []int) string {
	var b []byte
	for _, t := range tokens {
		b = append(b, m.Piece(t)...)
	}
	return string(b)
}

// IsEOG reports whether tok ends generation (end of sequence, end of turn).
func (m *Model) IsEOG(tok int) bool { return m.validToken(tok) && m.eog[tok] }
