package console

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/ogpu-network/ogpu/node"
)

// TestListenAndOpen: a malformed or busy console address is a clear
// error; a non-loopback one is served with a warning; Open prints the URL
// with the token, and on every interface the printed URL's Host is
// allowed (the browser is not refused as DNS rebinding).
func TestListenAndOpen(t *testing.T) {
	if _, err := Listen("8080", nil); err == nil || !strings.Contains(err.Error(), "want HOST:PORT") {
		t.Errorf("Listen(8080): %v, want a HOST:PORT error", err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	if _, err := Listen(busy.Addr().String(), nil); err == nil || !strings.Contains(err.Error(), "pick a free port") {
		t.Errorf("Listen on a busy port: %v, want a clear error", err)
	}
	var warn bytes.Buffer
	l, err := Listen("127.0.0.1:0", &warn)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if warn.Len() != 0 {
		t.Errorf("loopback warned: %s", warn.String())
	}

	c, err := node.Dial("http://127.0.0.1:1") // never reached here
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	s, l, err := Open(c, Options{Token: "t0k"}, "0.0.0.0:0", &out, &warn)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if !strings.Contains(warn.String(), "not loopback") {
		t.Errorf("listening on every interface did not warn: %q", warn.String())
	}
	p := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	if want := "console: open http://127.0.0.1:" + p + "/#token=t0k\n"; out.String() != want {
		t.Errorf("Open printed %q, want %q", out.String(), want)
	}
	h := s.Handler()
	for host, code := range map[string]int{"127.0.0.1:" + p: 200, "localhost:" + p: 200, "evil.example:" + p: http.StatusMisdirectedRequest} {
		req := httptest.NewRequest("GET", "/static/style.css", nil)
		req.Host = host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != code {
			t.Errorf("GET with Host %s: %d, want %d", host, w.Code, code)
		}
	}
}
