package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/types"
)

// models knows the models clients may name: aliases from the config,
// sha256 ids, and what a local GGUF file says about each (chat template,
// context, tokenizer).
type models struct {
	chain  *node.Client
	store  *blobstore.Store // the client's store: models it holds are read from it
	ctxLen uint64
	log    *slog.Logger

	mu     sync.Mutex
	byName map[string]types.Hash
	byHash map[types.Hash]*model
	// lastServed is the last answer of served, and when it came.
	lastServed   map[types.Hash]int
	lastServedAt time.Time
}

// servedFresh is how long a positive answer of served is trusted for a
// request's admission (the backend checks the providers again).
const servedFresh = time.Second

// isServed reports whether a provider serves h: a positive answer up to
// servedFresh old is reused (the query reads every provider record, and
// it is on the path to the first token); a negative one is asked again.
func (ms *models) isServed(ctx context.Context, h types.Hash) (bool, error) {
	ms.mu.Lock()
	fresh := time.Since(ms.lastServedAt) < servedFresh && ms.lastServed[h] > 0
	ms.mu.Unlock()
	if fresh {
		return true, nil
	}
	n, err := ms.served(ctx)
	if err != nil {
		return false, err
	}
	return n[h] > 0, nil
}

// model is one model hash and what the gateway knows of it.
type model struct {
	Hash  types.Hash
	Names []string
	Size  uint64 // 0 if unknown
	file  string
	tmpl  string // configured template ("" : the model's own)

	once    sync.Once
	meta    *llm.ChatMeta // nil without a local file
	vocabMu sync.Mutex
	vocab   *llm.Vocab
	noVocab bool // loading it failed: count with the bound
	warned  bool
}

func newModels(cfg Config, c *node.Client, store *blobstore.Store) (*models, error) {
	ms := &models{chain: c, store: store, ctxLen: cfg.ContextLength, log: cfg.Logger,
		byName: map[string]types.Hash{}, byHash: map[types.Hash]*model{}}
	for _, mc := range cfg.Models {
		var h types.Hash
		var size uint64
		if mc.File != "" {
			fh, n, err := blobstore.HashFile(mc.File)
			if err != nil {
				return nil, fmt.Errorf("model %q: %w", mc.Name, err)
			}
			h, size = fh, n
			if mc.Model != "" {
				want, _ := ParseModelHash(mc.Model)
				if want != fh {
					return nil, fmt.Errorf("model %q: file %s has sha256 %x, not %s", mc.Name, mc.File, fh[:], mc.Model)
				}
			}
		} else {
			h, _ = ParseModelHash(mc.Model)
		}
		m := ms.byHash[h]
		if m == nil {
			m = &model{Hash: h}
			ms.byHash[h] = m
		}
		m.Names = append(m.Names, mc.Name)
		if mc.File != "" {
			m.file, m.Size = mc.File, size
		}
		if mc.Template != "" {
			m.tmpl = mc.Template
		}
		ms.byName[mc.Name] = h
	}
	return ms, nil
}

func notFound(name, why string) *Error {
	return &Error{Status: http.StatusNotFound, Type: TypeInvalidRequest, Code: CodeModelNotFound, Param: "model",
		Message: fmt.Sprintf("the model %q does not exist: %s (GET /v1/models lists the models providers serve)", name, why)}
}

// resolve finds the model a request names: an alias or sha256:<hex>.
func (ms *models) resolve(name string) (*model, error) {
	if name == "" {
		return nil, invalid("model", CodeInvalidValue, "model is required (GET /v1/models lists the models providers serve)")
	}
	ms.mu.Lock()
	defer ms.mu.Unlock()
	h, ok := ms.byName[name]
	if !ok {
		if !strings.HasPrefix(name, "sha256:") {
			return nil, notFound(name, "it is neither a configured name nor sha256:<hex>")
		}
		var err error
		if h, err = ParseModelHash(name); err != nil {
			return nil, notFound(name, err.Error())
		}
	}
	m := ms.byHash[h]
	if m == nil {
		m = &model{Hash: h}
		ms.byHash[h] = m
	}
	return m, nil
}

// load reads what a local file says of m, once: the configured file, else
// the client's blob store if it holds the model.
func (ms *models) load(m *model) {
	m.once.Do(func() {
		path := m.file
		if path == "" && ms.store != nil && ms.store.Has(m.Hash) {
			p, err := ms.store.Path(m.Hash)
			if err != nil {
				return
			}
			path = p
			if st, err := os.Stat(p); err == nil {
				m.Size = uint64(st.Size())
			}
		}
		if path == "" {
			return
		}
		meta, err := llm.ReadChatMeta(path)
		if err != nil {
			ms.log.Warn("cannot read the model's header: chats are rendered plain", "model", modelID(m.Hash), "err", err)
			return
		}
		m.file, m.meta = path, meta
	})
}

// contextLength is the providers' context, lowered to the model's
// training context where the gateway knows it.
func (ms *models) contextLength(m *model) uint64 {
	ms.load(m)
	if m.meta != nil && m.meta.ContextLength > 0 {
		return min(ms.ctxLen, m.meta.ContextLength)
	}
	return ms.ctxLen
}

