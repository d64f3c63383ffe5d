package llm

import (
	"fmt"

	"github.com/ollama/ollama/llama"
)

// Vocab is a model's tokenizer without its weights or a context: what a
// split job's client needs to turn its prompt into stage 0's tokens and the
// last stage's tokens into text. Load it from the whole model or from stage
// 0's slice (middle slices carry no vocabulary).
type Vocab struct {
	lm     *llama.Model
	pieces []string
	eog    []bool
}

// LoadVocab loads the vocabulary of the GGUF file at path.
func LoadVocab(path string) (*Vocab, error) {
	info, err := Inspect(path)
	if err != nil {
		return nil, err
	}
	if info.NVocab <= 1 {
		return nil, fmt.Errorf("%s has no vocabulary (a middle slice): load the whole model or stage 0's slice", path)
	}
	if err := initBackend(); err != nil {
		return nil, err
	}
	loadMu.Lock()
	defer loadMu.Unlock()
	takeLogErrors()
	lm, err := llama.LoadModelFromFile(path, llama.ModelParams{VocabOnly: true, UseMmap: true})
	if err != nil {
		return nil, loadError("cannot load the vocabulary of "+path, err)
	}
	v := &Vocab{lm: lm, pieces: make([]string, lm.NumVocab()), eog: make([]bool, lm.NumVocab())}
	for t := range v.pieces {
		v.pieces[t], v.eog[t] = lm.TokenToPiece(t), lm.TokenIsEog(t)
	}
	return v, nil
}

// Close frees the vocabulary; Piece, Detokenize and IsEOG still work.
func (v *Vocab) Close() {
	loadMu.Lock()
	defer loadMu.Unlock()
	if v.lm != nil {
		llama.FreeModel(v.lm)
		v.lm = nil
	}
}

// NumVocab is the vocabulary size.
func (v *Vocab) NumVocab() int { return len(v.pieces) }

// Tokenize converts text as Model.Tokenize does.
func (v *Vocab) Tokenize(text string) ([]int, error) {
	loadMu.Lock()
	defer loadMu.Unlock()
	if v.lm == nil {
		return nil, ErrClosed
	}
	toks, err := v.lm.Tokenize(text, true, false)
	if err != nil {
		return nil, fmt.Errorf("cannot tokenize: %w", err)
	}
	return toks, nil
}

// Piece is the text of tok, "" outside the vocabulary.
func (v *Vocab) Piece(tok int) string {
	if tok < 0 || tok >= len(v.pieces) {
		return ""
	}
	return v.pieces[tok]
}

// IsEOG reports whether tok ends generation.
func (v *Vocab) IsEOG(tok int) bool { return tok >= 0 && tok < len(v.eog) && v.eog[tok] }

// Detokenize concatenates the pieces of tokens.
func (v *Vocab) Detokenize(tokens []int) string {
	var b []byte
	for _, t := range tokens {
		b = append(b, v.Piece(t)...)
	}
	return string(b)
}
