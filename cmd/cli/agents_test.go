package cli

import (
	"strings"
	"testing"

	"github.com/ogpu-network/ogpu/types"
)

func TestProgressBar(t *testing.T) {
	var b strings.Builder
	bar := progressBar(&b)
	h := types.Hash{0xab, 0xcd, 0xef, 0x01}
	bar(h, 0, 2_000_000)
	bar(h, 1, 2_000_000) // same percentage: not redrawn
	bar(h, 1_000_000, 2_000_000)
	bar(h, 2_000_000, 2_000_000)
	out := b.String()
	if strings.Count(out, "\r") != 3 {
		t.Fatalf("%d redraws, want 3: %q", strings.Count(out, "\r"), out)
	}
	for _, want := range []string{"model abcdef01… [          ", "  50%  1.0/2.0 MB", "[####################] 100%  2.0/2.0 MB\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in %q", want, out)
		}
	}
}

func TestAgentLogLevel(t *testing.T) {
	if _, err := agentLogger(&strings.Builder{}, "loud"); err == nil || !strings.Contains(err.Error(), "use debug, info, warn or error") {
		t.Fatalf("bad level: %v", err)
	}
	var b strings.Builder
	l, err := agentLogger(&b, "warn")
	if err != nil {
		t.Fatal(err)
	}
	l.Info("hidden")
	l.Warn("shown")
	if strings.Contains(b.String(), "hidden") || !strings.Contains(b.String(), "shown") {
		t.Fatalf("level not applied: %q", b.String())
	}
}
