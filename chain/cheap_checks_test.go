package chain

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// TestL4ProviderScansBounded: registering a provider costs only a fee, so
// the queries that walk providers (/providers, /providers/match,
// /whynobids) examine at most MaxScanned records each and page on with
// ?after=ADDR (security review L4: /match walked every record until it
// found 1,000 eligible ones, under the consensus mutex). Paging through
// gives every provider exactly once.
func TestL4ProviderScansBounded(t *testing.T) {
	tree := store.NewMemTree()
	c := store.NewCache(tree)
	k := market.NewKeeper(market.Context{KV: c, Height: 1, Params: genesis.DefaultParams()})
	n := 2*MaxScanned + 7
	for i := range n {
		addr := types.BytesToAddress([]byte(fmt.Sprint("provider ", i)))
		if err := k.RegisterProvider(addr, &market.ProviderInfo{PeerID: fmt.Sprint("p", i)}, false); err != nil {
			t.Fatal(err)
		}
	}
	setParams(c, genesis.DefaultParams())
	c.Write()
	if _, _, err := tree.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	snap, err := tree.Snapshot(0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[types.Address]bool{}
	path, pages := QueryProviders, 0
	for {
		v, _, err := marketQuery(snap, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		page := v.([]ProviderView)
		if len(page) > MaxScanned {
			t.Fatalf("page of %d providers, the bound is %d", len(page), MaxScanned)
		}
		for _, p := range page {
			if seen[p.Address] {
				t.Fatalf("%s listed twice", p.Address)
			}
			seen[p.Address] = true
		}
		pages++
		if len(page) < MaxScanned {
			break
		}
		path = QueryProviders + "?after=" + page[len(page)-1].Address.Hex()
	}
	if len(seen) != n || pages != 3 {
		t.Fatalf("%d providers in %d pages, want %d in 3", len(seen), pages, n)
	}
	// /match examines at most MaxScanned records per request, whatever it finds.
	req, _ := json.Marshal(market.Requirements{})
	if v, _, err := marketQuery(snap, QueryMatch, req); err != nil || len(v.([]ProviderView)) != 0 {
		t.Fatalf("match over unbonded providers: %v %v", v, err)
	}
	if _, _, err := marketQuery(snap, QueryProviders+"?before=x", nil); err == nil {
		t.Fatal("an unknown query parameter was accepted")
	}
}

// TestM2CheapChecksBeforeSignature: a refused transaction makes the node
// do as little as possible, free of charge. The nonce, the fee and the
// balance that pays it are checked before the signature is recovered (a
// secp256k1 recovery is the costliest check): a forged transaction whose
// nonce is used, or whose sender cannot pay, is refused for that, before
// its signature is looked at. Before the change it was refused as "bad
// signature" after the recovery.
func TestM2CheapChecksBeforeSignature(t *testing.T) {
	h := newHarness(t, store.NewMemTree(), testGenesis())
	h.block(h.tx("alice", send("bob", types.OGPU(1))))
	forge := func(key string, nonce uint64) []byte {
		bz := signTx(t, testKey(key), nonce, send("bob", types.OGPU(1)))
		bz[len(bz)-3] ^= 0x01 // inside the signature
		return bz
	}
	if res := h.checkTx(forge("alice", 0)); res.Code != types.ErrNonceUsed.Code {
		t.Fatalf("forged tx with a used nonce: code %d (%s), want nonce used, before the signature", res.Code, res.Log)
	}
	if res := h.checkTx(forge("nobody", 0)); res.Code != types.ErrInsufficientFunds.Code || !strings.Contains(res.Log, "cannot pay the fee") {
		t.Fatalf("forged tx from an empty account: code %d (%s), want cannot pay the fee", res.Code, res.Log)
	}
	if res := h.checkTx(forge("alice", 1)); res.Code != types.ErrBadSignature.Code {
		t.Fatalf("forged tx with the right nonce and fee: code %d (%s), want bad signature", res.Code, res.Log)
	}
}
