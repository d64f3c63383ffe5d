package p2p

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	ethcrypto "github.com/ethereum/go-ethereum/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/types"
)

// testCtx bounds a test's network operations. It is no timing assertion:
// a healthy run takes a small fraction of it.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

type hostOpt func(*Config)

func withBootstrap(hs ...*Host) hostOpt {
	return func(c *Config) {
		for _, h := range hs {
			c.Bootstrap = append(c.Bootstrap, h.Addrs()[0])
		}
	}
}

func withStore(s *blobstore.Store) hostOpt {
	return func(c *Config) { c.Store = s }
}

func withAuthorize(f func(context.Context, peer.ID, types.Hash) error) hostOpt {
	return func(c *Config) { c.Authorize = f }
}

// newHost starts a real host on loopback with a store of pieceSize pieces
// in a temporary directory.
func newHost(t testing.TB, pieceSize int64, opts ...hostOpt) *Host {
	t.Helper()
	key, err := ethcrypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	store, err := blobstore.Open(t.TempDir(), blobstore.WithPieceSize(pieceSize))
	if err != nil {
		t.Fatal(err)
	}
	c := Config{
		Key:    key,
		Listen: LoopbackListen(),
		Store:  store,
		Logger: slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		o(&c)
	}
	h, err := New(testCtx(t), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func connect(t testing.TB, a, b *Host) {
	t.Helper()
	if err := a.ConnectPeer(testCtx(t), b.ID(), b.Addrs()); err != nil {
		t.Fatal(err)
	}
}

func randBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func put(t testing.TB, h *Host, data []byte) types.Hash {
	t.Helper()
	hash, err := h.store.Put(data)
	if err != nil {
		t.Fatal(err)
	}
	return hash
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// corruptPiece flips bytes of piece i of h's stored copy of blob hash on
// disk, so that the real store serves wrong bytes for it.
func corruptPiece(t testing.TB, h *Host, hash types.Hash, i int) {
	t.Helper()
	path, err := h.store.Path(hash)
	if err != nil {
		t.Fatal(err)
	}
	m, err := h.store.Manifest(hash)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	off := int64(i)*m.PieceSize + 10
	b := make([]byte, 4)
	f.ReadAt(b, off)
	for k := range b {
		b[k] ^= 0x5a
	}
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond until it holds or the test context ends.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	ctx := testCtx(t)
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("gave up waiting for %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func peerIDs(ais []peer.AddrInfo) []peer.ID {
	var out []peer.ID
	for _, ai := range ais {
		out = append(out, ai.ID)
	}
	slices.Sort(out)
	return out
}

// modelPath returns the tiny real model, or skips the test.
func modelPath(t testing.TB) string {
	dirs := []string{os.Getenv("OGPU_MODELS"), filepath.Join("..", "..", "..", "shared", "models")}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		p := filepath.Join(d, "stories260K.gguf")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("stories260K.gguf not found: set OGPU_MODELS to the folder holding it")
	return ""
}
