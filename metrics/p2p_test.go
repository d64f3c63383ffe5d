package metrics

import (
	"context"
	"crypto/sha256"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/runtime/blobstore"
)

// TestMetricsBlobBytesAndLibp2p: two real libp2p hosts on loopback,
// wired as the agent commands wire them (p2p.Config.OnBlobBytes =
// ObserveBlobBytes). One fetches a blob of several pieces from the other:
// ogpu_blob_bytes_total moves by exactly the blob's size in each
// direction, and not again when the blob is already held. The process's
// /metrics also shows libp2p's own series (go-libp2p registers them on
// the default registry), with the connection the fetch opened.
func TestMetricsBlobBytesAndLibp2p(t *testing.T) {
	if err := Register(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	host := func(seed string) (*p2p.Host, *blobstore.Store) {
		t.Helper()
		k := sha256.Sum256([]byte(seed))
		key, err := crypto.ToECDSA(k[:])
		if err != nil {
			t.Fatal(err)
		}
		store, err := blobstore.Open(t.TempDir(), blobstore.WithPieceSize(64<<10))
		if err != nil {
			t.Fatal(err)
		}
		h, err := p2p.New(ctx, p2p.Config{Key: key, Listen: p2p.LoopbackListen(), Store: store, OnBlobBytes: ObserveBlobBytes})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return h, store
	}
	server, store := host("metrics-blob-server")
	fetcher, _ := host("metrics-blob-fetcher")
	blob := make([]byte, 300<<10+123) // five pieces, the last one short
	for i := range blob {
		blob[i] = byte(i*7 + i>>9)
	}
	hash, err := store.Put(blob)
	if err != nil {
		t.Fatal(err)
	}
	ms := httptest.NewServer(Handler())
	defer ms.Close()
	before := scrape(t, ms.URL)
	if err := fetcher.ConnectPeer(ctx, server.ID(), server.Addrs()); err != nil {
		t.Fatal(err)
	}
	got, err := fetcher.Fetch(ctx, hash, p2p.FetchOptions{Peers: []peer.ID{server.ID()}})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(got); err != nil || len(b) != len(blob) {
		t.Fatalf("fetched %d bytes (%v), want %d", len(b), err, len(blob))
	}
	if _, err := fetcher.Fetch(ctx, hash, p2p.FetchOptions{Peers: []peer.ID{server.ID()}}); err != nil {
		t.Fatal(err)
	}
	after := scrape(t, ms.URL)
	for _, dir := range []string{"served", "fetched"} {
		series := `ogpu_blob_bytes_total{direction="` + dir + `"}`
		if d := after[series] - before[series]; d != float64(len(blob)) {
			t.Errorf("%s moved by %v, the blob has %d bytes", series, d, len(blob))
		}
	}
	var libp2p []string
	for s := range after {
		if strings.HasPrefix(s, "libp2p_") {
			libp2p = append(libp2p, s)
		}
	}
	if len(libp2p) == 0 {
		t.Fatal("no libp2p_* series on /metrics")
	}
	opened := 0.0
	for s, v := range after {
		if strings.HasPrefix(s, "libp2p_swarm_connections_opened_total") {
			opened += v - before[s]
		}
	}
	if opened < 1 {
		t.Errorf("libp2p_swarm_connections_opened_total moved by %v after a connection (libp2p series: %d)", opened, len(libp2p))
	}
}
