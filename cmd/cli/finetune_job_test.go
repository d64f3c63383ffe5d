package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/types"
)

// ftFiles writes a dataset (and one not in UTF-8) and returns the shared
// model's path with them.
func ftFiles(t *testing.T) (model, data, latin1 string) {
	t.Helper()
	model, err := agent.FindModel()
	if err != nil {
		t.Skipf("needs the shared model: %v", err)
	}
	dir := t.TempDir()
	data = filepath.Join(dir, "ziggy.txt")
	story := "Once upon a time, there was a purple dragon named Ziggy. Ziggy lived near the forest. Every day Ziggy said, \"I love blue pancakes!\"\n"
	if err := os.WriteFile(data, []byte(strings.Repeat(story, 8)), 0o644); err != nil {
		t.Fatal(err)
	}
	latin1 = filepath.Join(dir, "latin1.txt")
	if err := os.WriteFile(latin1, []byte(strings.Repeat("Caf\xe9 au lait. ", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	return model, data, latin1
}

// parseJobRun parses `ogpu job run` flags and returns the fine-tune job
// they make.
func parseJobRun(t *testing.T, args ...string) (agent.FinetuneJob, error) {
	t.Helper()
	root := NewOgpuCommand()
	cmd, rest, err := root.Find([]string{"job", "run"})
	if err != nil || len(rest) != 0 {
		t.Fatal(err, rest)
	}
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	return finetuneJobFromFlags(cmd)
}

// The flags become the job: the fine-tune context defaults to 64 tokens,
// not the inference context; the execute window is left to the step count
// unless given; the other flags are taken as given.
func TestJobRunFinetuneFlags(t *testing.T) {
	model, data, _ := ftFiles(t)
	j, err := parseJobRun(t, "--kind", "finetune", "--model", model, "--data", data, "--epochs", "2", "--out", "/tmp/x")
	if err != nil {
		t.Fatal(err)
	}
	if j.Base != model || len(j.Data) == 0 || j.Epochs != 2 || j.Ctx != agent.DefaultFinetuneCtx || j.Stride != agent.DefaultFinetuneStride ||
		j.LRMicro != agent.DefaultFinetuneLRMicro || j.Windows.Execute != 0 || j.Windows.Bid != 5 || j.Redundancy != 2 || j.OutDir != "/tmp/x" ||
		!j.MaxPrice.Eq(types.OGPU(5)) {
		t.Fatalf("job %+v", j)
	}
	j, err = parseJobRun(t, "--kind", "finetune", "--model", model, "--data", data, "--ctx", "128", "--stride", "16", "--lr-micro", "5000",
		"--validation", "1", "--execute-blocks", "33", "--redundancy", "3", "--class", "c1", "--require", "ram>=1Gi")
	if err != nil {
		t.Fatal(err)
	}
	if j.Ctx != 128 || j.Stride != 16 || j.LRMicro != 5000 || j.Validation != 1 || j.Windows.Execute != 33 || j.Redundancy != 3 || j.Class != "c1" ||
		len(j.Attributes) != 1 {
		t.Fatalf("job %+v", j)
	}
}

// Bad flags and bad input are refused before any node is dialed (the
// --node here is unreachable), each saying what to change.
func TestJobRunFinetuneRefuses(t *testing.T) {
	model, data, latin1 := ftFiles(t)
	home := t.TempDir()
	run := []string{"--home", home, "job", "run", "--kind", "finetune", "--from", "alice", "--node", "http://127.0.0.1:1"}
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--model", model}, "needs --model BASE.gguf"},
		{[]string{"--data", data}, "needs --model BASE.gguf"},
		{[]string{"--model", strings.Repeat("ab", 32), "--data", data}, "needs the base model's GGUF file"},
		{[]string{"--model", model, "--data", filepath.Join(home, "missing.txt")}, "--data"},
		{[]string{"--model", model, "--data", latin1}, "not valid UTF-8"},
		{[]string{"--model", model, "--data", data, "--ctx", "48"}, "multiple of 32"},
		{[]string{"--model", model, "--data", data, "--ctx", "32"}, "64..4096"},
		{[]string{"--model", model, "--data", data, "--stride", "0"}, "--stride 0"},
		{[]string{"--model", model, "--data", data, "--epochs", "0"}, "--epochs 0"},
		{[]string{"--model", model, "--data", data, "--lr-micro", "0"}, "--lr-micro 0"},
		{[]string{"--model", model, "--data", data, "--validation", "-1"}, "--validation -1"},
		{[]string{"--model", model, "--data", data, "--validation", "1000"}, "none is left to train on"},
		{[]string{"--model", model, "--data", data, "--pool"}, "sealed-bid auction"},
		{[]string{"--model", model, "--data", data, "--sample", "Once", "--sample-tokens", "0"}, "--sample-tokens 0"},
		{[]string{"--model", model, "--data", data, "--stages", "2"}, "one stage"},
		{[]string{"--model", model, "--data", data, "--max-price", "0"}, "max price"},
	} {
		out, err := runCLI(t, append(append([]string{}, run...), c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("job run --kind finetune %v: %v (want an error saying %q)\n%s", c.args, err, c.says, out)
		}
	}
	// Good flags get past the checks to the wallet (alice is not in it).
	out, err := runCLI(t, append(append([]string{}, run...), "--model", model, "--data", data)...)
	if err == nil || strings.Contains(err.Error(), "fine-tune") || strings.Contains(err.Error(), "--") {
		t.Fatalf("good flags: %v\n%s", err, out)
	}
}

// On a real chain: the command posts the planned job, which expires
// without a training provider; `ogpu job result` then says there is no
// model to fetch rather than trying inference's text.
func TestJobRunFinetuneOnChain(t *testing.T) {
	model, data, _ := ftFiles(t)
	e := startEnv(t)
	outDir := t.TempDir()
	out, err := e.fails("job", "run", "--kind", "finetune", "--from", "alice", "--model", model, "--data", data, "--epochs", "1",
		"--bid-blocks", "2", "--reveal-blocks", "2", "--out", outDir, "--timeout", "1m")
	if !strings.Contains(err.Error(), "expired") || !strings.Contains(out, "posted fine-tune job 1") || !strings.Contains(out, "planned") {
		t.Fatalf("job run: %v\n%s", err, out)
	}
	out, err = e.fails("job", "result", "1", "--from", "alice", "--out", filepath.Join(outDir, "m.gguf"))
	if !strings.Contains(err.Error(), "not settled") {
		t.Fatalf("job result: %v\n%s", err, out)
	}
	if ents, _ := os.ReadDir(outDir); len(ents) != 0 {
		t.Fatalf("wrote %v", ents)
	}
}

// The client's model check accepts what the runtime really writes: a
// model fine-tuned by the training worker (`ogpu model finetune`, what a
// provider runs) passes VerifyFinetuneModel against its final hash, byte
// for byte the base with the trained head, and is refused against the
// base's hash.
func TestRealFinetunedModelVerifies(t *testing.T) {
	model, data, _ := ftFiles(t)
	dir := t.TempDir()
	out, err := runCLI(t, "model", "finetune", "--model", model, "--data", data, "--epochs", "1", "--out", filepath.Join(dir, "run"), "-o", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var o FinetuneOutput
	if err := json.NewDecoder(strings.NewReader(out)).Decode(&o); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	dst := filepath.Join(dir, "verified.gguf")
	if err := agent.VerifyFinetuneModel(model, o.Model, types.Hash(o.Base), dst); !errors.Is(err, agent.ErrModelRefused) {
		t.Fatalf("checked against the base's hash: %v", err)
	}
	if err := agent.VerifyFinetuneModel(model, o.Model, types.Hash(o.Final), dst); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(o.Model)
	b, _ := os.ReadFile(dst)
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Fatal("the verified model is not the worker's file")
	}
}
