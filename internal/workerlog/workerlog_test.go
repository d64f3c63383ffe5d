package workerlog

import (
	"fmt"
	"strings"
	"testing"
)

// TestWhyOutlivesTheDump: a crash's assertion and signal lines are what
// String shows, even after a dump far longer than what is kept, and even
// when they arrive split across writes.
func TestWhyOutlivesTheDump(t *testing.T) {
	tl := &Tail{Max: 256}
	fmt.Fprint(tl, "loading model\nggml.c:123: GGML_ASS")
	fmt.Fprint(tl, "ERT(labels < n) failed\nSIGABRT: abort\n")
	for i := range 1000 {
		fmt.Fprintf(tl, "goroutine %d [running]:\n", i)
	}
	got := tl.String()
	if got != "ggml.c:123: GGML_ASSERT(labels < n) failed | SIGABRT: abort" {
		t.Fatalf("String() = %q", got)
	}
	if n := len(tl.b); n > 256 {
		t.Fatalf("kept %d bytes, want at most 256", n)
	}
}

// TestLastLinesWithoutWhy: a clean log shows its last three lines; an
// empty one says so; invalid UTF-8 is replaced.
func TestLastLinesWithoutWhy(t *testing.T) {
	tl := &Tail{Max: 1024}
	if got := tl.String(); got != "(none)" {
		t.Fatalf("empty: %q", got)
	}
	fmt.Fprint(tl, "a\nb\nc\nd\xff\n")
	if got := tl.String(); got != "b | c | d?" {
		t.Fatalf("String() = %q", got)
	}
	tl = &Tail{Max: 1024}
	fmt.Fprint(tl, "panic: boom") // no newline: the last, unfinished line
	if got := tl.String(); !strings.HasPrefix(got, "panic: boom") {
		t.Fatalf("an unfinished why line: %q", got)
	}
}
