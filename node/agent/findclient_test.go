package agent

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
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
	h, j, ph, pstore := heldInputJob(n, cl)
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

// TestClientDialsWinnerAgain: the client dials the stage-0 winners of a
// pipeline job at the award to serve them its input. Before, a winner it
// could not reach then (its record named an address it no longer listens
// on: a restart, a change) was dialed once and never again. Now the client
// dials it again, reading its record again, until it is reached.
func TestClientDialsWinnerAgain(t *testing.T) {
	n := newTestNet(t)
	tp := n.provider("prov1", 40, false)
	cl := n.client()
	time.Sleep(2 * time.Second) // the DHT's first walks, which meet every peer here, are over
	info, err := tp.agent.Prepare(n.ctx)
	if err != nil {
		t.Fatal(err)
	}
	real := *info
	info.Addrs = []string{"/ip4/127.0.0.1/tcp/1/p2p/" + tp.host.ID().String()}
	if err := tp.agent.Register(n.ctx, info); err != nil {
		t.Fatal(err)
	}
	// The client does not know the provider's address but from its record.
	cl.Host.Host().Peerstore().ClearAddrs(tp.host.ID())
	tp.host.Host().Peerstore().ClearAddrs(cl.Host.ID())
	_ = cl.Host.Host().Network().ClosePeer(tp.host.ID())
	connected := func() bool { return cl.Host.Host().Network().Connectedness(tp.host.ID()) == network.Connected }
	if connected() {
		t.Fatal("the client is still connected to the provider")
	}
	ctx, cancel := context.WithTimeout(n.ctx, 15*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		cl.keepDialing(ctx, []string{addrOf(n, "prov1").Hex()}, func(f string, a ...any) { t.Logf("[client] "+f, a...) })
	}()
	time.Sleep(1500 * time.Millisecond) // the first dial failed
	if err := tp.agent.Register(n.ctx, &real); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
	if !connected() {
		t.Fatal("the client did not dial the winner again once its record named where it listens")
	}
}

// TestInputFromCoProviderWhileClientStalls is soak finding 19: a client
// whose chain node was down held each request for its input until its
// access check gave up, and answered "try again". One winner had fetched
// the input before; the other tried the client alone for 9 attempts (the
// slot providers were asked every tenth), reported the input unavailable,
// and the validators, fetching the same way, voted it bad: the job failed
// and the one validator that had it was slashed. A party now asks the
// slot providers once its first attempt failed (and every widenEvery):
// the second winner gets the input from the first and the job settles.
func TestInputFromCoProviderWhileClientStalls(t *testing.T) {
	n := newTestNet(t)
	n.provider("prov1", 40, false)
	n.provider("prov2", 50, false)
	cl := n.client()
	in := &LLMInput{Version: 1, Prompt: "Once upon a time"}
	h, err := cl.Store.Put(in.Encode())
	if err != nil {
		t.Fatal(err)
	}
	// The client serves the first peer that asks; every other request
	// waits 1.5 s and is answered "try again" (its node cannot say).
	var mu sync.Mutex
	var first peer.ID
	stalled := 0
	cl.Host.SetAuthorize(func(ctx context.Context, remote peer.ID, _ types.Hash) error {
		mu.Lock()
		if first == "" {
			first = remote
		}
		served := remote == first
		if !served {
			stalled++
		}
		mu.Unlock()
		if served {
			return nil
		}
		select {
		case <-time.After(1500 * time.Millisecond):
		case <-ctx.Done():
		}
		return p2p.ErrUnavailable
	})
	lj := n.job(24)
	posted := n.postWithheld(cl, lj, h, in.Prompt)
	j := h1Wait(n, posted.Job, "completed", func(j *chain.JobView) bool { return !j.State.Open() })
	mu.Lock()
	defer mu.Unlock()
	if stalled == 0 {
		t.Fatal("the client stalled no request: the test tested nothing")
	}
	task := j.Tasks[0]
	if j.StateName != "completed" || task.Verdict == verifier.InputBad || task.Verdict == (types.Hash{}) {
		t.Fatalf("job %d %s, task settled on %x: want the two winners' agreed result (the second fetched the input from the first)", j.ID, j.StateName, task.Verdict[:8])
	}
}

// TestFetchEndsWithItsContext is soak finding 21: a provider that could not
// fetch its input reported it when a 10-s fetch attempt ended, 5 s after
// its report height and after the commit deadline (slashed as a no-show).
// The fetch's context had ended at the report height; closing the blob
// stream to a holder whose access check had not answered waited for that
// answer (the stream's lazy protocol negotiation), up to the holder's
// 10-s timeout. A fetch from a holder that never answers in time now ends
// with its context.
func TestFetchEndsWithItsContext(t *testing.T) {
	n := newTestNet(t)
	cl := n.client()
	release := make(chan struct{})
	defer close(release)
	cl.Host.SetAuthorize(func(context.Context, peer.ID, types.Hash) error {
		<-release // a chain query that hangs past the host's 10-s access check
		return nil
	})
	h, j, ph, pstore := heldInputJob(n, cl)
	// Whether the negotiation is still open when the context ends varies
	// from one stream to the next (about one fetch in four waited here
	// before the change): several fetches.
	for i := range 6 {
		ctx, cancel := context.WithTimeout(n.ctx, time.Second)
		t0 := time.Now()
		err := fetchFromPartiesMax(ctx, ph, n.c, pstore, j, h, maxLLMInputBlob)
		cancel()
		if took := time.Since(t0); err == nil || took > 3*time.Second {
			t.Fatalf("fetch %d with a 1-s context returned after %v (%v): want it to end with its context", i, took.Round(time.Millisecond), err)
		}
	}
}

// heldInputJob posts an inference job whose prompt client cl holds (its
// model a placeholder: nobody runs it), and starts a provider host, prov1,
// on the same network (bootstrapped through the validator; the client never
// dialed it), once its DHT's first walk is over.
func heldInputJob(n *testNet, cl *Client) (types.Hash, *chain.JobView, *p2p.Host, *blobstore.Store) {
	n.t.Helper()
	in := &LLMInput{Version: 1, Prompt: "Once upon a time"}
	h, err := cl.Store.Put(in.Encode())
	if err != nil {
		n.t.Fatal(err)
	}
	lj := n.job(24)
	lj.Model, lj.ModelSize = types.Hash{1}, 1
	posted := n.postWithheld(cl, lj, h, in.Prompt)
	j, err := n.c.Job(n.ctx, posted.Job)
	if err != nil {
		n.t.Fatal(err)
	}
	ph, pstore := n.host("prov1", n.keys["prov1"])
	time.Sleep(2 * time.Second) // its DHT's first walk, which meets every peer here, is over
	return h, j, ph, pstore
}
