// Package workerlog keeps what a supervised worker process (a llama.cpp
// stage host, a training worker) wrote to stderr, so that its death can be
// reported by the lines that say why: llama.cpp's assertion, the signal,
// the Go runtime's fatal error. Those come first in a crash and are
// followed by a long register and goroutine dump, so they are caught as
// they stream by, not looked for in the bytes kept.
package workerlog

import (
	"bytes"
	"strings"
	"sync"
)

// maxWhy is how many "why" lines are kept.
const maxWhy = 3

// Tail keeps the last Max bytes written to it and the first lines that
// say why the process ended. It is safe for concurrent use.
type Tail struct {
	Max int

	mu      sync.Mutex
	b       []byte
	partial string // an unfinished line of the last write
	why     []string
}

// IsWhy reports whether a log line says why a process is ending: a signal
// or a fatal error as the Go runtime prints them, a panic, or llama.cpp's
// assertion or abort.
func IsWhy(l string) bool {
	return strings.HasPrefix(l, "SIG") || strings.HasPrefix(l, "fatal error") || strings.HasPrefix(l, "panic:") ||
		strings.HasPrefix(l, "signal arrived") || strings.Contains(l, "GGML_ASSERT") || strings.Contains(l, "GGML_ABORT")
}

// Write keeps p's tail and any "why" lines in it.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.why) < maxWhy {
		lines := strings.Split(t.partial+string(p), "\n")
		t.partial = lines[len(lines)-1]
		if len(t.partial) > 4096 {
			t.partial = t.partial[len(t.partial)-4096:]
		}
		for _, l := range lines[:len(lines)-1] {
			if l = strings.TrimSpace(l); IsWhy(l) && len(t.why) < maxWhy {
				t.why = append(t.why, l)
			}
		}
	}
	t.b = append(t.b, p...)
	if max := max(t.Max, 1); len(t.b) > max {
		t.b = append(t.b[:0], t.b[len(t.b)-max:]...)
	}
	return len(p), nil
}

// String is what to show of the log: the lines that say why the process
// ended, else its last three lines, joined by " | "; "(none)" if nothing
// was written.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	why := t.why
	if len(why) < maxWhy && IsWhy(strings.TrimSpace(t.partial)) {
		why = append(why[:len(why):len(why)], strings.TrimSpace(t.partial))
	}
	if len(why) > 0 {
		return strings.Join(why, " | ")
	}
	s := strings.TrimSpace(string(bytes.ToValidUTF8(t.b, []byte("?"))))
	if s == "" {
		return "(none)"
	}
	lines := strings.Split(s, "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, " | ")
}
