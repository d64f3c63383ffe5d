package hardware

import (
	"math"
	"strconv"
	"strings"
)

const (
	gib = 1 << 30
	mib = 1 << 20
	// maxSegment is the longest attribute segment market accepts.
	maxSegment = 64
)

// Attributes describes i as market attributes, most general first:
//
//	cpu/arch/amd64/cores/16
//	cpu/model/amd-epyc-7b13-64-core          (when the model is known)
//	ram/62Gi                                 (floor; Mi below 1 GiB)
//	gpu/count/2                              (when there are GPUs)
//	gpu/vendor/nvidia/model/h100/ram/80Gi    (one per GPU)
//
// GPU memory is rounded to the nearest GiB: drivers report a little less
// than the nominal size (81559 MiB for an 80 GB H100). A GPU with unknown
// memory has no ram segments. Identical GPUs give one attribute each.
func (i Info) Attributes() []string {
	arch := truncate(segment(i.Arch), 16)
	if arch == "" {
		arch = "unknown"
	}
	attrs := []string{"cpu/arch/" + arch + "/cores/" + strconv.Itoa(max(i.Cores, 0))}
	if m := cpuModel(i.CPUModel); m != "" {
		attrs = append(attrs, "cpu/model/"+m)
	}
	switch {
	case i.RAMBytes >= gib:
		attrs = append(attrs, "ram/"+strconv.FormatUint(i.RAMBytes/gib, 10)+"Gi")
	case i.RAMBytes > 0:
		attrs = append(attrs, "ram/"+strconv.FormatUint(i.RAMBytes/mib, 10)+"Mi")
	}
	if len(i.GPUs) > 0 {
		attrs = append(attrs, "gpu/count/"+strconv.Itoa(len(i.GPUs)))
	}
	for _, g := range i.GPUs {
		vendor := truncate(segment(g.Vendor), 16)
		if vendor == "" {
			vendor = "unknown"
		}
		a := "gpu/vendor/" + vendor + "/model/" + GPUModel(g.Model)
		if g.MemoryBytes > 0 {
			a += "/ram/" + strconv.FormatUint((g.MemoryBytes+gib/2)/gib, 10) + "Gi"
		}
		attrs = append(attrs, a)
	}
	return attrs
}

// TPSAttribute is perf/llm/tps/<n>: a measured LLM generation speed in
// tokens per second, rounded down.
func TPSAttribute(tps float64) string {
	n := uint64(0)
	if tps >= 1 && !math.IsInf(tps, 0) {
		n = uint64(min(tps, 1e15))
	}
	return "perf/llm/tps/" + strconv.FormatUint(n, 10)
}

// gpuBrands are words in GPU names that name a product family, not a model.
var gpuBrands = map[string]bool{"nvidia": true, "geforce": true, "tesla": true, "quadro": true, "amd": true, "radeon": true, "instinct": true, "intel": true}

// gpuSeries are first words that need the next word to name a model.
var gpuSeries = map[string]bool{"rtx": true, "gtx": true, "titan": true, "gt": true, "mi": true, "pro": true}

// GPUModel is the short model segment of a GPU name: vendor and brand words
// dropped, lower case, form-factor suffixes cut:
//
//	NVIDIA H100 80GB HBM3      h100
//	NVIDIA A100-SXM4-80GB      a100
//	Tesla V100-PCIE-16GB       v100
//	NVIDIA GeForce RTX 4090    rtx-4090
//	NVIDIA RTX A6000           rtx-a6000
func GPUModel(name string) string {
	var words []string
	for _, w := range strings.Fields(strings.ToLower(name)) {
		if w = segment(w); w != "" && !gpuBrands[w] {
			words = append(words, w)
		}
	}
	if len(words) == 0 {
		return "unknown"
	}
	m, _, _ := strings.Cut(words[0], "-")
	if gpuSeries[m] && len(words) > 1 {
		next, _, _ := strings.Cut(words[1], "-")
		m += "-" + next
	}
	if m = strings.Trim(m, "-._"); m == "" {
		return "unknown"
	}
	return truncate(m, maxSegment)
}

// cpuModel is the segment for a CPU model name: lower case, trademark marks,
// "CPU", "Processor" and the clock ("@ 2.20GHz") dropped, words joined by
// "-". "AMD EPYC 7B13 64-Core Processor" is amd-epyc-7b13-64-core.
func cpuModel(name string) string {
	name, _, _ = strings.Cut(strings.ToLower(name), "@")
	for _, mark := range []string{"(r)", "(tm)", "®", "™"} {
		name = strings.ReplaceAll(name, mark, " ")
	}
	var words []string
	for _, w := range strings.Fields(name) {
		if w = segment(w); w != "" && w != "cpu" && w != "processor" {
			words = append(words, w)
		}
	}
	return truncate(strings.Join(words, "-"), maxSegment)
}

// segment keeps the characters market allows in a segment, lower case;
// any other run of characters becomes one "-".
func segment(s string) string {
	var b strings.Builder
	dash := false
	for _, c := range strings.ToLower(s) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' {
			b.WriteRune(c)
			dash = c == '-'
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.Trim(b.String(), "-")
}

// truncate cuts s to n bytes without a trailing "-" (s is ASCII).
func truncate(s string, n int) string {
	if len(s) > n {
		s = strings.TrimRight(s[:n], "-")
	}
	return s
}
