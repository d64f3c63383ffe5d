package p2p

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/types"
)

// TestH3FetchedBlobNotAnnounced: a fetched blob is not announced in the
// DHT (a job's blobs are private: an announcement tells everyone who holds
// them); only a fetch that asks for it (a public model) is.
func TestH3FetchedBlobNotAnnounced(t *testing.T) {
	const piece = 64 << 10
	a := newHost(t, piece)
	b := newHost(t, piece, withBootstrap(a))
	c := newHost(t, piece, withBootstrap(a, b))
	ctx := testCtx(t)
	private := put(t, a, randBytes(3*piece, 11))
	public := put(t, a, randBytes(3*piece, 12))
	for _, h := range [][32]byte{private, public} {
		if err := a.Provide(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Fetch(ctx, private, FetchOptions{Peers: []peer.ID{a.ID()}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Fetch(ctx, public, FetchOptions{Peers: []peer.ID{a.ID()}, Announce: true}); err != nil {
		t.Fatal(err)
	}
	holds := func(h [32]byte) bool {
		ais, err := c.FindHolders(ctx, h, 10)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(peerIDs(ais), b.ID())
	}
	// The announced one shows up (so the lookup works) ...
	waitFor(t, "b's announcement of the public blob", func() bool { return holds(public) })
	// ... and the private one never does, well after.
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if holds(private) {
			t.Fatal("b announced a blob it fetched without Announce: the DHT tells strangers who holds a job's data")
		}
	}
}

// TestL4ManifestTakesServingSlot: a manifest request waits for one of the
// peer's serving slots like a piece request (each may run the chain
// queries of an Authorize), so a peer cannot run any number at once.
func TestL4ManifestTakesServingSlot(t *testing.T) {
	const piece = 64 << 10
	a := newHost(t, piece)
	b := newHost(t, piece)
	connect(t, b, a)
	hash := put(t, a, randBytes(2*piece, 13))
	var releases []func()
	for range maxServingPerPeer {
		r, ok := a.acquireSlot(b.ID())
		if !ok {
			t.Fatal("host closed")
		}
		releases = append(releases, r)
	}
	ctx, cancel := context.WithTimeout(testCtx(t), 500*time.Millisecond)
	_, err := b.fetchManifest(ctx, a.ID(), hash)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("manifest request with every slot of the peer taken: %v, want it to wait (deadline exceeded)", err)
	}
	for _, r := range releases {
		r()
	}
	if _, err := b.fetchManifest(testCtx(t), a.ID(), hash); err != nil {
		t.Fatalf("manifest request with the slots free: %v", err)
	}
}

// TestH3StrangerPieceRefused: a stranger that skips the manifest and asks
// for a piece of a private blob directly is refused too (every manifest
// and piece request goes through Authorize); the party it is offered to
// gets it.
func TestH3StrangerPieceRefused(t *testing.T) {
	const piece = 64 << 10
	b := newHost(t, piece)
	friend := b.ID()
	a := newHost(t, piece, withAuthorize(func(_ context.Context, remote peer.ID, _ types.Hash) error {
		if remote != friend {
			return errors.New("not a party to the job")
		}
		return nil
	}))
	stranger := newHost(t, piece)
	connect(t, b, a)
	connect(t, stranger, a)
	hash := put(t, a, randBytes(2*piece, 14))
	ask := func(h *Host) error {
		c, err := h.dialBlob(testCtx(t), a.ID())
		if err != nil {
			t.Fatal(err)
		}
		defer c.close()
		_, err = c.do(testCtx(t), request{kind: kindPiece, hash: hash, index: 1}, piece)
		return err
	}
	if err := ask(stranger); !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "not a party") {
		t.Fatalf("a stranger's piece request: %v, want forbidden with the reason", err)
	}
	if err := ask(b); err != nil {
		t.Fatalf("the party's piece request: %v", err)
	}
}
