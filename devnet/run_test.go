package devnet

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunStopsAtAFailedStep runs the devnet with a model file that does
// not exist: the chain and the transfers run, the agents' start fails on
// the model, Run returns that error (naming the file) without a report or
// any round, stops the agents it had started, and removes its home unless
// told to keep it.
func TestRunStopsAtAFailedStep(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-model.gguf")
	for _, keep := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var out bytes.Buffer
		rep, err := Run(ctx, &out, Options{Model: missing, Keep: keep})
		cancel()
		if err == nil || rep != nil || !strings.Contains(err.Error(), missing) {
			t.Fatalf("keep=%v: report %v, error %v; want no report and an error naming %s\n%s", keep, rep, err, missing, out.String())
		}
		text := out.String()
		for _, want := range []string{"== transfers", "replay of alice's nonce 0:", "== libp2p:", "= the cap"} {
			if !strings.Contains(text, want) {
				t.Errorf("keep=%v: %q missing from the transcript:\n%s", keep, want, text)
			}
		}
		if strings.Contains(text, "== round") || strings.Contains(text, "devnet done") {
			t.Errorf("keep=%v: a round ran or the devnet finished after a failed step:\n%s", keep, text)
		}
		first, _, _ := strings.Cut(text, "\n")
		_, home, ok := strings.Cut(first, ", home ")
		if !ok || !strings.HasPrefix(filepath.Base(home), "ogpu-devnet-") {
			t.Fatalf("keep=%v: no home in %q", keep, first)
		}
		_, statErr := os.Stat(home)
		if keep {
			if statErr != nil {
				t.Errorf("keep=%v: the home is gone: %v", keep, statErr)
			}
			os.RemoveAll(home)
		} else if !os.IsNotExist(statErr) {
			t.Errorf("keep=%v: the home %s is left behind (%v)", keep, home, statErr)
		}
	}
}

func TestLogHandler(t *testing.T) {
	var b bytes.Buffer
	l := slog.New(logHandler{w: &b, name: "prov1"}).With("job", 4)
	l.Info("committed result", "stage", 2)
	l.Debug("not printed")
	if got, want := b.String(), "   [prov1] committed result job=4 stage=2\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestSideBySide(t *testing.T) {
	got := sideBySide("left title", "a\nlonger line\n", "right", "x\n")
	lines := strings.Split(strings.TrimPrefix(got, "\n"), "\n")
	want := []string{
		"left title  | right",
		"a           | x",
		"longer line | ",
	}
	if len(lines) < 4 || !strings.HasPrefix(lines[0], "-- a client job and a job posted by the validator agent") {
		t.Fatalf("got %q", got)
	}
	for i, w := range want {
		if lines[1+i] != w {
			t.Errorf("line %d: %q, want %q", 1+i, lines[1+i], w)
		}
	}
}

// TestLogLineAfterStream: an agent's log line written while a streamed
// text has its line open starts on a line of its own; one written at the
// start of a line gets no blank line before it.
func TestLogLineAfterStream(t *testing.T) {
	var b bytes.Buffer
	w := newSyncWriter(&b)
	l := slog.New(logHandler{w: w, name: "prov1"})
	io.WriteString(w, "-> streamed: Once upon")
	l.Info("generated", "job", 1)
	io.WriteString(w, " a time\n")
	l.Info("committed result")
	if got, want := b.String(), "-> streamed: Once upon\n   [prov1] generated job=1\n a time\n   [prov1] committed result\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
