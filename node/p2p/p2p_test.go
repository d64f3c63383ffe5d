package p2p

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ethcrypto "github.com/ethereum/go-ethereum/crypto"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/types"
)

func TestLoadOrCreateKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "node.key")
	k1, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	k2, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	id1, _ := PeerIDOf(&k1.PublicKey)
	id2, _ := PeerIDOf(&k2.PublicKey)
	if id1 != id2 {
		t.Fatalf("peer id changed across loads: %s, %s", id1, id2)
	}

	h, err := New(testCtx(t), Config{Key: k1, Listen: LoopbackListen()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if h.ID() != id1 {
		t.Fatalf("host id %s, want the key's peer id %s", h.ID(), id1)
	}

	for _, tc := range []struct{ name, content string }{
		{"garbage", "not a key\n"},
		{"short", "abcd"},
		{"empty", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "node.key")
			os.WriteFile(p, []byte(tc.content), 0o600)
			_, err := LoadOrCreateKey(p)
			if err == nil || !strings.Contains(err.Error(), "corrupt") || !strings.Contains(err.Error(), p) {
				t.Fatalf("err = %v, want a corrupt-key error naming the file", err)
			}
			if b, _ := os.ReadFile(p); string(b) != tc.content {
				t.Fatal("corrupt key file was overwritten")
			}
		})
	}
}

