package llm

import (
	"fmt"
	"runtime"
	"slices"
	"strings"

	"golang.org/x/sys/cpu"
)

// The CPU this process runs on must execute what ggml was compiled for:
// built with -march=x86-64-v3 (make build LEVEL=x86-64-v3: AVX2, FMA,
// F16C, BMI2), ggml's kernels use those instructions unconditionally, and
// on a CPU without them the first matrix product dies of SIGILL, a crash
// rather than an error. Load checks first and refuses with the level to
// build instead. The compiled features also name the determinism class
// (Model.Class: "cpu+avx2+fma+..."), since different SIMD paths sum floats
// in a different order.

// ErrCPULacksFeatures: ggml was compiled for instructions this CPU lacks.
type ErrCPULacksFeatures struct {
	Missing []string // ggml feature names, lower-case
	Built   []string
}

func (e *ErrCPULacksFeatures) Error() string {
	return fmt.Sprintf("this binary's llama.cpp was compiled for %s, but this CPU lacks %s: rebuild for this machine with `make build LEVEL=%s` (or plain `go build`, the baseline)",
		strings.Join(e.Built, "+"), strings.Join(e.Missing, ", "), HostLevel())
}

// hostHas reports whether this CPU executes a ggml CPU feature. Features
// this check does not know are assumed present (ggml only reports x86 and
// ARM SIMD features; the ARM ones are checked by GOARCH).
func hostHas(feature string) bool {
	if runtime.GOARCH != "amd64" {
		return true
	}
	x := cpu.X86
	switch feature {
	case "sse3":
		return x.HasSSE3
	case "ssse3":
		return x.HasSSSE3
	case "avx":
		return x.HasAVX
	case "avx2":
		return x.HasAVX2
	case "f16c":
		// x/sys/cpu does not report F16C; every x86 CPU with AVX2 has it.
		return x.HasAVX2
	case "fma":
		return x.HasFMA
	case "bmi2":
		return x.HasBMI2
	case "avx512":
		return x.HasAVX512F
	case "avx512_vbmi":
		return x.HasAVX512VBMI
	case "avx512_vnni":
		return x.HasAVX512VNNI
	case "avx512_bf16":
		return x.HasAVX512BF16
	case "avx_vnni":
		return x.HasAVXVNNI
	case "amx_int8":
		return x.HasAMXInt8
	}
	return true
}

// missingFeatures lists the compiled features has reports absent.
func missingFeatures(built []string, has func(string) bool) []string {
	var out []string
	for _, f := range built {
		if !has(f) {
			out = append(out, f)
		}
	}
	return out
}

// CheckCPU returns nil if this CPU runs what ggml was compiled for, else
// an *ErrCPULacksFeatures naming what is missing and the level to build.
func CheckCPU() error {
	built := cpuFeatures()
	if missing := missingFeatures(built, hostHas); len(missing) > 0 {
		return &ErrCPULacksFeatures{Missing: missing, Built: built}
	}
	return nil
}

// HostLevel is the highest x86-64 micro-architecture level this CPU
// supports ("x86-64-v4" ... "x86-64"), the LEVEL to build for it.
func HostLevel() string {
	if runtime.GOARCH != "amd64" {
		return "native"
	}
	x := cpu.X86
	switch {
	case x.HasAVX512F && x.HasAVX512BW && x.HasAVX512CD && x.HasAVX512DQ && x.HasAVX512VL && x.HasAVX2 && x.HasFMA && x.HasBMI2:
		return "x86-64-v4"
	case x.HasAVX2 && x.HasFMA && x.HasBMI1 && x.HasBMI2 && x.HasAVX:
		return "x86-64-v3"
	case x.HasSSE42 && x.HasPOPCNT && x.HasSSSE3:
		return "x86-64-v2"
	}
	return "x86-64"
}

// BuiltFeatures is what ggml was compiled for, sorted ("avx2", "fma", ...).
func BuiltFeatures() []string { return slices.Clone(cpuFeatures()) }
