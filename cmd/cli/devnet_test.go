package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestDevnetCommandWiring checks that `ogpud devnet` hands its flags to
// devnet.Run and prints its transcript on the command's output: --model
// naming a missing file fails with that file's name after the chain part
// ran (the devnet itself is tested in package devnet), and arguments are
// refused before anything starts.
func TestDevnetCommandWiring(t *testing.T) {
	run := func(args ...string) (string, error) {
		cmd := NewOgpudCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(args)
		err := cmd.ExecuteContext(context.Background())
		return out.String(), err
	}
	missing := filepath.Join(t.TempDir(), "no-such-model.gguf")
	out, err := run("devnet", "--model", missing, "--threads", "2")
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("devnet --model %s: %v; want an error naming the model\n%s", missing, err, out)
	}
	if !strings.Contains(out, "== oGPU devnet: single validator") || !strings.Contains(out, "== transfers") {
		t.Errorf("the transcript is not on the command's output:\n%s", out)
	}
	out, err = run("devnet", "extra")
	if err == nil || strings.Contains(out, "== oGPU devnet") {
		t.Errorf("devnet extra: %v; want the argument refused before the devnet starts\n%s", err, out)
	}
}