func TestAddressOf(t *testing.T) {
	k, _ := ethcrypto.GenerateKey()
	id, err := PeerIDOf(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := AddressOf(id)
	if err != nil {
		t.Fatal(err)
	}
	if want := ethcrypto.PubkeyToAddress(k.PublicKey); addr != want {
		t.Fatalf("AddressOf = %s, want %s", addr, want)
	}

	_, edPub, _ := crypto.GenerateEd25519Key(nil)
	edID, _ := peer.IDFromPublicKey(edPub)
	if _, err := AddressOf(edID); err == nil || !strings.Contains(err.Error(), "secp256k1") {
		t.Fatalf("AddressOf(ed25519 id) err = %v, want a key-type error", err)
	}
	if _, err := AddressOf(peer.ID("garbage")); err == nil {
		t.Fatal("AddressOf(garbage) accepted it")
	}
	if _, err := PeerIDOf(nil); err == nil {
		t.Fatal("PeerIDOf(nil) accepted it")
	}
}

func TestNewErrors(t *testing.T) {
	k, _ := ethcrypto.GenerateKey()
	ctx := testCtx(t)
	for _, tc := range []struct {
		name string
		c    Config
		want string
	}{
		{"no key", Config{Listen: LoopbackListen()}, "secp256k1"},
		{"bad listen", Config{Key: k, Listen: []string{"not-a-multiaddr"}}, "listen address"},
		{"bootstrap without id", Config{Key: k, Listen: LoopbackListen(), Bootstrap: []string{"/ip4/127.0.0.1/tcp/1"}}, "/p2p/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := New(ctx, tc.c)
			if err == nil {
				h.Close()
				t.Fatal("New accepted it")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	// A bootstrap peer that does not run.
	dead := newHost(t, blobstore.MinPieceSize)
	addr := dead.Addrs()[0]
	dead.Close()
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if h, err := New(cctx, Config{Key: k, Listen: LoopbackListen(), Bootstrap: []string{addr}}); err == nil {
		h.Close()
		t.Fatal("New with an unreachable bootstrap peer succeeded")
	} else if !strings.Contains(err.Error(), "bootstrap") {
		t.Fatalf("err = %v, want a bootstrap error", err)
	}
}

// Two holders announce a 5 MiB blob in the DHT; a third host that only
// knows them as bootstrap peers finds both and fetches from both.
func TestFetchThroughDHT(t *testing.T) {
	const piece = 256 << 10
	data := randBytes(5<<20, 1)
	a := newHost(t, piece)
	b := newHost(t, piece, withBootstrap(a))
	hash := put(t, a, data)
	put(t, b, data)
	ctx := testCtx(t)
	if err := a.Provide(ctx, hash); err != nil {
		t.Fatal(err)
	}
	if err := b.Provide(ctx, hash); err != nil {
		t.Fatal(err)
	}

	c := newHost(t, piece, withBootstrap(a, b))
	holders, err := c.FindHolders(ctx, hash, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []peer.ID{a.ID(), b.ID()}
	slices.Sort(want)
	if got := peerIDs(holders); !slices.Equal(got, want) {
		t.Fatalf("FindHolders = %v, want %v", got, want)
	}

	var last [2]int64
	path, err := c.Fetch(ctx, hash, FetchOptions{Progress: func(done, total int64) { last = [2]int64{done, total} }})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readFile(t, path), data) {
		t.Fatal("fetched content differs")
	}
	if last != [2]int64{int64(len(data)), int64(len(data))} {
		t.Fatalf("last progress %v, want done = total = %d", last, len(data))
	}
	na, nb := a.servedTo(c.ID()), b.servedTo(c.ID())
	if na == 0 || nb == 0 || na+nb != 20 {
		t.Fatalf("pieces served: a %d, b %d; want both > 0 and 20 in all", na, nb)
	}
	// Held now: no network.
	if p2, err := c.Fetch(ctx, hash, FetchOptions{}); err != nil || p2 != path {
		t.Fatalf("second Fetch = %s, %v", p2, err)
	}
	if na2, nb2 := a.servedTo(c.ID()), b.servedTo(c.ID()); na2 != na || nb2 != nb {
		t.Fatal("second Fetch requested pieces")
	}

	// A fourth host that only knows a fetches from b, named as a hint: b's
	// address comes from the DHT.
	d := newHost(t, piece, withBootstrap(a))
	path, err = d.Fetch(ctx, hash, FetchOptions{Peers: []peer.ID{b.ID()}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readFile(t, path), data) {
		t.Fatal("fetched content differs")
	}
	if n := b.servedTo(d.ID()); n != 20 {
		t.Fatalf("b served %d pieces to d, want 20", n)
	}
}

// The real tiny model, fetched in 16 KiB pieces with more requests in
// flight than the server serves at once per peer, hashes to its sha256sum.
func TestFetchModel(t *testing.T) {
	model := modelPath(t)
	a := newHost(t, 16<<10)
	hash, err := a.store.PutFile(model)
	if err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(readFile(t, model))
	if hash != types.Hash(want) {
		t.Fatal("blob id is not the model's sha256")
	}
	c := newHost(t, 16<<10)
	connect(t, c, a)
	path, err := c.Fetch(testCtx(t), hash, FetchOptions{Peers: []peer.ID{a.ID()}, Parallel: 2 * maxServingPerPeer})
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(readFile(t, path)) != want {
		t.Fatal("fetched model differs")
	}
}

// One of two holders has a piece corrupted on disk: the fetcher rejects it,
// drops that peer and gets the piece from the other.
func TestFetchBadPiece(t *testing.T) {
	const piece = 64 << 10
	data := randBytes(10*piece+5, 2)
	good := newHost(t, piece)
	bad := newHost(t, piece)
	hash := put(t, good, data)
	put(t, bad, data)
	corruptPiece(t, bad, hash, 0)

	c := newHost(t, piece)
	connect(t, c, good)
	connect(t, c, bad)
	// The first piece (0) goes to the first peer: the bad one.
	path, err := c.Fetch(testCtx(t), hash, FetchOptions{Peers: []peer.ID{bad.ID(), good.ID()}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readFile(t, path), data) {
		t.Fatal("fetched content differs")
	}
	if n := c.badPieces.Load(); n != 1 {
		t.Fatalf("bad pieces rejected: %d, want 1", n)
	}
	// 11 pieces, one of them sent twice: bad, then good.
	if ng, nb := good.servedTotal(), bad.servedTotal(); ng+nb != 12 {
		t.Fatalf("pieces served: good %d, bad %d; want 12 in all", ng, nb)
	}
}

// Every holder corrupted: the fetch fails, saying why, and keeps nothing.
func TestFetchAllBad(t *testing.T) {
	const piece = 16 << 10
	data := randBytes(3*piece, 3)
	bad := newHost(t, piece)
	hash := put(t, bad, data)
	corruptPiece(t, bad, hash, 1)
	c := newHost(t, piece)
	connect(t, c, bad)
	_, err := c.Fetch(testCtx(t), hash, FetchOptions{Peers: []peer.ID{bad.ID()}})
	if !errors.Is(err, blobstore.ErrBadPiece) || !strings.Contains(err.Error(), "every peer failed") {
		t.Fatalf("err = %v, want every peer failed with a bad piece", err)
	}
	if c.store.Has(hash) {
		t.Fatal("blob stored despite a bad piece")
	}
}

// A download interrupted earlier resumes: only the missing pieces are
// requested.
func TestFetchResume(t *testing.T) {
	const piece = 32 << 10
	data := randBytes(12*piece+100, 4)
	a := newHost(t, piece)
	hash := put(t, a, data)
	c := newHost(t, piece)

	m, err := a.store.Manifest(hash)
	if err != nil {
		t.Fatal(err)
	}
	part, err := c.store.Begin(m)
	if err != nil {
		t.Fatal(err)
	}
	have := []int{0, 1, 2, 5, 8, 12}
	for _, i := range have {
		b, _ := a.store.ReadPiece(hash, i)
		if err := part.WritePiece(i, b); err != nil {
			t.Fatal(err)
		}
	}
	part.Close()

	connect(t, c, a)
	var first [2]int64
	calls := 0
	path, err := c.Fetch(testCtx(t), hash, FetchOptions{Peers: []peer.ID{a.ID()}, Progress: func(done, total int64) {
		if calls == 0 {
			first = [2]int64{done, total}
		}
		calls++
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readFile(t, path), data) {
		t.Fatal("fetched content differs")
	}
	missing := m.NumPieces() - len(have)
	if n := a.servedTotal(); n != missing {
		t.Fatalf("server sent %d pieces, want only the %d missing", n, missing)
	}
	if want := int64(5*piece + 100); first != [2]int64{want, int64(len(data))} {
		t.Fatalf("first progress %v, want %d of %d already held", first, want, len(data))
	}
	if calls != missing+1 {
		t.Fatalf("%d progress calls, want %d", calls, missing+1)
	}
}

func TestFetchAuthorize(t *testing.T) {
	const piece = 16 << 10
	data := randBytes(4*piece, 5)
	var mu sync.Mutex
	var asked []types.Hash
	refuse := withAuthorize(func(_ context.Context, remote peer.ID, h types.Hash) error {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, h)
		return errors.New("no job of yours needs this blob")
	})
	closed := newHost(t, piece, refuse)
	hash := put(t, closed, data)
	c := newHost(t, piece)
	connect(t, c, closed)
	ctx := testCtx(t)

	_, err := c.Fetch(ctx, hash, FetchOptions{Peers: []peer.ID{closed.ID()}})
	if !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "no job of yours") {
		t.Fatalf("err = %v, want ErrForbidden with the reason", err)
	}
	mu.Lock()
	asked1 := slices.Clone(asked)
	mu.Unlock()
	if len(asked1) != 1 || asked1[0] != hash {
		t.Fatalf("Authorize asked about %x, want once about %x", asked1, hash)
	}

	// With an open holder beside it, the fetch succeeds.
	open := newHost(t, piece)
	put(t, open, data)
	connect(t, c, open)
	path, err := c.Fetch(ctx, hash, FetchOptions{Peers: []peer.ID{closed.ID(), open.ID()}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readFile(t, path), data) {
		t.Fatal("fetched content differs")
	}
	if closed.servedTotal() != 0 {
		t.Fatal("refusing peer served pieces")
	}
}

// TestFetchUnavailable: a holder whose Authorize cannot decide now (its
// chain node is down: an error wrapping ErrUnavailable) answers
// "unavailable", which the fetcher sees as ErrUnavailable, not as a
// refusal; once it can decide it serves the blob. A holder that refuses
// is still ErrForbidden and never ErrUnavailable (a fetcher retries only
// on the first).
func TestFetchUnavailable(t *testing.T) {
	const piece = 16 << 10
	data := randBytes(4*piece, 6)
	var down atomic.Bool
	down.Store(true)
	h := newHost(t, piece, withAuthorize(func(_ context.Context, remote peer.ID, _ types.Hash) error {
		if down.Load() {
			return fmt.Errorf("cannot read the chain: %w", ErrUnavailable)
		}
		return nil
	}))
	hash := put(t, h, data)
	c := newHost(t, piece)
	connect(t, c, h)
	ctx := testCtx(t)
	_, err := c.Fetch(ctx, hash, FetchOptions{Peers: []peer.ID{h.ID()}})
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "cannot read the chain") {
		t.Fatalf("err = %v, want ErrUnavailable (not ErrForbidden) with the reason", err)
	}
	down.Store(false)
	path, err := c.Fetch(ctx, hash, FetchOptions{Peers: []peer.ID{h.ID()}})
	if err != nil {
		t.Fatalf("once the holder can decide: %v", err)
	}
	if !bytes.Equal(readFile(t, path), data) {
		t.Fatal("fetched content differs")
	}

	refuser := newHost(t, piece, withAuthorize(func(context.Context, peer.ID, types.Hash) error {
		return errors.New("no job of yours needs this blob")
	}))
	hash2 := put(t, refuser, randBytes(piece, 7))
	connect(t, c, refuser)
	if _, err := c.Fetch(ctx, hash2, FetchOptions{Peers: []peer.ID{refuser.ID()}}); !errors.Is(err, ErrForbidden) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("a refusal: err = %v, want ErrForbidden only", err)
	}
}

func TestFetchNotHeld(t *testing.T) {
	a := newHost(t, blobstore.MinPieceSize)
	c := newHost(t, blobstore.MinPieceSize)
	connect(t, c, a)
	ctx := testCtx(t)
	_, err := c.Fetch(ctx, types.Hash{7}, FetchOptions{Peers: []peer.ID{a.ID()}})
	if !errors.Is(err, ErrNotHeld) {
		t.Fatalf("err = %v, want ErrNotHeld", err)
	}
	// The DHT knows no holder.
	_, err = c.Fetch(ctx, types.Hash{7}, FetchOptions{})
	if !errors.Is(err, ErrNoHolders) {
		t.Fatalf("err = %v, want ErrNoHolders", err)
	}
	// A host with no peers at all.
	lone := newHost(t, blobstore.MinPieceSize)
	if _, err := lone.Fetch(ctx, types.Hash{7}, FetchOptions{}); !errors.Is(err, ErrNoDHTPeers) {
		t.Fatalf("err = %v, want ErrNoDHTPeers", err)
	}
	if err := lone.Provide(ctx, types.Hash{7}); !errors.Is(err, ErrNoDHTPeers) {
		t.Fatalf("Provide err = %v, want ErrNoDHTPeers", err)
	}
}

// A holder whose manifest is false (its pieces are right, their whole is
// another blob) makes the fetch fail clearly, keeping nothing.
func TestFetchLyingManifest(t *testing.T) {
	const piece = 16 << 10
	data := randBytes(3*piece, 6)
	liar := newHost(t, piece)
	real := put(t, liar, data)
	// Rename the stored blob on disk to another hash, with a manifest that
	// claims it.
	claimed := types.Hash{0xee, 1}
	m, _ := liar.store.Manifest(real)
	m.Hash = claimed
	dir := filepath.Join(liar.store.Dir(), "blobs")
	src, _ := liar.store.Path(real)
	dst := filepath.Join(dir, strings.TrimPrefix(claimed.Hex(), "0x"))
	if err := os.Rename(src, dst); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst+".json", m.Encode(), 0o644); err != nil {
		t.Fatal(err)
	}

	c := newHost(t, piece)
	connect(t, c, liar)
	_, err := c.Fetch(testCtx(t), claimed, FetchOptions{Peers: []peer.ID{liar.ID()}})
	if !errors.Is(err, blobstore.ErrHashMismatch) || !strings.Contains(err.Error(), "manifest") {
		t.Fatalf("err = %v, want ErrHashMismatch", err)
	}
	if c.store.Has(claimed) {
		t.Fatal("false blob stored")
	}
	if ents, _ := os.ReadDir(filepath.Join(c.store.Dir(), "partial")); len(ents) != 0 {
		t.Fatalf("false partial kept: %v", ents)
	}
}

// Garbage on a blob stream: the server answers "bad request", closes the
// stream, and keeps serving.
func TestBlobGarbage(t *testing.T) {
	const piece = 16 << 10
	a := newHost(t, piece)
	hash := put(t, a, randBytes(2*piece, 7))
	c := newHost(t, piece)
	connect(t, c, a)
	ctx := testCtx(t)

	q := request{kind: kindPiece, hash: hash, index: 0}.encode()
	for _, tc := range []struct {
		name string
		send []byte
	}{
		{"huge frame", []byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3}},
		{"short request", []byte{0, 0, 0, 3, 1, 2, 3}},
		{"unknown kind", append([]byte{0, 0, 0, requestLen, 9}, q[1:]...)},
		{"manifest with index", append([]byte{0, 0, 0, requestLen, kindManifest}, append(hash[:], 0, 0, 0, 1)...)},
		{"piece out of range", append([]byte{0, 0, 0, requestLen, kindPiece}, append(hash[:], 0, 0, 0, 2)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := c.h.NewStream(ctx, a.ID(), ProtocolBlob)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			_, err = readResponse(s, 1<<20)
			if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "peer says") {
				t.Fatalf("response err = %v, want the server's bad-request status", err)
			}
			if tc.name == "piece out of range" {
				return // a valid frame: the stream stays open
			}
			if _, err := readResponse(s, 1<<20); err == nil {
				t.Fatal("stream still open after garbage")
			}
		})
	}
	// A stream closed half way through a frame.
	s, _ := c.h.NewStream(ctx, a.ID(), ProtocolBlob)
	s.Write([]byte{0, 0, 0, requestLen, kindManifest})
	s.CloseWrite()
	if _, err := readResponse(s, 1<<20); err == nil {
		t.Fatal("response to a truncated request")
	}
	s.Close()

	if _, err := c.Fetch(ctx, hash, FetchOptions{Peers: []peer.ID{a.ID()}}); err != nil {
		t.Fatalf("server no longer serves after garbage: %v", err)
	}
}

func TestAdverts(t *testing.T) {
	a := newHost(t, blobstore.MinPieceSize)
	b := newHost(t, blobstore.MinPieceSize)
	forger := newHost(t, blobstore.MinPieceSize)
	connect(t, b, a)
	connect(t, b, forger)
	ctx := testCtx(t)
	ch, err := b.Adverts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a to see b's subscription", func() bool { return slices.Contains(a.adverts.ListPeers(), b.ID()) })
	waitFor(t, "forger to see b's subscription", func() bool { return slices.Contains(forger.adverts.ListPeers(), b.ID()) })

	provider := types.Address{1, 2, 3}
	model := types.Hash{9}
	if err := a.PublishAdvert(ctx, Advert{Provider: provider, Attributes: []string{"gpu=h100"}, Runtimes: []string{"llama.cpp"}, Models: []types.Hash{model}, Class: "gpu-large"}); err != nil {
		t.Fatal(err)
	}
	got := <-ch
	if got.PeerID != a.ID().String() || got.Provider != provider || got.Class != "gpu-large" ||
		!slices.Equal(got.Models, []types.Hash{model}) || !slices.Equal(got.Addrs, a.Addrs()) || got.Time == 0 {
		t.Fatalf("received advert %+v", got)
	}

	if err := a.PublishAdvert(ctx, Advert{PeerID: b.ID().String(), Time: 1}); err == nil {
		t.Fatal("PublishAdvert of another peer's advert accepted")
	}

	// The forger drops its own check and publishes an advert naming a, then
	// garbage. b rejects both.
	if err := forger.ps.UnregisterTopicValidator(AdvertTopic); err != nil {
		t.Fatal(err)
	}
	forged, _ := json.Marshal(Advert{PeerID: a.ID().String(), Provider: types.Address{0xba, 0xd}, Time: 1})
	if err := forger.adverts.Publish(ctx, forged); err != nil {
		t.Fatal(err)
	}
	if err := forger.adverts.Publish(ctx, []byte("{garbage")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b to reject both", func() bool { return b.advertsRejected.Load() >= 2 })

	// The next advert b delivers is a's second, genuine one.
	if err := a.PublishAdvert(ctx, Advert{Provider: provider, Class: "second", Time: 2}); err != nil {
		t.Fatal(err)
	}
	if got := <-ch; got.Class != "second" || got.PeerID != a.ID().String() {
		t.Fatalf("received %+v, want a's second advert", got)
	}

	// The channel closes with the host.
	b.Close()
	for range ch {
	}
}

func TestAdvertValidate(t *testing.T) {
	k, _ := ethcrypto.GenerateKey()
	id, _ := PeerIDOf(&k.PublicKey)
	good := Advert{PeerID: id.String(), Addrs: []string{"/ip4/127.0.0.1/tcp/1"}, Time: 1}
	b, _ := json.Marshal(good)
	if _, err := DecodeAdvert(b); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 300)
	for _, tc := range []struct {
		name string
		edit func(a *Advert)
	}{
		{"bad peer id", func(a *Advert) { a.PeerID = "nope" }},
		{"no time", func(a *Advert) { a.Time = 0 }},
		{"bad addr", func(a *Advert) { a.Addrs = []string{"127.0.0.1:1"} }},
		{"long class", func(a *Advert) { a.Class = long }},
		{"long attribute", func(a *Advert) { a.Attributes = []string{long} }},
		{"too many models", func(a *Advert) { a.Models = make([]types.Hash, maxAdvertModels+1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := good
			tc.edit(&a)
			b, _ := json.Marshal(a)
			if _, err := DecodeAdvert(b); err == nil {
				t.Fatal("DecodeAdvert accepted it")
			}
		})
	}
	for _, s := range []string{"", "null", `{"unknown":1}`, string(b) + "{}", strings.Repeat(" ", MaxAdvertBytes+1)} {
		if _, err := DecodeAdvert([]byte(s)); err == nil {
			t.Fatalf("DecodeAdvert(%.20q) accepted it", s)
		}
	}
}

// A host closed in the middle of a fetch: Fetch fails, and a new host on
// the same store directory (a restart) requests only the pieces still
// missing.
func TestCloseDuringFetch(t *testing.T) {
	const piece = 16 << 10
	data := randBytes(64*piece, 8)
	a := newHost(t, piece)
	hash := put(t, a, data)
	dir := t.TempDir()
	store1, err := blobstore.Open(dir, blobstore.WithPieceSize(piece))
	if err != nil {
		t.Fatal(err)
	}
	c := newHost(t, piece, withStore(store1))
	connect(t, c, a)
	ctx := testCtx(t)
	calls := 0
	_, err = c.Fetch(ctx, hash, FetchOptions{Peers: []peer.ID{a.ID()}, Progress: func(done, total int64) {
		if calls++; calls == 3 { // two pieces written
			c.Close()
		}
	}})
	if err == nil {
		t.Fatal("Fetch succeeded on a closed host")
	}
	if err := c.Close(); err != nil {
		t.Logf("second Close: %v", err)
	}

	store2, err := blobstore.Open(dir, blobstore.WithPieceSize(piece))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := a.store.Manifest(hash)
	part, err := store2.Begin(m)
	if err != nil {
		t.Fatal(err)
	}
	missing := len(part.Missing())
	part.Close()
	if missing == 0 || missing > 64-2 {
		t.Fatalf("%d pieces missing after the interrupted fetch, want 1..62", missing)
	}
	c2 := newHost(t, piece, withStore(store2))
	connect(t, c2, a)
	path, err := c2.Fetch(ctx, hash, FetchOptions{Peers: []peer.ID{a.ID()}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readFile(t, path), data) {
		t.Fatal("fetched content differs")
	}
	if n := a.servedTo(c2.ID()); n != missing {
		t.Fatalf("restarted fetch requested %d pieces, want the %d missing", n, missing)
	}
}

// TestSlowAccessCheckIsUnavailable: a holder whose access check hangs (its
// chain query does not return) answers "unavailable, try again" once the
// check has taken its AuthorizeTimeout, so the requester asks again or another
// holder; before, the requester waited out the whole request (2 minutes)
// for each piece. A check that fails in time is still a refusal.
func TestSlowAccessCheckIsUnavailable(t *testing.T) {
	const piece = 16 << 10
	data := randBytes(2*piece, 7)
	h := newHost(t, piece, withAuthorize(func(ctx context.Context, _ peer.ID, _ types.Hash) error {
		<-ctx.Done() // the chain query hangs
		return fmt.Errorf("query the job: %w", ctx.Err())
	}), func(c *Config) { c.AuthorizeTimeout = 300 * time.Millisecond })
	hash := put(t, h, data)
	c := newHost(t, piece)
	connect(t, c, h)
	ctx, cancel := context.WithTimeout(testCtx(t), 20*time.Second)
	defer cancel()
	_, err := c.Fetch(ctx, hash, FetchOptions{Peers: []peer.ID{h.ID()}})
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrForbidden) || ctx.Err() != nil {
		t.Fatalf("err = %v (fetch context: %v), want ErrUnavailable before the fetch's own deadline", err, ctx.Err())
	}
	if !strings.Contains(err.Error(), "access check took longer") {
		t.Fatalf("err = %v, want the reason", err)
	}
}