// templateName says how chats for m are rendered: a configured template,
// "gguf" (the model's own, recognised by llama.cpp), or "plain".
func (ms *models) templateName(m *model) string {
	ms.load(m)
	switch {
	case m.tmpl != "":
		return m.tmpl
	case m.meta != nil && m.meta.ChatTemplate != "":
		return "gguf"
	}
	return TemplatePlain
}

// render turns a chat into m's raw prompt. It returns the prompt and how
// it was rendered ("plain", a template name, or "gguf").
func (ms *models) render(m *model, msgs []llm.ChatMessage) (string, string, error) {
	name := ms.templateName(m)
	switch name {
	case TemplatePlain:
		return renderPlain(msgs), name, nil
	case "gguf":
		p, err := llm.ApplyChatTemplate(m.meta.ChatTemplate, msgs, true)
		if errors.Is(err, llm.ErrUnknownChatTemplate) {
			ms.mu.Lock()
			warn := !m.warned
			m.warned = true
			ms.mu.Unlock()
			if warn {
				ms.log.Warn("llama.cpp does not recognise the model's chat template: rendering chats plain; name one of llama.cpp's templates for it in the config",
					"model", modelID(m.Hash), "known", strings.Join(llm.ChatTemplates(), ","))
			}
			return renderPlain(msgs), TemplatePlain, nil
		}
		return p, name, err
	default:
		p, err := llm.ApplyChatTemplate(name, msgs, true)
		return p, name, err
	}
}

// renderPlain is the fallback for models without a chat template (such as
// stories260K, a base model): the message contents joined by "\n", no
// roles, so that one user message is exactly the prompt.
func renderPlain(msgs []llm.ChatMessage) string {
	parts := make([]string, len(msgs))
	for i, m := range msgs {
		parts[i] = m.Content
	}
	return strings.Join(parts, "\n")
}

// countTokens is prompt's length in m's tokens, exact when the gateway
// has the model's vocabulary, else agent.PromptTokenBound (exact false).
func (ms *models) countTokens(m *model, prompt string) (uint64, bool) {
	ms.load(m)
	if m.file == "" {
		return agent.PromptTokenBound(prompt), false
	}
	m.vocabMu.Lock()
	defer m.vocabMu.Unlock()
	if m.noVocab {
		return agent.PromptTokenBound(prompt), false
	}
	if m.vocab == nil {
		v, err := llm.LoadVocab(m.file)
		if err != nil {
			ms.log.Warn("cannot load the model's vocabulary: declaring a bound on prompt tokens", "model", modelID(m.Hash), "err", err)
			m.noVocab = true
			return agent.PromptTokenBound(prompt), false
		}
		m.vocab = v
	}
	toks, err := m.vocab.Tokenize(prompt)
	if err != nil || len(toks) == 0 {
		return agent.PromptTokenBound(prompt), false
	}
	return uint64(len(toks)), true
}

func (ms *models) close() {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	for _, m := range ms.byHash {
		m.vocabMu.Lock()
		if m.vocab != nil {
			m.vocab.Close()
			m.vocab = nil
		}
		m.vocabMu.Unlock()
	}
}

// servable reports whether a provider may run LLM jobs at all (registered,
// not jailed or tombstoned, offering llama.cpp).
func servable(p *market.Provider) bool {
	return p != nil && !p.Jailed && !p.Tombstoned && slices.Contains(p.Runtimes, agent.Runtime)
}

// served counts, per model, the providers that can serve it now.
func (ms *models) served(ctx context.Context) (map[types.Hash]int, error) {
	provs, err := ms.chain.Providers(ctx)
	if err != nil {
		return nil, err
	}
	n := map[types.Hash]int{}
	for _, p := range provs {
		if !servable(p.Provider) {
			continue
		}
		for _, h := range p.Models {
			n[h]++
		}
	}
	ms.mu.Lock()
	ms.lastServed, ms.lastServedAt = n, time.Now()
	ms.mu.Unlock()
	return n, nil
}

// list is GET /v1/models: every model at least one provider serves, named
// by its first alias (else sha256:<hex>), sorted by id.
func (ms *models) list(ctx context.Context) (*modelList, error) {
	n, err := ms.served(ctx)
	if err != nil {
		return nil, err
	}
	out := &modelList{Object: "list", Data: []modelEntry{}}
	for h, count := range n {
		ms.mu.Lock()
		m := ms.byHash[h]
		if m == nil {
			m = &model{Hash: h}
			ms.byHash[h] = m
		}
		ms.mu.Unlock()
		ms.load(m)
		e := modelEntry{ID: modelID(h), Object: "model", OwnedBy: "ogpu", ContextLength: ms.contextLength(m),
			Ogpu: modelOgpu{Hash: modelID(h), Names: m.Names, Providers: count, Template: ms.templateName(m)}}
		if len(m.Names) > 0 {
			e.ID = m.Names[0]
		}
		if m.meta != nil {
			e.Ogpu.Name = m.meta.Name
		}
		out.Data = append(out.Data, e)
	}
	slices.SortFunc(out.Data, func(a, b modelEntry) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}
