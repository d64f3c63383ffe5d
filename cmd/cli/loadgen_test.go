package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ogpu-network/ogpu/node"
)

func runOgpudInProcess(args ...string) (string, error) {
	cmd := NewOgpudCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// TestLoadgenRefusesRemoteNodes: `ogpud loadgen` sends nothing to a node
// that is not on loopback, whichever of several --node flags it is, and
// says why; an unbounded run is refused too.
func TestLoadgenRefusesRemoteNodes(t *testing.T) {
	for _, args := range [][]string{
		{"loadgen", "--node", "http://10.1.2.3:26657"},
		{"loadgen", "--node", "127.0.0.1:26657", "--node", "node.example.org:26657"},
	} {
		out, err := runOgpudInProcess(args...)
		if err == nil || !strings.Contains(err.Error(), "not on loopback") {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	if _, err := runOgpudInProcess("loadgen", "--duration", "0s"); err == nil || !strings.Contains(err.Error(), "bounded in time") {
		t.Fatalf("--duration 0: %v", err)
	}
	if _, err := runOgpudInProcess("loadgen", "--max-txs", "0"); err == nil || !strings.Contains(err.Error(), "bounded in count") {
		t.Fatalf("--max-txs 0: %v", err)
	}
}

// TestLoadgenFaucet: `ogpud loadgen faucet FILE` writes a key once and
// prints its address, the same on every later call.
func TestLoadgenFaucet(t *testing.T) {
	path := filepath.Join(t.TempDir(), "faucet.hex")
	first, err := runOgpudInProcess("loadgen", "faucet", path)
	if err != nil {
		t.Fatal(err)
	}
	again, err := runOgpudInProcess("loadgen", "faucet", path)
	if err != nil || again != first {
		t.Fatalf("second call printed %q (%v), first %q", again, err, first)
	}
	key, err := node.ReadHexKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(first), crypto.PubkeyToAddress(key.PublicKey).Hex(); got != want {
		t.Fatalf("printed %s, the key's address is %s", got, want)
	}
}
