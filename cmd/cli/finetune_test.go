package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/runtime/llm/train"
	"github.com/ogpu-network/ogpu/types"
)

// TestMain lets this test binary host the supervised training workers
// that `ogpu model finetune` starts (train.Run re-executes it).
func TestMain(m *testing.M) {
	train.MaybeWorker()
	os.Exit(m.Run())
}

// TestModelFinetuneCommand fine-tunes stories260K's head on a small text
// through the real command: the loss falls, the final tensors differ from
// the base, the root is over steps+1 hashes and the model is written; bad
// flags are refused before any worker starts.
func TestModelFinetuneCommand(t *testing.T) {
	model, err := agent.FindModel()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "ziggy.txt")
	story := "Once upon a time, there was a purple dragon named Ziggy. Ziggy lived near the forest. Every day Ziggy said, \"I love blue pancakes!\"\n"
	if err := os.WriteFile(data, []byte(strings.Repeat(story, 8)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "model", "finetune", "--model", model, "--data", data, "--epochs", "2", "--out", filepath.Join(dir, "out"), "-o", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var o FinetuneOutput
	if err := json.NewDecoder(strings.NewReader(out)).Decode(&o); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if o.Steps == 0 || len(o.EpochLoss) != 2 || !(o.EpochLoss[1] < o.EpochLoss[0]) || o.Base == o.Final || o.Root == (types.Hash{}) || !strings.Contains(o.Class, "train:head") {
		t.Fatalf("finetune output %+v", o)
	}
	if st, err := os.Stat(o.Model); err != nil || st.Size() == 0 {
		t.Fatalf("the fine-tuned model %s: %v", o.Model, err)
	}
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--data", data}, "--model FILE.gguf and --data FILE.txt are required"},
		{[]string{"--model", model, "--data", filepath.Join(dir, "missing.txt")}, "--data"},
		{[]string{"--model", model, "--data", data, "--ctx", "48"}, "32"},
	} {
		if out, err := runCLI(t, append([]string{"model", "finetune"}, c.args...)...); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("finetune %v: %v (want an error saying %q)\n%s", c.args, err, c.says, out)
		}
	}
}
