package llm

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestCPULacksFeaturesRefused: a binary whose ggml was compiled for
// features this CPU lacks is refused at Load with the missing features and
// the level to build, instead of dying of SIGILL in the first matrix
// product. The host's answers are simulated (no CPU here lacks AVX2).
func TestCPULacksFeaturesRefused(t *testing.T) {
	built := []string{"avx", "avx2", "bmi2", "f16c", "fma", "sse3", "ssse3"}
	noAVX2 := func(f string) bool { return f != "avx2" && f != "fma" && f != "f16c" && f != "bmi2" }
	missing := missingFeatures(built, noAVX2)
	if !slices.Equal(missing, []string{"avx2", "bmi2", "f16c", "fma"}) {
		t.Fatalf("missing %v", missing)
	}
	err := error(&ErrCPULacksFeatures{Missing: missing, Built: built})
	var lack *ErrCPULacksFeatures
	if !errors.As(err, &lack) || !strings.Contains(err.Error(), "this CPU lacks avx2, bmi2, f16c, fma") || !strings.Contains(err.Error(), "make build LEVEL=") {
		t.Fatalf("error %q", err)
	}
	if got := missingFeatures(built, func(string) bool { return true }); len(got) != 0 {
		t.Fatalf("a CPU with everything misses %v", got)
	}
}

// TestCheckCPUHere: the binary under test runs on this machine, so its
// compiled features are all present; the host level is one of the four.
func TestCheckCPUHere(t *testing.T) {
	if err := initBackend(); err != nil {
		t.Fatal(err)
	}
	if err := CheckCPU(); err != nil {
		t.Fatalf("CheckCPU on the machine running the test: %v", err)
	}
	if l := HostLevel(); !slices.Contains([]string{"x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4", "native"}, l) {
		t.Fatalf("host level %q", l)
	}
	t.Logf("ggml compiled for %v; this CPU's level: %s", BuiltFeatures(), HostLevel())
}
