package gateway

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/types"
)

// Server is the gateway: an http.Handler over a Backend.
type Server struct {
	cfg     Config
	key     string
	backend Backend
	chain   *node.Client
	models  *models
	ledger  *ledger
	flights flights
	slots   chan struct{}
	hosts   map[string]bool
	cors    map[string]bool
	log     *slog.Logger
	now     func() time.Time

	// ctx bounds the work behind requests (it outlives the HTTP
	// exchanges: a posted job is followed to its end); Close cancels it.
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// New makes a gateway over backend. chain answers model and provider
// queries; store is the wallet client's blob store (models it holds give
// their chat template and tokenizer), or nil. The API key is read from,
// or created in, cfg.KeyFile.
func New(cfg Config, chain *node.Client, store *blobstore.Store, backend Backend) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("gateway config: %w", err)
	}
	cfg = cfg.withDefaults()
	if chain == nil || backend == nil {
		return nil, errors.New("gateway: a chain client and a backend are required")
	}
	key, created, err := LoadOrCreateKey(cfg.KeyFile)
	if err != nil {
		return nil, err
	}
	if created {
		cfg.Logger.Info("created the gateway's API key", "file", cfg.KeyFile)
	}
	now := time.Now
	l, err := openLedger(cfg.LedgerFile, cfg.MaxPerRequest, cfg.BudgetPerDay, now)
	if err != nil {
		return nil, err
	}
	l.onSpent = cfg.OnSpent
	ms, err := newModels(cfg, chain, store)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, key: key, backend: backend, chain: chain, models: ms, ledger: l,
		flights: flights{window: cfg.RetryWindow, now: now}, slots: make(chan struct{}, cfg.MaxConcurrent),
		hosts: map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true}, cors: map[string]bool{},
		log: cfg.Logger, now: now}
	for _, h := range cfg.AllowedHosts {
		s.hosts[normHost(h)] = true
	}
	for _, o := range cfg.CORSOrigins {
		s.cors[o] = true
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if sp, ok := backend.(spender); ok {
		sp.setSpend(func(amount *uint256.Int, why string) {
			s.ledger.add(amount)
			s.log.Info("spent outside a request", "amount", types.FormatAmount(amount), "for", why)
		})
	}
	return s, nil
}

// spender is a backend that spends outside requests (a session backend
// opening and closing sessions): the server counts it in the day's total.
type spender interface {
	setSpend(func(amount *uint256.Int, why string))
}

// Key is the API key clients must send.
func (s *Server) Key() string { return s.key }

// Close stops the work in flight (posted jobs go on on chain) and waits
// for it, then closes the backend if it has a Close (a session backend
// closes its sessions).
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.cancel()
		s.wg.Wait()
		if c, ok := s.backend.(interface{ Close() }); ok {
			c.Close()
		}
		s.models.close()
	})
}

// Serve answers on ln until ctx ends, then shuts down: it stops accepting,
// lets answers in progress finish for up to grace, and closes.
func (s *Server) Serve(ctx context.Context, ln net.Listener, grace time.Duration) error {
	var h http.Handler = s
	if s.cfg.Wrap != nil {
		h = s.cfg.Wrap(s)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		s.Close()
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := srv.Shutdown(sctx)
	s.Close()
	if errors.Is(err, context.DeadlineExceeded) {
		_ = srv.Close()
		err = nil
	}
	<-errc
	return err
}

// normHost lower-cases a host name, drops IPv6 brackets and a trailing dot.
func normHost(h string) string {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
}

// hostAllowed checks the Host header against the allow-list: a page on
// another site whose name is rebound to 127.0.0.1 still sends its own name.
func (s *Server) hostAllowed(host string) bool {
	if host == "" {
		return false
	}
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	return s.hosts[normHost(h)]
}

func (s *Server) authorized(r *http.Request) bool {
	auth := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(s.key)) == 1
}

