// Package hardware detects a provider's CPU, memory and GPUs and describes
// them as market attributes (see market.ValidateAttribute), such as
// cpu/arch/amd64/cores/16, ram/62Gi and gpu/vendor/nvidia/model/h100/ram/80Gi.
package hardware

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// GPU is one graphics card.
type GPU struct {
	Vendor      string // lower case: "nvidia"
	Model       string // as the driver names it: "NVIDIA H100 80GB HBM3"
	MemoryBytes uint64 // total memory; 0 if unknown
	Driver      string // driver version
}

// Info describes a machine.
type Info struct {
	CPUModel string // as /proc/cpuinfo names it; "" if unknown
	Cores    int    // logical CPUs this process may use
	RAMBytes uint64 // total memory; 0 if unknown
	GPUs     []GPU
	Arch     string // GOARCH
}

// nvidiaSMIArgs ask nvidia-smi for one CSV line per GPU, memory in MiB.
var nvidiaSMIArgs = []string{"--query-gpu=name,memory.total,driver_version", "--format=csv,noheader,nounits"}

// smiTimeout bounds one nvidia-smi run.
const smiTimeout = 5 * time.Second

// Detect reads the CPU model from /proc/cpuinfo, the memory from
// /proc/meminfo and the GPUs from nvidia-smi when it is on PATH. A missing
// /proc (not Linux) or nvidia-smi (no NVIDIA GPU) is not an error. On error
// the returned Info still holds everything that was detected.
func Detect(ctx context.Context) (Info, error) {
	return detect(ctx, "/proc", "nvidia-smi", smiTimeout)
}

// detect is Detect with the /proc directory, the nvidia-smi command and its
// timeout as parameters.
func detect(ctx context.Context, proc, smi string, timeout time.Duration) (Info, error) {
	info := Info{Cores: runtime.NumCPU(), Arch: runtime.GOARCH}
	var errs []error
	if b, err := os.ReadFile(filepath.Join(proc, "cpuinfo")); err == nil {
		info.CPUModel = ParseCPUInfo(b)
	} else if !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("cannot read the CPU model: %w", err))
	}
	if b, err := os.ReadFile(filepath.Join(proc, "meminfo")); err == nil {
		if info.RAMBytes, err = ParseMemInfo(b); err != nil {
			errs = append(errs, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("cannot read the memory size: %w", err))
	}
	gpus, err := nvidiaGPUs(ctx, smi, timeout)
	info.GPUs = gpus
	if err != nil {
		errs = append(errs, err)
	}
	return info, errors.Join(errs...)
}

// nvidiaGPUs runs nvidia-smi; no nvidia-smi on PATH means no NVIDIA GPUs.
func nvidiaGPUs(ctx context.Context, smi string, timeout time.Duration) ([]GPU, error) {
	path, err := exec.LookPath(smi)
	if err != nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, nvidiaSMIArgs...)
	cmd.WaitDelay = time.Second // children holding stdout do not block Wait
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("nvidia-smi did not answer within %v: %w", timeout, ctx.Err())
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String() + " " + string(out))
		return nil, fmt.Errorf("nvidia-smi failed (%v): %s; check the NVIDIA driver", err, msg)
	}
	return ParseNvidiaSMI(out)
}

// ParseCPUInfo returns the CPU model named in /proc/cpuinfo ("model name" on
// x86, "Model" or "Hardware" on some ARM kernels), or "".
func ParseCPUInfo(b []byte) string {
	found := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if ok && v != "" && found[k] == "" {
			found[k] = v
		}
	}
	for _, k := range []string{"model name", "Model", "Hardware", "cpu model", "cpu"} {
		if v := found[k]; v != "" {
			return v
		}
	}
	return ""
}

// ParseMemInfo returns MemTotal from /proc/meminfo in bytes.
func ParseMemInfo(b []byte) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("meminfo: cannot read MemTotal %q: want \"<n> kB\"", strings.TrimSpace(v))
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil || kb > math.MaxUint64/1024 {
			return 0, fmt.Errorf("meminfo: cannot read MemTotal %q: want \"<n> kB\"", strings.TrimSpace(v))
		}
		return kb * 1024, nil
	}
	return 0, errors.New("meminfo: no MemTotal line")
}

// ParseNvidiaSMI reads the output of nvidia-smi with nvidiaSMIArgs: one
// "name, memory MiB, driver" line per GPU. Empty output means no GPUs;
// memory "[N/A]" means unknown.
func ParseNvidiaSMI(out []byte) ([]GPU, error) {
	var gpus []GPU
	for i, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) != 3 {
			return nil, fmt.Errorf("nvidia-smi line %d %q: want \"name, memory MiB, driver\"", i+1, line)
		}
		name, mem, driver := strings.TrimSpace(f[0]), strings.TrimSpace(f[1]), strings.TrimSpace(f[2])
		if name == "" {
			return nil, fmt.Errorf("nvidia-smi line %d %q: no GPU name", i+1, line)
		}
		g := GPU{Vendor: "nvidia", Model: name, Driver: driver}
		if !strings.HasPrefix(mem, "[") { // [N/A], [Not Supported]
			mib, err := strconv.ParseUint(mem, 10, 64)
			if err != nil || mib > math.MaxUint64>>20 {
				return nil, fmt.Errorf("nvidia-smi line %d %q: memory %q is not a number of MiB", i+1, line, mem)
			}
			g.MemoryBytes = mib << 20
		}
		gpus = append(gpus, g)
	}
	return gpus, nil
}
