package devnet

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// logHandler prints an agent's log lines as "   [name] message k=v".
type logHandler struct {
	w     io.Writer
	name  string
	attrs []slog.Attr
	// seen, if set, sees every message printed (startProvider waits for
	// the agent's "provider running").
	seen func(msg string)
}

func (l logHandler) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelInfo }

func (l logHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "   [%s] %s", l.name, r.Message)
	add := func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	}
	for _, a := range l.attrs {
		add(a)
	}
	r.Attrs(add)
	b.WriteByte('\n')
	if l.seen != nil {
		l.seen(r.Message)
	}
	// One write: w serializes writers. A line writer starts it on a line
	// of its own when a streamed text is being written.
	if lw, ok := l.w.(lineWriter); ok {
		_, err := lw.WriteLine([]byte(b.String()))
		return err
	}
	_, err := io.WriteString(l.w, b.String())
	return err
}

func (l logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	l.attrs = append(append([]slog.Attr{}, l.attrs...), as...)
	return l
}

func (l logHandler) WithGroup(string) slog.Handler { return l }

// lineWriter writes p starting on a new line.
type lineWriter interface {
	WriteLine(p []byte) (int, error)
}

// syncWriter serializes writes from the agents' goroutines, and keeps
// whether the last write left a line open (a streamed text) for WriteLine.
type syncWriter struct {
	mu *sync.Mutex
	w  io.Writer
	// open: the last byte written was not a newline.
	open *bool
}

func newSyncWriter(w io.Writer) syncWriter { return syncWriter{&sync.Mutex{}, w, new(bool)} }

func (s syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.write(p)
}

// WriteLine writes p, first ending the open line if there is one.
func (s syncWriter) WriteLine(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if *s.open {
		if _, err := s.write([]byte{'\n'}); err != nil {
			return 0, err
		}
	}
	return s.write(p)
}

func (s syncWriter) write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if n > 0 {
		*s.open = p[n-1] != '\n'
	}
	return n, err
}