// ServeHTTP checks the Host header, CORS, the key and the method, then
// routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.hostAllowed(r.Host) {
		writeError(w, &Error{Status: http.StatusForbidden, Type: TypePermission, Code: CodeHostNotAllowed,
			Message: fmt.Sprintf("Host %q is not allowed: use localhost, 127.0.0.1 or [::1], or add the name to the gateway's allowed hosts", r.Host)})
		return
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		if !s.cors[origin] {
			writeError(w, &Error{Status: http.StatusForbidden, Type: TypePermission, Code: "origin_not_allowed",
				Message: fmt.Sprintf("requests from web origin %q are not allowed (configure it as a CORS origin of the gateway)", origin)})
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
		if r.Method == http.MethodOptions {
			h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Idempotency-Key, X-Stainless-Retry-Count")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	if r.URL.Path == "/health" {
		if !s.method(w, r, http.MethodGet) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok"}`+"\n")
		return
	}
	if !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ogpu gateway"`)
		writeError(w, &Error{Status: http.StatusUnauthorized, Type: TypeAuthentication, Code: CodeInvalidAPIKey,
			Message: "missing or wrong API key: send Authorization: Bearer KEY with the key in the gateway's key file"})
		return
	}
	switch p := r.URL.Path; {
	case p == "/v1/models":
		if s.method(w, r, http.MethodGet) {
			s.handleModels(w, r, "")
		}
	case strings.HasPrefix(p, "/v1/models/"):
		if s.method(w, r, http.MethodGet) {
			s.handleModels(w, r, strings.TrimPrefix(p, "/v1/models/"))
		}
	case p == "/v1/chat/completions":
		if s.method(w, r, http.MethodPost) {
			s.handleGenerate(w, r, routeChat)
		}
	case p == "/v1/completions":
		if s.method(w, r, http.MethodPost) {
			s.handleGenerate(w, r, routeCompletion)
		}
	case strings.HasPrefix(p, "/v1/ogpu/jobs/"):
		if s.method(w, r, http.MethodGet) {
			s.handleJob(w, r, strings.TrimPrefix(p, "/v1/ogpu/jobs/"))
		}
	default:
		writeError(w, &Error{Status: http.StatusNotFound, Type: TypeInvalidRequest, Code: CodeUnknownURL,
			Message: fmt.Sprintf("unknown URL %s %s: the gateway serves GET /v1/models, POST /v1/chat/completions, POST /v1/completions, GET /v1/ogpu/jobs/{id}", r.Method, p)})
	}
}

func (s *Server) method(w http.ResponseWriter, r *http.Request, want string) bool {
	if r.Method == want {
		return true
	}
	w.Header().Set("Allow", want)
	writeError(w, &Error{Status: http.StatusMethodNotAllowed, Type: TypeInvalidRequest, Code: CodeMethodNotAllowed,
		Message: fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, want)})
	return false
}

// readJSON reads a POST body: JSON content type only (a browser form
// cannot send one without a CORS preflight), bounded in size.
func (s *Server) readJSON(w http.ResponseWriter, r *http.Request) ([]byte, *Error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return nil, &Error{Status: http.StatusUnsupportedMediaType, Type: TypeInvalidRequest, Code: CodeUnsupportedMedia,
			Message: fmt.Sprintf("Content-Type %q: send the request as application/json", r.Header.Get("Content-Type"))}
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxRequestBytes))
	if err != nil {
		// The connection is not reused: the rest of a body that stalled
		// is not waited for (the read deadline stays in the past).
		w.Header().Set("Connection", "close")
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &Error{Status: http.StatusRequestEntityTooLarge, Type: TypeInvalidRequest, Code: CodeRequestTooLarge,
				Message: fmt.Sprintf("the request body is over %d bytes", s.cfg.MaxRequestBytes)}
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, &Error{Status: http.StatusRequestTimeout, Type: TypeInvalidRequest, Code: CodeRequestTimeout,
				Message: fmt.Sprintf("the request body did not arrive within %s: send the whole body at once", s.cfg.BodyTimeout)}
		}
		return nil, invalid("", CodeInvalidJSON, "cannot read the request body: %v", err)
	}
	_ = rc.SetReadDeadline(time.Time{})
	return body, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) chainError(err error) *Error {
	return &Error{Status: http.StatusBadGateway, Type: TypeAPI, Code: CodeChain, Message: "the chain node did not answer: " + err.Error()}
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request, one string) {
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	list, err := s.models.list(ctx)
	if err != nil {
		writeError(w, s.chainError(err))
		return
	}
	if one == "" {
		writeJSON(w, http.StatusOK, list)
		return
	}
	for _, e := range list.Data {
		if e.ID == one || e.Ogpu.Hash == one {
			writeJSON(w, http.StatusOK, e)
			return
		}
		for _, n := range e.Ogpu.Names {
			if n == one {
				writeJSON(w, http.StatusOK, e)
				return
			}
		}
	}
	writeError(w, notFound(one, "no unjailed provider serves it"))
}

// JobLooker is implemented by backends that can describe a job after the
// fact (GET /v1/ogpu/jobs/{id}).
type JobLooker interface {
	LookupJob(ctx context.Context, id uint64) (any, error)
}

func (s *Server) handleJob(w http.ResponseWriter, r *http.Request, idStr string) {
	id, err := strconv.ParseUint(idStr, 10, 64)
	if err != nil {
		writeError(w, invalid("id", CodeInvalidValue, "job id %q: want a number", idStr))
		return
	}
	jl, ok := s.backend.(JobLooker)
	if !ok {
		writeError(w, &Error{Status: http.StatusNotFound, Type: TypeInvalidRequest, Code: CodeUnknownURL, Message: "this gateway's backend has no jobs"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
	defer cancel()
	v, err := jl.LookupJob(ctx, id)
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			e = s.chainError(err)
		}
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, v)
}
