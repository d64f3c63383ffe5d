package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/runtime/llm"
)

// TestModelSplitCommand: `ogpu model split` writes slices and a manifest
// that validates and matches the files; inspect shows per-stage memory
// below the whole model's; bad cuts are refused.
func TestModelSplitCommand(t *testing.T) {
	model, err := agent.FindModel()
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	out, err := runCLI(t, "model", "split", model, "--stages", "3", "--out", dir, "-o", "json")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var plan llm.SplitPlan
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	m, err := llm.ReadSplitManifest(plan.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Stages) != 3 || m.Model != plan.SHA256 {
		t.Fatalf("manifest %+v for %s", m, plan.SHA256)
	}
	for i, s := range m.Stages {
		if _, err := m.CheckSlice(filepath.Join(dir, s.File), i); err != nil {
			t.Fatal(err)
		}
		if plan.Stages[i].Memory.Total >= plan.Whole.Total {
			t.Fatalf("stage %d needs %d bytes, the whole model %d", i, plan.Stages[i].Memory.Total, plan.Whole.Total)
		}
	}
	out, err = runCLI(t, "model", "inspect", model, "--at", "3")
	if err != nil || !strings.Contains(out, "stage 1: layers 3..4") {
		t.Fatalf("inspect: %v\n%s", err, out)
	}
	if out, err := runCLI(t, "model", "split", model, "--at", "4,2", "--out", dir); err == nil || !strings.Contains(err.Error(), "strictly increasing") {
		t.Fatalf("bad cut: %v\n%s", err, out)
	}
	if out, err := runCLI(t, "model", "split", model, "--out", dir); err == nil || !strings.Contains(err.Error(), "--stages") {
		t.Fatalf("no cut: %v\n%s", err, out)
	}
}
