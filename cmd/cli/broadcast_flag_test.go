package cli

import (
	"os"
	"path/filepath"
	"testing"
)

// TestBroadcastFromConfig: the nodes a client hands its transactions to
// come from --broadcast, else from config.toml's broadcast list; queries
// go to --node only.
func TestBroadcastFromConfig(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte("broadcast = [\"127.0.0.1:9\", \"127.0.0.1:10\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		also int
	}{
		{[]string{"--home", home}, 2},
		{[]string{"--home", home, "--broadcast", "127.0.0.1:11"}, 1},
	} {
		root := NewOgpuCommand()
		cmd, _, err := root.Find([]string{"status"})
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.ParseFlags(tc.args); err != nil {
			t.Fatal(err)
		}
		if err := root.PersistentPreRunE(cmd, nil); err != nil {
			t.Fatal(err)
		}
		c, err := dialNode(cmd)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Also) != tc.also {
			t.Errorf("%v: transactions also go to %d nodes, want %d", tc.args, len(c.Also), tc.also)
		}
	}
}
