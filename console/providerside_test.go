package console

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/types"
)

// TestProviderOf: the console's ProviderSide of a real provider agent
// following a real node: a job the agent cannot run shows as a decision
// with the reason; the price set through it is the agent's; a script in
// the form is refused; Bond moves the stake on chain and the chain's
// refusal of an unbond comes back; reachability names the agent's peer.
func TestProviderOf(t *testing.T) {
	e := startEnv(t, 2)
	key := e.keys[1]
	store, err := blobstore.Open(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := p2p.New(ctx, p2p.Config{Key: key, Listen: p2p.LoopbackListen(), Store: store})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	p, err := agent.NewProvider(agent.ProviderConfig{Chain: e.c, Key: key, Host: h, Store: store,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- p.Serve(sctx) }()
	defer func() { stop(); <-served }()

	ps := ProviderOf(p)
	if ps.Address() != crypto.PubkeyToAddress(key.PublicKey) {
		t.Fatalf("address %s, want the agent's", ps.Address())
	}
	if r := ps.Reachability(); r.PeerID != h.ID().String() || len(r.Addrs) == 0 || r.Status == "" {
		t.Errorf("reachability %+v: want peer %s and its addresses", r, h.ID())
	}

	// The agent follows from the block after it starts: a job posted
	// before that is not seen, so post again until one is.
	var job uint64
	var d Decision
	for try := 0; try < 5 && (d.Job == 0 || d.Job != job); try++ {
		job, _ = e.postJob(t)
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline) && d.Job != job; time.Sleep(50 * time.Millisecond) {
			for _, x := range ps.Decisions() {
				if x.Job == job {
					d = x
				}
			}
		}
	}
	if d.Job != job || d.Bid || d.Price != nil || !strings.Contains(d.Reason, "is not served here") || d.Time.IsZero() {
		t.Fatalf("decision on job %d: %+v, want no bid because its model is not served here", job, d)
	}

	milli := func(x uint64) *uint256.Int { return new(uint256.Int).Div(types.OGPU(x), uint256.NewInt(1000)) }
	if err := ps.SetPricing(ctx, Pricing{Base: new(uint256.Int), PerToken: milli(7)}); err != nil {
		t.Fatal(err)
	}
	if got := ps.Pricing(); !got.Base.IsZero() || !got.PerToken.Eq(milli(7)) || got.Script != "" {
		t.Errorf("pricing after setting 0 + 0.007/token: %+v", got)
	}
	if got := p.Pricing(); !got.PerToken.Eq(milli(7)) {
		t.Errorf("the agent's pricing is %+v, want the one set through the console", got)
	}
	if err := ps.SetPricing(ctx, Pricing{Script: "/tmp/evil.sh"}); err == nil || !strings.Contains(err.Error(), "--pricing-script") {
		t.Errorf("a script set from the console: %v, want a refusal", err)
	}
	if err := ps.SetPricing(ctx, Pricing{Base: milli(1), PerToken: new(uint256.Int)}); err == nil {
		t.Error("a zero price per token was accepted")
	}
	if got := ps.Pricing(); !got.PerToken.Eq(milli(7)) {
		t.Errorf("refused prices changed the pricing to %+v", got)
	}

	if err := ps.Bond(ctx, types.OGPU(100)); err != nil {
		t.Fatal(err)
	}
	if st, err := e.c.Stake(ctx, ps.Address()); err != nil || !st.Bonded.Eq(types.OGPU(100)) {
		t.Fatalf("stake after bonding 100 oGPU: %+v %v", st, err)
	}
	if err := ps.Unbond(ctx, types.OGPU(101)); err == nil || !strings.Contains(err.Error(), "cannot unbond") {
		t.Errorf("unbonding more than bonded: %v, want the chain's refusal", err)
	}
	if err := ps.Unbond(ctx, types.OGPU(40)); err != nil {
		t.Fatal(err)
	}
	if st, err := e.c.Stake(ctx, ps.Address()); err != nil || !st.Bonded.Eq(types.OGPU(60)) || len(st.Unbonding) != 1 {
		t.Fatalf("stake after unbonding 40 oGPU: %+v %v, want 60 bonded and 40 unbonding", st, err)
	}
}
