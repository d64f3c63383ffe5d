// Package console is the oGPU web console, first part: a block explorer
// (blocks, decoded transactions, accounts, validators, params, supply with
// the invariant's terms) and a client's job page with a timeline built from
// CometBFT's indexer and kept live over server-sent events.
//
// Pages are server-rendered html/template (so every value is escaped and
// the first paint needs no JavaScript); one small vanilla ES module,
// web/app.js, adds live updates. Everything is embedded in the binary and
// served under a strict Content-Security-Policy with no inline script.
// The browser only talks to this process: reads go through node.Client
// (ABCI queries and CometBFT RPC), and live updates come from one
// server-side node.Client.Subscribe fanned out to every browser.
//
// Security: a random token, printed once as http://HOST:PORT/#token=…, is
// exchanged for an HttpOnly SameSite=Strict cookie; every non-GET request
// needs that token and a same-origin Origin header; every request needs a
// Host on the allow-list (DNS rebinding).
package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ogpu-network/ogpu/node"
)

//go:embed web
var webFS embed.FS

// CookieName is the cookie that carries the console token.
const CookieName = "ogpu_console"

// TokenHeader is the header a script may send the token in instead.
const TokenHeader = "X-Ogpu-Token"

// CSP is the Content-Security-Policy of every response.
const CSP = "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// Server is the console's HTTP server state.
type Server struct {
	c     *node.Client
	token string
	opt   Options
	pages map[string]*template.Template
	hub   *hub
	paid  blockPayments
	// charts: the binary embeds the chart library (ChartsEmbedded).
	charts bool

	mu    sync.RWMutex
	hosts map[string]bool
}

// New returns a console reading through c, with the account and agent
// parts of o (nil ones: a read-only explorer for them).
func New(c *node.Client, o Options) (*Server, error) {
	if c == nil {
		return nil, errors.New("console: no node client")
	}
	token := o.Token
	if token == "" {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("console: cannot make a token: %w", err)
		}
		token = hex.EncodeToString(b[:])
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	o.Token = token
	s := &Server{c: c, token: token, opt: o, pages: pages, hub: newHub(c), hosts: map[string]bool{}, charts: ChartsEmbedded()}
	if ts, ok := o.Client.(textSource); ok {
		ts.setTextSink(s.hub.text)
	}
	return s, nil
}

// Token is the secret that authorises actions.
func (s *Server) Token() string { return s.token }

// AllowListener allows the Host names a browser uses for the listener's
// address: the address itself and, for a loopback address,
// localhost:PORT, 127.0.0.1:PORT and [::1]:PORT.
func (s *Server) AllowListener(addr net.Addr) {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		s.AllowHost(addr.String())
		return
	}
	s.AllowHost(net.JoinHostPort(host, port))
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
			s.AllowHost(net.JoinHostPort(h, port))
		}
	}
}

// AllowHost adds a Host header value (host:port) to the allow-list.
func (s *Server) AllowHost(hostport string) {
	s.mu.Lock()
	s.hosts[strings.ToLower(hostport)] = true
	s.mu.Unlock()
}

func (s *Server) hostAllowed(h string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.hosts[strings.ToLower(h)]
}

// URL is the address to open, with the token in the fragment (never sent
// to the server, never in a log or a Referer).
func (s *Server) URL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String() + "/#token=" + s.token
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/#token=" + s.token
}

// Run keeps the one chain subscription that feeds /api/events until ctx
// ends.
func (s *Server) Run(ctx context.Context) { s.hub.run(ctx) }

// Serve serves the console on l until ctx ends; it runs the subscription
// too. The listener's addresses are allowed as Host.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	s.AllowListener(l.Addr())
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go s.Run(ctx)
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	err := srv.Serve(l)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Handler is the console's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(webFS, "web/static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", s.home)
	mux.HandleFunc("GET /blocks/{height}", s.block)
	mux.HandleFunc("GET /tx/{hash}", s.tx)
	mux.HandleFunc("GET /accounts/{addr}", s.account)
	mux.HandleFunc("GET /validators", s.validators)
	mux.HandleFunc("GET /params", s.params)
	mux.HandleFunc("GET /supply", s.supply)
	mux.HandleFunc("GET /search", s.search)
	mux.HandleFunc("GET /jobs/{id}", s.job)
	mux.HandleFunc("GET /api/events", s.events)
	mux.HandleFunc("GET /api/jobs/{id}", s.jobAPI)
	mux.HandleFunc("GET /providers", s.providers)
	mux.HandleFunc("GET /providers/{addr}", s.provider)
	mux.HandleFunc("GET /api/providers/{addr}/earnings", s.earningsAPI)
	mux.HandleFunc("POST /api/provider/pricing", s.authed(s.providerAction(s.setPricing)))
	mux.HandleFunc("POST /api/provider/bond", s.authed(s.providerAction(s.bond)))
	mux.HandleFunc("POST /api/provider/unbond", s.authed(s.providerAction(s.unbond)))
	mux.HandleFunc("POST /api/session", s.session)
	mux.HandleFunc("POST /api/whoami", s.authed(s.whoami))
	mux.HandleFunc("GET /client", s.client)
	mux.HandleFunc("POST /api/jobs", s.authed(s.postJob))
	mux.HandleFunc("POST /api/jobs/{id}/cancel", s.authed(s.cancelJob))
	mux.HandleFunc("POST /api/sessions/{id}/close", s.authed(s.closeSession))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusNotFound, "No such page", "There is no page at "+r.URL.Path+". Use the search box or the links above.")
	})
	return s.guard(mux)
}

// guard sets the security headers, checks Host on every request, and
// checks Origin on every non-GET one.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		// same-origin, not no-referrer: with no-referrer Chromium sends
		// "Origin: null" on a form POST, which the Origin check refuses.
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		if !s.hostAllowed(r.Host) {
			http.Error(w, fmt.Sprintf("host %q is not allowed: open the console at the address it printed (a DNS name pointing here is refused, against DNS rebinding)", r.Host), http.StatusMisdirectedRequest)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if o := r.Header.Get("Origin"); o != "http://"+r.Host {
				http.Error(w, fmt.Sprintf("cross-origin request refused: Origin %q is not this console (http://%s)", o, r.Host), http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// tokenOK reports whether r carries the token in the cookie or header.
func (s *Server) tokenOK(r *http.Request) bool {
	got := r.Header.Get(TokenHeader)
	if got == "" {
		if c, err := r.Cookie(CookieName); err == nil {
			got = c.Value
		}
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) == 1
}

// authed refuses a request without the token.
func (s *Server) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.tokenOK(r) {
			http.Error(w, "this action needs the console token: open the URL `ogpud console` printed (http://…/#token=…)", http.StatusUnauthorized)
			return
		}
		h(w, r)
	}
}

// session exchanges the token (form field "token") for the cookie.
func (s *Server) session(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 1024)
	tok := r.PostFormValue("token")
	if tok == "" || subtle.ConstantTimeCompare([]byte(tok), []byte(s.token)) != 1 {
		http.Error(w, "wrong console token: open the URL `ogpud console` printed (http://…/#token=…)", http.StatusUnauthorized)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: s.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) whoami(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"authorized":true}`)
}
