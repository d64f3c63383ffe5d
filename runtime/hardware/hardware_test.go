package hardware

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ogpu-network/ogpu/market"
)

func readTestdata(t testing.TB, name string) []byte {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkAttributes fails unless every attribute of i passes market's check.
func checkAttributes(t testing.TB, i Info) []string {
	attrs := i.Attributes()
	for _, a := range attrs {
		if err := market.ValidateAttribute(a); err != nil {
			t.Fatalf("Info %+v: %v", i, err)
		}
	}
	return attrs
}

// Outputs of nvidia-smi --query-gpu=name,memory.total,driver_version
// --format=csv,noheader,nounits, captured on machines with these GPUs (and
// one where the driver was not loaded: nvidia-smi prints the message on
// stdout and exits 9).
func TestParseNvidiaSMI(t *testing.T) {
	for _, tc := range []struct {
		file string
		want []GPU
		err  string
	}{
		{"nvidia-smi-h100.txt", []GPU{{"nvidia", "NVIDIA H100 80GB HBM3", 81559 << 20, "535.104.05"}}, ""},
		{"nvidia-smi-2xa100.txt", []GPU{
			{"nvidia", "NVIDIA A100-SXM4-80GB", 80 << 30, "525.85.12"},
			{"nvidia", "NVIDIA A100-SXM4-80GB", 80 << 30, "525.85.12"},
		}, ""},
		{"nvidia-smi-mixed.txt", []GPU{
			{"nvidia", "NVIDIA GeForce RTX 4090", 24564 << 20, "550.54.14"},
			{"nvidia", "Tesla V100-PCIE-16GB", 0, "470.57.02"},
		}, ""},
		{"nvidia-smi-empty.txt", nil, ""},
		{"nvidia-smi-nodriver.txt", nil, `line 1 "NVIDIA-SMI has failed`},
		{"nvidia-smi-badmem.txt", nil, `memory "80 GiB" is not a number of MiB`},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := ParseNvidiaSMI(readTestdata(t, tc.file))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestAttributes(t *testing.T) {
	gpus := func(file string) []GPU {
		g, err := ParseNvidiaSMI(readTestdata(t, file))
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	for _, tc := range []struct {
		name string
		info Info
		want []string
	}{
		{"h100", Info{CPUModel: "AMD EPYC 7B13 64-Core Processor", Cores: 16, RAMBytes: 24684084 << 10, Arch: "amd64", GPUs: gpus("nvidia-smi-h100.txt")}, []string{
			"cpu/arch/amd64/cores/16", "cpu/model/amd-epyc-7b13-64-core", "ram/23Gi",
			"gpu/count/1", "gpu/vendor/nvidia/model/h100/ram/80Gi",
		}},
		{"2xa100", Info{CPUModel: "Intel(R) Xeon(R) Platinum 8480+", Cores: 224, RAMBytes: 2 << 40, Arch: "amd64", GPUs: gpus("nvidia-smi-2xa100.txt")}, []string{
			"cpu/arch/amd64/cores/224", "cpu/model/intel-xeon-platinum-8480", "ram/2048Gi",
			"gpu/count/2", "gpu/vendor/nvidia/model/a100/ram/80Gi", "gpu/vendor/nvidia/model/a100/ram/80Gi",
		}},
		{"mixed", Info{CPUModel: "Intel(R) Xeon(R) CPU @ 2.20GHz", Cores: 8, RAMBytes: 512 << 20, Arch: "amd64", GPUs: gpus("nvidia-smi-mixed.txt")}, []string{
			"cpu/arch/amd64/cores/8", "cpu/model/intel-xeon", "ram/512Mi",
			"gpu/count/2", "gpu/vendor/nvidia/model/rtx-4090/ram/24Gi", "gpu/vendor/nvidia/model/v100",
		}},
		{"unknown everything", Info{}, []string{"cpu/arch/unknown/cores/0"}},
		{"hostile strings", Info{
			CPUModel: strings.Repeat("Ü/ber:*", 40), Cores: 1, Arch: "weird/arch value that is much too long",
			GPUs: []GPU{{Vendor: strings.Repeat("V", 100), Model: "   ", MemoryBytes: 1}},
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := checkAttributes(t, tc.info)
			if tc.want != nil && !slices.Equal(got, tc.want) {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
		})
	}

	// A market requirement for an 80 GB H100 matches the H100 attributes.
	h100 := Info{Cores: 16, RAMBytes: 64 << 30, Arch: "amd64", GPUs: gpus("nvidia-smi-h100.txt")}
	reqs := []string{"gpu/vendor/nvidia/model/h100", "gpu/*/*/*/*/ram>=80Gi", "ram>=64Gi", "cpu/arch/amd64/cores>=8", "gpu/count>=1"}
	if miss := market.MatchAll(reqs, h100.Attributes()); miss != "" {
		t.Fatalf("requirement %q not met by %q", miss, h100.Attributes())
	}
}

func TestGPUModel(t *testing.T) {
	for name, want := range map[string]string{
		"NVIDIA H100 80GB HBM3":          "h100",
		"NVIDIA H100 PCIe":               "h100",
		"NVIDIA H200":                    "h200",
		"NVIDIA GH200 480GB":             "gh200",
		"NVIDIA A100-SXM4-80GB":          "a100",
		"NVIDIA A100-PCIE-40GB":          "a100",
		"Tesla V100-SXM2-16GB":           "v100",
		"Tesla T4":                       "t4",
		"NVIDIA L40S":                    "l40s",
		"NVIDIA A10G":                    "a10g",
		"NVIDIA GeForce RTX 4090":        "rtx-4090",
		"NVIDIA GeForce GTX 1080 Ti":     "gtx-1080",
		"Quadro RTX 8000":                "rtx-8000",
		"NVIDIA RTX A6000":               "rtx-a6000",
		"NVIDIA RTX 6000 Ada Generation": "rtx-6000",
		"AMD Instinct MI300X":            "mi300x",
		"NVIDIA":                         "unknown",
		"":                               "unknown",
		"***":                            "unknown",
	} {
		if got := GPUModel(name); got != want {
			t.Errorf("GPUModel(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestParseCPUInfo(t *testing.T) {
	if got := ParseCPUInfo(readTestdata(t, "cpuinfo-amd64.txt")); got != "AMD EPYC" {
		t.Fatalf("amd64: %q", got)
	}
	if got := ParseCPUInfo(readTestdata(t, "cpuinfo-arm64.txt")); got != "Raspberry Pi 4 Model B Rev 1.1" {
		t.Fatalf("arm64: %q", got)
	}
	if got := ParseCPUInfo([]byte("garbage\x00\nmore")); got != "" {
		t.Fatalf("garbage: %q", got)
	}
}

func TestParseMemInfo(t *testing.T) {
	if n, err := ParseMemInfo(readTestdata(t, "meminfo.txt")); err != nil || n != 24684084<<10 {
		t.Fatalf("%d, %v", n, err)
	}
	for _, bad := range []string{"", "MemFree: 1 kB", "MemTotal: lots kB", "MemTotal: 12 MB", "MemTotal: 99999999999999999999 kB"} {
		if _, err := ParseMemInfo([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestTPSAttribute(t *testing.T) {
	for tps, want := range map[float64]string{
		3269.8: "perf/llm/tps/3269", 0.5: "perf/llm/tps/0", -3: "perf/llm/tps/0", 1e300: "perf/llm/tps/1000000000000000",
	} {
		got := TPSAttribute(tps)
		if got != want {
			t.Errorf("TPSAttribute(%v) = %q, want %q", tps, got, want)
		}
		if err := market.ValidateAttribute(got); err != nil {
			t.Error(err)
		}
	}
}

// TestDetect runs the real detection on this machine.
func TestDetect(t *testing.T) {
	info, err := Detect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Cores != runtime.NumCPU() || info.Arch != runtime.GOARCH {
		t.Fatalf("cores %d arch %s", info.Cores, info.Arch)
	}
	if runtime.GOOS == "linux" && (info.RAMBytes == 0 || info.CPUModel == "") {
		t.Fatalf("linux without RAM size or CPU model: %+v", info)
	}
	if _, err := exec.LookPath("nvidia-smi"); err != nil && len(info.GPUs) != 0 {
		t.Fatalf("GPUs without nvidia-smi: %+v", info.GPUs)
	}
	t.Logf("%+v\n%q", info, checkAttributes(t, info))
}

func TestDetectProc(t *testing.T) {
	dir := t.TempDir()
	info, err := detect(context.Background(), dir, "no-such-nvidia-smi", time.Second)
	if err != nil || info.CPUModel != "" || info.RAMBytes != 0 {
		t.Fatalf("empty proc: %+v, %v", info, err)
	}
	os.WriteFile(filepath.Join(dir, "cpuinfo"), readTestdata(t, "cpuinfo-arm64.txt"), 0o600)
	os.WriteFile(filepath.Join(dir, "meminfo"), []byte("MemTotal: 3 GB\n"), 0o600)
	info, err = detect(context.Background(), dir, "no-such-nvidia-smi", time.Second)
	if err == nil || !strings.Contains(err.Error(), "MemTotal") || info.CPUModel != "Raspberry Pi 4 Model B Rev 1.1" {
		t.Fatalf("bad meminfo: %+v, %v", info, err)
	}
}

// fakeSMI writes an executable standing in for nvidia-smi: there is no NVIDIA
// GPU on the machines these tests run on, so the command path is exercised
// with captured output.
func fakeSMI(t *testing.T, script string) string {
	if runtime.GOOS == "windows" {
		t.Skip("shell scripts")
	}
	p := filepath.Join(t.TempDir(), "nvidia-smi")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDetectNvidiaSMI(t *testing.T) {
	ctx := context.Background()
	out := filepath.Join("testdata", "nvidia-smi-2xa100.txt")
	abs, _ := filepath.Abs(out)
	smi := fakeSMI(t, `[ "$1 $2" = "`+strings.Join(nvidiaSMIArgs, " ")+`" ] || exit 2; cat `+abs)
	info, err := detect(ctx, "/proc", smi, 10*time.Second)
	if err != nil || len(info.GPUs) != 2 || info.GPUs[1].Model != "NVIDIA A100-SXM4-80GB" {
		t.Fatalf("%+v, %v", info.GPUs, err)
	}

	nodriver, _ := filepath.Abs(filepath.Join("testdata", "nvidia-smi-nodriver.txt"))
	info, err = detect(ctx, "/proc", fakeSMI(t, "cat "+nodriver+"; exit 9"), 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "couldn't communicate with the NVIDIA driver") || info.Cores == 0 {
		t.Fatalf("driver not loaded: %+v, %v", info, err)
	}

	_, err = detect(ctx, "/proc", fakeSMI(t, "exec sleep 60"), 100*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "did not answer") {
		t.Fatalf("hung nvidia-smi: %v", err)
	}
}

// FuzzParseNvidiaSMI checks that any output parses or fails cleanly, and
// that parsed GPUs give valid attributes.
func FuzzParseNvidiaSMI(f *testing.F) {
	for _, name := range []string{"nvidia-smi-h100.txt", "nvidia-smi-2xa100.txt", "nvidia-smi-mixed.txt", "nvidia-smi-nodriver.txt"} {
		f.Add(readTestdata(f, name))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		gpus, err := ParseNvidiaSMI(out)
		if err != nil {
			return
		}
		checkAttributes(t, Info{CPUModel: string(out), Cores: 1, Arch: "amd64", GPUs: gpus})
	})
}
