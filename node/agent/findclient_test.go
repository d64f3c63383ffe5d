package agent

import (
	"context"

	"testing"
	"time"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/types"
)

// TestProviderFindsClientThatDidNotDial is the soak's job 39 stage 0: the
// client dials the winners at the award, but a winner that is not (or no
// longer) connected to it found only peers that refuse the input (the
// validators), tried until its report deadline and was slashed. A client
// publishes no address; its peer id is its account key. The provider now
// looks it up as validators do (the key from the job's posting
// transaction, the addresses from the DHT) and fetches the input from it.
func TestProviderFindsClientThatDidNotDial(t *testing.T) {
	n := newTestNet(t)
	cl := n.client()
	// What the client serves to whom is Access's business (tested
	// elsewhere); here the client serves its input to any peer that asks.
	cl.Host.SetAuthorize(nil)
	in := &LLMInput{Version: 1, Prompt: "Once upon a time"}
	h, err := cl.Store.Put(in.Encode())
	if err != nil {
		t.Fatal(err)
	}
	lj := n.job(24)
	msg := &market.MsgPostJob{
		Kind: market.KindInference, Mode: market.ModeAuction, Model: types.Hash{1}, ModelSize: 1,
		Stages: 1, Redundancy: 2, MaxPrice: lj.MaxPrice, Req: lj.Req, Input: h,
		Windows: lj.Windows, MaxTokens: lj.MaxTokens, PromptTokens: PromptTokenBound(in.Prompt),
	}
	_, posted, err := cl.postJob(n.ctx, msg, Runtime)
	if err != nil {
		t.Fatal(err)
	}
	j, err := n.c.Job(n.ctx, posted.Job)
	if err != nil {
		t.Fatal(err)
	}
	// A provider on the same network (it bootstrapped through the
	// validator) that the client never dialed.
	ph, pstore := n.host("prov1", n.keys["prov1"])
	time.Sleep(2 * time.Second) // its DHT's first walk, which meets every peer here, is over
	// Neither knows the other's address (a client process that never
	// dialed this provider), so nothing but a lookup brings them together.
	ph.Host().Peerstore().ClearAddrs(cl.Host.ID())
	cl.Host.Host().Peerstore().ClearAddrs(ph.ID())
	_ = ph.Host().Network().ClosePeer(cl.Host.ID())
	if len(peersOf(ph, j.Client)) != 0 {
		t.Fatal("the provider is still connected to the client")
	}
	ctx, cancel := context.WithTimeout(n.ctx, 10*time.Second)
	defer cancel()
	if err := fetchFromPartiesMax(ctx, ph, n.c, pstore, j, h, maxLLMInputBlob); err != nil {
		t.Fatalf("the provider did not get the input of a client that did not dial it: %v", err)
	}
	if !pstore.Has(h) {
		t.Fatal("the input is not in the provider's store")
	}
}
