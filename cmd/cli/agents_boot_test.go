package cli

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	ethcrypto "github.com/ethereum/go-ethereum/crypto"

	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/node/p2p"
)

// TestL4BootstrapOnlyStakedProviders: registering a provider costs no
// stake, so records without stake must not become every agent's bootstrap
// peers (an eclipse). Only a provider with the minimum provider stake
// bonded is dialled.
func TestL4BootstrapOnlyStakedProviders(t *testing.T) {
	e := startMarketEnv(t)
	addrOf := map[string]string{}
	for name, bond := range map[string]string{"p1": "200ogpu", "p2": "", "p3": "50ogpu"} {
		k, _ := ethcrypto.GenerateKey()
		id, err := p2p.PeerIDOf(&k.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		addrOf[name] = "/ip4/127.0.0.1/tcp/4001/p2p/" + id.String()
		out := e.ok("tx", "provider", "register", "--from", name, "--peer-id", id.String(), "--addr", addrOf[name],
			"--runtime", "llama.cpp", "--class", "c", "--model", hashHex("model"))
		if !strings.Contains(out, "registered") {
			t.Fatalf("register %s: %s", name, out)
		}
		if bond != "" {
			e.ok("tx", "provider", "bond", bond, "--from", name)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := agent.ChainBootstrap(ctx, e.c, "")
	t.Logf("bootstrap peers from the chain: %v", got)
	if !slices.Equal(got, []string{addrOf["p1"]}) {
		t.Fatalf("bootstrap peers %v, want only the staked provider p1 %s (p2 has no stake, p3 less than the minimum)", got, addrOf["p1"])
	}
}
