package p2p

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"
)

// TestM4FetchMaxSize: a fetch with MaxSize refuses a manifest that
// declares more bytes before the partial file is created, and fetches a
// blob within the limit as before.
func TestM4FetchMaxSize(t *testing.T) {
	const piece = 4 << 10
	a := newHost(t, piece)
	b := newHost(t, piece)
	connect(t, b, a)
	data := randBytes(10*piece, 7)
	hash := put(t, a, data)

	_, err := b.Fetch(testCtx(t), hash, FetchOptions{Peers: []peer.ID{a.ID()}, MaxSize: int64(len(data) - 1)})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("fetch with MaxSize below the blob: %v, want ErrTooLarge", err)
	}
	entries, _ := os.ReadDir(filepath.Join(b.store.Dir(), "partial"))
	if len(entries) != 0 {
		t.Fatalf("the refused fetch left %d files under partial/: nothing may be allocated", len(entries))
	}
	path, err := b.Fetch(testCtx(t), hash, FetchOptions{Peers: []peer.ID{a.ID()}, MaxSize: int64(len(data))})
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); string(got) != string(data) {
		t.Fatal("fetched blob differs")
	}
}
