package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/types"
)

// Defaults of the zero Config fields.
const (
	DefaultListen          = "127.0.0.1:8080"
	DefaultMaxTokens       = 128
	DefaultMaxConcurrent   = 4
	DefaultRetryWindow     = 2 * time.Minute
	DefaultMaxRequestBytes = 1 << 20
	DefaultBodyTimeout     = 30 * time.Second
	DefaultWriteTimeout    = 30 * time.Second
	// DefaultRetryAfter is the Retry-After of a 429 at the concurrency cap.
	DefaultRetryAfter = 2 * time.Second
)

// DefaultMaxPerRequest and DefaultBudgetPerDay are the spending caps of a
// zero Config.
var (
	DefaultMaxPerRequest = types.OGPU(50)
	DefaultBudgetPerDay  = types.OGPU(500)
)

// Config is what ogpu gateway starts with: a plain literal (flags and
// config.toml fill it), checked by Validate.
type Config struct {
	// Listen is the TCP address to serve on (DefaultListen: loopback).
	Listen string
	// KeyFile holds the API key clients send as "Authorization: Bearer
	// KEY"; it is created (mode 0600) on first start. Required.
	KeyFile string
	// AllowedHosts are host names accepted in the Host header besides
	// localhost, 127.0.0.1 and [::1] (any port), e.g. the machine's name
	// when Listen is not loopback.
	AllowedHosts []string
	// CORSOrigins are browser origins (scheme://host[:port]) allowed to
	// call the API; none by default, and then no CORS header is sent.
	CORSOrigins []string
	// Models name models: an alias for a sha256, optionally with the local
	// GGUF file (its chat template, context and tokenizer).
	Models []ModelConfig
	// DefaultMaxTokens is max_tokens when a request gives none.
	DefaultMaxTokens uint64
	// ContextLength is the providers' context in tokens
	// (llm.DefaultContextSize, what ogpud provider run loads models with);
	// a model's own training context lowers it.
	ContextLength uint64
	// MaxPerRequest caps what one request may cost at worst (everything
	// it locks plus the transaction fee); BudgetPerDay caps what all
	// requests of one UTC day may cost, persisted in LedgerFile.
	MaxPerRequest *uint256.Int
	BudgetPerDay  *uint256.Int
	// LedgerFile persists the day's spending. Required.
	LedgerFile string
	// MaxConcurrent bounds requests in flight; beyond it: 429.
	MaxConcurrent int
	// RetryWindow is how long after it ended a posted request is answered
	// again, not re-run, for a retry of the same request.
	RetryWindow time.Duration
	// MaxRequestBytes bounds a request body.
	MaxRequestBytes int64
	// BodyTimeout bounds reading a request body (a client that sends its
	// headers and then trickles or withholds the body gets 408);
	// WriteTimeout bounds each write of an answer (a client that stops
	// reading is cut off once the connection's buffers are full). The
	// work behind a request goes on either way, and a retry with the same
	// Idempotency-Key gets its answer.
	BodyTimeout  time.Duration
	WriteTimeout time.Duration
	Logger       *slog.Logger
	// Wrap, if set, wraps the gateway's handler in Serve (the metrics
	// middleware).
	Wrap func(http.Handler) http.Handler
	// OnSpent, if set, is told every amount the ledger counts as spent:
	// requests' actual costs and fees outside requests (metrics; it must
	// not block).
	OnSpent func(amount *uint256.Int)
}

// ModelConfig names a model for clients.
type ModelConfig struct {
	// Name is what clients pass as "model".
	Name string
	// Model is the model's sha256 as "sha256:<hex>" (or bare hex).
	Model string
	// File is the model's GGUF file, optional: its header gives the chat
	// template and context, its vocabulary counts prompt tokens. The
	// client's blob store is looked at too.
	File string
	// Template is "" (the GGUF's tokenizer.chat_template, else plain),
	// "plain" (contents joined by newlines), or a llama.cpp template name
	// (llm.ChatTemplates, e.g. chatml, llama3).
	Template string
}

// TemplatePlain is the fallback chat rendering: message contents joined by
// "\n", no roles.
const TemplatePlain = "plain"

