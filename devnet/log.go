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
	_, err := io.WriteString(l.w, b.String()) // one write: w serializes writers
	return err
}

func (l logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	l.attrs = append(append([]slog.Attr{}, l.attrs...), as...)
	return l
}

func (l logHandler) WithGroup(string) slog.Handler { return l }

// syncWriter serializes writes from the agents' goroutines.
type syncWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (s syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
