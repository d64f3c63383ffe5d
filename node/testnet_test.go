package node

import (
	"path/filepath"
	"testing"
	"time"

	cmttypes "github.com/cometbft/cometbft/types"

	"github.com/ogpu-network/ogpu/genesis"
)

// TestTestnetMaxBlockGas: a load testnet's block gas limit reaches every
// validator's genesis.json (the app reads it there: blockSpaceOptions), the
// default stays -1, and a limit below -1 is refused before anything is
// written.
func TestTestnetMaxBlockGas(t *testing.T) {
	gen := func(gas int64) (string, error) {
		out := t.TempDir()
		_, err := GenerateTestnet(TestnetOptions{Out: out, ChainID: "ogpu-gas", Validators: 2, Port: 40000, Commit: time.Second, Genesis: genesis.Default(), MaxBlockGas: gas})
		return out, err
	}
	for _, c := range []struct{ set, want int64 }{{0, -1}, {200_000_000, 200_000_000}} {
		out, err := gen(c.set)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"node0", "node1"} {
			g, err := cmttypes.GenesisDocFromFile(filepath.Join(out, n, "config", "genesis.json"))
			if err != nil {
				t.Fatal(err)
			}
			if got := g.ConsensusParams.Block.MaxGas; got != c.want {
				t.Fatalf("MaxBlockGas %d: %s has max_gas %d, want %d", c.set, n, got, c.want)
			}
		}
	}
	out, err := gen(-2)
	if err == nil {
		t.Fatal("max block gas -2 accepted")
	}
	if entries, _ := filepath.Glob(filepath.Join(out, "*")); len(entries) != 0 {
		t.Fatalf("refused testnet left %v behind", entries)
	}
}