func (c Config) withDefaults() Config {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.DefaultMaxTokens == 0 {
		c.DefaultMaxTokens = DefaultMaxTokens
	}
	if c.ContextLength == 0 {
		c.ContextLength = llm.DefaultContextSize
	}
	if c.MaxPerRequest == nil {
		c.MaxPerRequest = DefaultMaxPerRequest
	}
	if c.BudgetPerDay == nil {
		c.BudgetPerDay = DefaultBudgetPerDay
	}
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = DefaultMaxConcurrent
	}
	if c.RetryWindow == 0 {
		c.RetryWindow = DefaultRetryWindow
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.BodyTimeout == 0 {
		c.BodyTimeout = DefaultBodyTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate checks c with defaults applied; each error names the setting.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if _, port, err := net.SplitHostPort(c.Listen); err != nil || port == "" {
		errs = append(errs, fmt.Errorf("listen %q: want host:port, e.g. %s", c.Listen, DefaultListen))
	}
	if c.KeyFile == "" {
		errs = append(errs, errors.New("key file: required (ogpu gateway uses HOME/gateway.key)"))
	}
	if c.LedgerFile == "" {
		errs = append(errs, errors.New("ledger file: required (ogpu gateway uses HOME/gateway-ledger.json)"))
	}
	for _, h := range c.AllowedHosts {
		if h == "" || strings.ContainsAny(h, "/ :") && !strings.HasPrefix(h, "[") {
			errs = append(errs, fmt.Errorf("allowed host %q: want a host name or address without port or scheme", h))
		}
	}
	for _, o := range c.CORSOrigins {
		if o == "*" || !strings.HasPrefix(o, "http://") && !strings.HasPrefix(o, "https://") {
			errs = append(errs, fmt.Errorf("CORS origin %q: want scheme://host[:port] (no wildcard: the API spends money)", o))
		}
	}
	names := map[string]bool{}
	for i, m := range c.Models {
		switch {
		case m.Name == "" || strings.HasPrefix(m.Name, "sha256:"):
			errs = append(errs, fmt.Errorf("model %d: name %q: want a name that is not sha256:…", i, m.Name))
		case names[m.Name]:
			errs = append(errs, fmt.Errorf("model %q is named twice", m.Name))
		}
		names[m.Name] = true
		if m.Model == "" && m.File == "" {
			errs = append(errs, fmt.Errorf("model %q: give its sha256 or its GGUF file", m.Name))
		}
		if m.Model != "" {
			if _, err := ParseModelHash(m.Model); err != nil {
				errs = append(errs, fmt.Errorf("model %q: %w", m.Name, err))
			}
		}
		if err := checkTemplateName(m.Template); err != nil {
			errs = append(errs, fmt.Errorf("model %q: %w", m.Name, err))
		}
	}
	if c.MaxPerRequest.IsZero() {
		errs = append(errs, errors.New("max per request: must be more than 0"))
	}
	if c.BudgetPerDay.IsZero() {
		errs = append(errs, errors.New("budget per day: must be more than 0"))
	}
	if c.MaxConcurrent < 1 || c.MaxConcurrent > 1024 {
		errs = append(errs, fmt.Errorf("max concurrent %d: want 1..1024", c.MaxConcurrent))
	}
	if c.RetryWindow < 0 {
		errs = append(errs, fmt.Errorf("retry window %s: want a duration of 0 or more", c.RetryWindow))
	}
	if c.ContextLength < 16 {
		errs = append(errs, fmt.Errorf("context length %d: want 16 or more tokens", c.ContextLength))
	}
	if c.DefaultMaxTokens >= c.ContextLength {
		errs = append(errs, fmt.Errorf("default max tokens %d: want less than the context length %d", c.DefaultMaxTokens, c.ContextLength))
	}
	if c.BodyTimeout < 0 || c.WriteTimeout < 0 {
		errs = append(errs, fmt.Errorf("body timeout %s, write timeout %s: want durations of 0 (the default) or more", c.BodyTimeout, c.WriteTimeout))
	}
	if c.MaxRequestBytes < 1024 {
		errs = append(errs, fmt.Errorf("max request bytes %d: want 1024 or more", c.MaxRequestBytes))
	}
	return errors.Join(errs...)
}

func checkTemplateName(t string) error {
	switch t {
	case "", TemplatePlain:
		return nil
	}
	for _, n := range llm.ChatTemplates() {
		if n == t {
			return nil
		}
	}
	return fmt.Errorf("template %q: want empty (the model's own), %q or one of llama.cpp's: %s", t, TemplatePlain, strings.Join(llm.ChatTemplates(), ", "))
}

// ParseModelHash reads "sha256:<hex>", "0x<hex>" or bare 64-digit hex.
func ParseModelHash(s string) (types.Hash, error) {
	h := strings.TrimPrefix(s, "sha256:")
	h = strings.TrimPrefix(h, "0x")
	var out types.Hash
	if len(h) != 64 {
		return out, fmt.Errorf("model %q: want sha256:<64 hex digits>", s)
	}
	for i := 0; i < 32; i++ {
		hi, ok1 := unhex(h[2*i])
		lo, ok2 := unhex(h[2*i+1])
		if !ok1 || !ok2 {
			return out, fmt.Errorf("model %q: want sha256:<64 hex digits>", s)
		}
		out[i] = hi<<4 | lo
	}
	return out, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// modelID is how a model without an alias is named: sha256:<hex>.
func modelID(h types.Hash) string { return fmt.Sprintf("sha256:%x", h[:]) }

// ParseModelSpecs reads the models a gateway serves, each NAME=sha256:HEX,
// NAME=FILE.gguf or FILE.gguf (named after the file), and template
// overrides NAME=TEMPLATE for names among them.
func ParseModelSpecs(models, templates []string) ([]ModelConfig, error) {
	var out []ModelConfig
	index := map[string]int{}
	for _, s := range models {
		name, ref, ok := strings.Cut(s, "=")
		if !ok {
			ref, name = s, strings.TrimSuffix(filepath.Base(s), ".gguf")
		}
		mc := ModelConfig{Name: name}
		if _, err := ParseModelHash(ref); err == nil && strings.HasPrefix(ref, "sha256:") {
			mc.Model = ref
		} else if st, err := os.Stat(ref); err == nil && !st.IsDir() {
			mc.File = ref
		} else {
			return nil, fmt.Errorf("--model %q: want NAME=sha256:HEX, NAME=FILE.gguf or FILE.gguf (%s is neither a hash nor a file)", s, ref)
		}
		index[name] = len(out)
		out = append(out, mc)
	}
	for _, s := range templates {
		name, tmpl, ok := strings.Cut(s, "=")
		i, known := index[name]
		if !ok || !known {
			return nil, fmt.Errorf("--template %q: want NAME=TEMPLATE for a NAME given with --model", s)
		}
		out[i].Template = tmpl
	}
	return out, nil
}
