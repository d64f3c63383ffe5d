package gateway

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/types"
)

// smallBuffers is a listener whose connections have a small send buffer:
// a client that stops reading fills it after a few kilobytes, as a slow
// link would.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(2048)
	}
	return c, err
}

// rawConn opens a TCP connection to the gateway; rcvbuf > 0 sets the
// socket's receive buffer before connecting.
func rawConn(t *testing.T, g *testGateway, rcvbuf int) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if rcvbuf > 0 {
		d.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf) })
			if err != nil {
				return err
			}
			return serr
		}
	}
	c, err := d.Dial("tcp", strings.TrimPrefix(g.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// rawHead writes a POST's request line and headers; contentLength < 0
// leaves Content-Length out.
func rawHead(t *testing.T, c net.Conn, g *testGateway, path, contentType string, contentLength int, extra string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n", path, g.Key())
	if contentType != "" {
		fmt.Fprintf(&b, "Content-Type: %s\r\n", contentType)
	}
	if contentLength >= 0 {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", contentLength)
	}
	b.WriteString(extra)
	b.WriteString("\r\n")
	if _, err := io.WriteString(c, b.String()); err != nil {
		t.Fatal(err)
	}
}

// rawAnswer reads an HTTP answer from c and returns its status and body.
func rawAnswer(t *testing.T, c net.Conn) (int, string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	bz, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(bz)
}

var contentPiece = regexp.MustCompile(`"content":"[^"]`)

// TestGatewayMalformedClients: HTTP clients that misbehave, on raw TCP,
// against a session gateway on a real chain with two llama.cpp providers.
// A client that disconnects mid-stream and one that never reads its
// answer (a slowloris on the response, cut off once its connection's
// buffers are full) both leave the request to finish and be paid once:
// each one's retry with the same Idempotency-Key gets the whole answer
// without a new seq. A body that never arrives (408), a body cut short
// (400), a wrong content type (415), a huge body (413) and invalid JSON
// asking for a stream (400) are refused with a clear error before
// anything is signed. The gateway keeps serving others throughout, the
// lanes stay in step (one seq per request, released after each), and the
// lanes' vouchers and the day's ledger match the answers to the base unit.
func TestGatewayMalformedClients(t *testing.T) {
	n := newTestNet(t, false)
	n.provider("prov1", 40, false)
	n.provider("prov2", 50, false)
	dir := t.TempDir()
	cfg := n.config(dir)
	cfg.BodyTimeout, cfg.WriteTimeout = 500*time.Millisecond, 500*time.Millisecond
	sc := n.sessionConfig(dir)
	sc.Budget = types.OGPU(100)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g, _ := n.sessionGatewayOn(smallBuffers{ln}, cfg, sc, false)
	me := n.client.Address()
	book := newSessionBook(t)

	// A well-behaved request opens the session.
	st, o := sessionStream(t, g.testGateway, with(storyChat, "stream", true), nil)
	if st.errCode != "" || !st.done || o == nil {
		t.Fatalf("first stream %+v", st)
	}
	book.add("", o)
	session := o.Session
	idle := func() {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; {
			busy := false
			for _, s := range g.b.Sessions() {
				busy = busy || s.InFlight > 0
			}
			if !busy {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("the gateway's requests did not end")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// 1. A client that disconnects after the first piece of text.
	body := []byte(`{"model":"stories260K","max_tokens":24,"stream":true,"messages":[{"role":"user","content":"Once upon a time"}]}`)
	c := rawConn(t, g.testGateway, 0)
	rawHead(t, c, g.testGateway, "/v1/chat/completions", "application/json", len(body), "Idempotency-Key: drop-1\r\n")
	_, _ = c.Write(body)
	var got []byte
	buf := make([]byte, 512)
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	for !contentPiece.Match(got) {
		k, err := c.Read(buf)
		if err != nil {
			t.Fatalf("before the first piece: %v (%q)", err, got)
		}
		got = append(got, buf[:k]...)
	}
	_ = c.Close()
	idle()
	// Its retry: the whole answer, the same seq, one charge.
	st, o = sessionStream(t, g.testGateway, with(storyChat, "stream", true, "max_tokens", 24), map[string]string{"Idempotency-Key": "drop-1"})
	if st.errCode != "" || !st.done || o == nil || o.Session != session {
		t.Fatalf("the dropped client's retry: %+v %+v", st, o)
	}
	book.add(session, o)

	// 2. A client that never reads a long answer: cut off, the work goes
	// on and is paid once.
	long := []byte(`{"model":"stories260K","max_tokens":300,"stream":true,"messages":[{"role":"user","content":"Once upon a time"}]}`)
	c = rawConn(t, g.testGateway, 1024)
	rawHead(t, c, g.testGateway, "/v1/chat/completions", "application/json", len(long), "Idempotency-Key: slow-1\r\n")
	_, _ = c.Write(long)
	idle()
	time.Sleep(2 * cfg.WriteTimeout)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	all, rerr := io.ReadAll(c)
	if bytes.Contains(all, []byte("[DONE]")) || rerr != nil && !strings.Contains(rerr.Error(), "reset") {
		t.Fatalf("the client that never read got %d bytes, [DONE] %v, %v: want the connection cut", len(all), bytes.Contains(all, []byte("[DONE]")), rerr)
	}
	t.Logf("the client that never read was cut off after %d bytes", len(all))
	st, o = sessionStream(t, g.testGateway, map[string]any{"model": "stories260K", "max_tokens": 300, "stream": true,
		"messages": []map[string]any{{"role": "user", "content": "Once upon a time"}}}, map[string]string{"Idempotency-Key": "slow-1"})
	if st.errCode != "" || !st.done || o == nil || len(st.text) < 200 {
		t.Fatalf("the slow client's retry: %+v %+v", st, o)
	}
	book.add(session, o)
	book.check(g, func() *uint256.Int { return n.feesOf(me) })

	// 3. Bodies refused before anything is signed.
	_, spent := g.ledger.spent()
	signed := g.lanesSigned()
	cases := []struct {
		name   string
		send   func(c net.Conn)
		status int
		code   string
	}{
		{"a body that never arrives", func(c net.Conn) {
			rawHead(t, c, g.testGateway, "/v1/chat/completions", "application/json", 500, "")
			_, _ = c.Write(body[:40])
		}, http.StatusRequestTimeout, CodeRequestTimeout},
		{"a body cut short", func(c net.Conn) {
			rawHead(t, c, g.testGateway, "/v1/chat/completions", "application/json", 500, "")
			_, _ = c.Write(body[:40])
			_ = c.(*net.TCPConn).CloseWrite()
		}, http.StatusBadRequest, CodeInvalidJSON},
		{"a wrong content type", func(c net.Conn) {
			rawHead(t, c, g.testGateway, "/v1/chat/completions", "text/plain", len(body), "")
			_, _ = c.Write(body)
		}, http.StatusUnsupportedMediaType, CodeUnsupportedMedia},
		{"a huge body", func(c net.Conn) {
			huge := bytes.Repeat([]byte("x"), DefaultMaxRequestBytes+1)
			rawHead(t, c, g.testGateway, "/v1/chat/completions", "application/json", len(huge), "")
			_, _ = c.Write(huge)
		}, http.StatusRequestEntityTooLarge, CodeRequestTooLarge},
		{"invalid JSON asking for a stream", func(c net.Conn) {
			bad := []byte(`{"model":"stories260K","stream":true,"messages":[{"role":"user","content":"Once`)
			rawHead(t, c, g.testGateway, "/v1/chat/completions", "application/json", len(bad), "")
			_, _ = c.Write(bad)
		}, http.StatusBadRequest, CodeInvalidJSON},
	}
	for _, tc := range cases {
		c := rawConn(t, g.testGateway, 0)
		tc.send(c)
		status, answer := rawAnswer(t, c)
		if status != tc.status || !strings.Contains(answer, `"code":"`+tc.code+`"`) || !strings.Contains(answer, `"message":"`) {
			t.Fatalf("%s: %d %s, want %d %s", tc.name, status, answer, tc.status, tc.code)
		}
		t.Logf("%s: %d %s", tc.name, status, strings.TrimSpace(answer))
	}
	if _, now := g.ledger.spent(); !now.Eq(spent) {
		t.Fatalf("the refused bodies spent %s", new(uint256.Int).Sub(now, spent))
	}
	for k, v := range g.lanesSigned() {
		if !v.Eq(signed[k]) {
			t.Fatalf("lane %s: %s signed after refused bodies, %s before", k, v, signed[k])
		}
	}

	// The gateway serves others, on the same lanes, next seq.
	st, o = sessionStream(t, g.testGateway, with(storyChat, "stream", true), nil)
	if st.errCode != "" || !st.done || o == nil || o.Session != session {
		t.Fatalf("a request after the malformed ones: %+v %+v", st, o)
	}
	book.add(session, o)
	book.check(g, func() *uint256.Int { return n.feesOf(me) })
}
