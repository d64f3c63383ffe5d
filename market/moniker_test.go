package market

import (
	"strings"
	"testing"

	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/types"
)

// TestProviderMoniker: a moniker is stored as given (any printable text,
// a script included: consoles escape it), and one too long or with
// control characters (a forged line in a log, a terminal escape) is
// refused before anything is written.
func TestProviderMoniker(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	info := gpuInfo("m")
	info.Moniker = `<script>alert("provider")</script>`
	n.register(loner, types.OGPU(100), info)
	if p, ok := GetProvider(n.tree, loner); !ok || p.Moniker != info.Moniker {
		t.Fatalf("stored moniker %q, want %q", p.Moniker, info.Moniker)
	}
	for _, bad := range []string{strings.Repeat("x", MaxMonikerLen+1), "line\nforged", "esc\x1b[31m"} {
		bi := gpuInfo("m")
		bi.Moniker = bad
		if err := bi.Validate(); err == nil || !strings.Contains(err.Error(), "moniker") {
			t.Errorf("moniker %q: error %v, want a moniker error", bad, err)
		}
		if _, err := DecodeMsgRegisterProvider((&MsgRegisterProvider{Info: bi}).Raw().Data); err == nil {
			t.Errorf("moniker %q: the message decodes", bad)
		}
	}
}
