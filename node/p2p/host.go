// Package p2p is the off-chain network of providers and clients: a libp2p
// host (Noise security, TCP and QUIC transports) with a Kademlia DHT to find
// which peers hold a blob, the /ogpu/blob/1 protocol to fetch blobs in
// verified pieces from several peers at once, and signed capability adverts
// over GossipSub.
//
// Node identities are secp256k1 keys, the same curve as Ethereum accounts:
// AddressOf turns a peer id into the account address without contacting the
// peer.
package p2p

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/types"
)

// DHTPrefix is the protocol prefix of the oGPU Kademlia DHT, kept apart from
// the public IPFS DHT.
const DHTPrefix = "/ogpu"

// DefaultListen returns the listen addresses used when Config.Listen is
// empty: every interface, ephemeral TCP and QUIC ports.
func DefaultListen() []string {
	return []string{"/ip4/0.0.0.0/tcp/0", "/ip4/0.0.0.0/udp/0/quic-v1"}
}

// LoopbackListen returns loopback-only listen addresses with ephemeral
// ports, for tests and single-machine networks.
func LoopbackListen() []string {
	return []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"}
}

// maxServing is the most piece responses a host prepares and sends at once
// (so at most maxServing × MaxPieceSize bytes of buffers).
const maxServing = 32

// maxServingPerPeer is the most piece requests of one peer served at once;
// more wait.
const maxServingPerPeer = 8

// Config configures a Host.
type Config struct {
	// Key is the node identity (required).
	Key *ecdsa.PrivateKey
	// Listen lists multiaddrs to listen on; empty means DefaultListen().
	Listen []string
	// Bootstrap lists multiaddrs, each ending in /p2p/<id>, of peers to join
	// the network through. New fails if none of them can be reached.
	Bootstrap []string
	// Store holds the blobs this host serves and fetches into. Nil: the host
	// serves no blobs and cannot Fetch.
	Store *blobstore.Store
	// Authorize decides whether remote may fetch blob h; it is called for
	// every manifest and piece request. Nil allows all. A non-nil error
	// refuses the request; the fetcher sees ErrForbidden and the message.
	// An error wrapping ErrUnavailable (the hook cannot decide now, e.g.
	// its chain node is down) is no refusal: the fetcher sees
	// ErrUnavailable and may ask again.
	// SetAuthorize replaces it on a running host.
	Authorize func(ctx context.Context, remote peer.ID, h types.Hash) error
	// Logger receives the host's logs; nil means slog.Default().
	Logger *slog.Logger
	// OnBlobBytes, if set, is told the size of every blob piece this host
	// sent to a peer (served) or fetched and verified (not served): the
	// blobs' content, not manifests or framing (metrics; it must not
	// block).
	OnBlobBytes func(served bool, n int)
	// AuthorizeTimeout bounds one Authorize call; zero means
	// DefaultAuthorizeTimeout.
	AuthorizeTimeout time.Duration
}

// Host is a running oGPU network node.
type Host struct {
	h         host.Host
	dht       *dht.IpfsDHT
	ps        *pubsub.PubSub
	adverts   *pubsub.Topic
	store     *blobstore.Store
	authMu    sync.RWMutex
	authorize func(context.Context, peer.ID, types.Hash) error
	log       *slog.Logger
	onBytes   func(served bool, n int)
	authWait  time.Duration

	ctx     context.Context // cancelled by Close
	cancel  context.CancelFunc
	trackMu sync.Mutex // orders goTracked's wg.Add before Close's wg.Wait
	wg      sync.WaitGroup

	// serveSlots bounds the pieces being read and sent at once;
	// servingPeer counts them per peer.
	serveSlots  chan struct{}
	servingMu   sync.Mutex
	servingPeer map[peer.ID]*peerSlots

	fetchMu  sync.Mutex
	fetching map[types.Hash]*fetchCall

	closeOnce sync.Once
	closeErr  error

	// Counters for tests.
	servedMu        sync.Mutex
	served          map[peer.ID]int // pieces sent, per peer
	badPieces       atomic.Int64
	advertsRejected atomic.Int64
}

// New starts a host: it listens, starts the DHT (server mode) and GossipSub,
// serves the blob protocol and connects to the bootstrap peers. ctx bounds
// the start only; the host runs until Close.
func New(ctx context.Context, c Config) (*Host, error) {
	priv, err := libp2pKey(c.Key)
	if err != nil {
		return nil, err
	}
	listen := c.Listen
	if len(listen) == 0 {
		listen = DefaultListen()
	}
	for _, a := range listen {
		if _, err := ma.NewMultiaddr(a); err != nil {
			return nil, fmt.Errorf("listen address %q: %w", a, err)
		}
	}
	var boot []peer.AddrInfo
	for _, a := range c.Bootstrap {
		ai, err := peer.AddrInfoFromString(a)
		if err != nil {
			return nil, fmt.Errorf("bootstrap address %q must be a multiaddr ending in /p2p/<peer id>: %w", a, err)
		}
		boot = append(boot, *ai)
	}
	log := c.Logger
	if log == nil {
		log = slog.Default()
	}
	lh, err := libp2p.New(
		libp2p.Identity(priv),
		libp2p.ListenAddrStrings(listen...),
		libp2p.Security(noise.ID, noise.New),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Transport(quic.NewTransport),
		libp2p.UserAgent("ogpu"),
	)
	if err != nil {
		return nil, fmt.Errorf("cannot start libp2p host: %w", err)
	}
	hctx, cancel := context.WithCancel(context.Background())
	h := &Host{
		h:         lh,
		store:     c.Store,
		authorize: c.Authorize,
		onBytes:   c.OnBlobBytes,
		authWait:  c.AuthorizeTimeout,
		log:       log.With("self", lh.ID().String()),
		ctx:       hctx,
		cancel:    cancel,
		fetching:  map[types.Hash]*fetchCall{},

		serveSlots:  make(chan struct{}, maxServing),
		servingPeer: map[peer.ID]*peerSlots{},
		served:      map[peer.ID]int{},
	}
	fail := func(err error) (*Host, error) {
		h.Close()
		return nil, err
	}
	h.dht, err = dht.New(lh,
		dht.Mode(dht.ModeServer),
		dht.ProtocolPrefix(DHTPrefix),
		dht.BootstrapPeers(boot...),
	)
	if err != nil {
		return fail(fmt.Errorf("cannot start DHT: %w", err))
	}
	if h.ps, err = pubsub.NewGossipSub(hctx, lh); err != nil {
		return fail(fmt.Errorf("cannot start gossipsub: %w", err))
	}
	if err := h.ps.RegisterTopicValidator(AdvertTopic, h.validateAdvert); err != nil {
		return fail(err)
	}
	if h.adverts, err = h.ps.Join(AdvertTopic); err != nil {
		return fail(err)
	}
	lh.SetStreamHandler(ProtocolBlob, h.handleBlob)

	if len(boot) > 0 {
		var errs []error
		for _, ai := range boot {
			if ai.ID == lh.ID() {
				continue
			}
			cctx, ccancel := context.WithTimeout(ctx, 15*time.Second)
			err := lh.Connect(cctx, ai)
			ccancel()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", ai.ID, err))
			}
		}
		if len(errs) == len(boot) {
			return fail(fmt.Errorf("cannot reach any bootstrap peer (check the addresses and that the peers run): %w", errors.Join(errs...)))
		}
		for _, err := range errs {
			h.log.Warn("bootstrap peer unreachable", "err", err)
		}
	}
	if err := h.dht.Bootstrap(hctx); err != nil {
		return fail(err)
	}
	return h, nil
}

// SetAuthorize replaces the host's Authorize hook (see Config.Authorize):
// an agent that owns the access rules installs them on the host it is
// given, so that the host cannot serve through rules nobody restricts.
// Nil allows all.
func (h *Host) SetAuthorize(f func(ctx context.Context, remote peer.ID, hash types.Hash) error) {
	h.authMu.Lock()
	h.authorize = f
	h.authMu.Unlock()
}

func (h *Host) authorizer() func(context.Context, peer.ID, types.Hash) error {
	h.authMu.RLock()
	defer h.authMu.RUnlock()
	return h.authorize
}

// ID returns the host's peer id.
func (h *Host) ID() peer.ID { return h.h.ID() }

// Addrs returns the host's listen multiaddrs, each ending in /p2p/<id>.
func (h *Host) Addrs() []string {
	ais, err := peer.AddrInfoToP2pAddrs(&peer.AddrInfo{ID: h.h.ID(), Addrs: h.h.Addrs()})
	if err != nil {
		return nil
	}
	out := make([]string, len(ais))
	for i, a := range ais {
		out[i] = a.String()
	}
	slices.Sort(out)
	return out
}

// Host returns the underlying libp2p host, for extra protocols.
func (h *Host) Host() host.Host { return h.h }

// Connect connects to the peer at addr, a multiaddr ending in /p2p/<id>.
func (h *Host) Connect(ctx context.Context, addr string) error {
	ai, err := peer.AddrInfoFromString(addr)
	if err != nil {
		return fmt.Errorf("peer address %q must be a multiaddr ending in /p2p/<peer id>: %w", addr, err)
	}
	if err := h.h.Connect(ctx, *ai); err != nil {
		return fmt.Errorf("cannot connect to %s: %w", ai.ID, err)
	}
	return nil
}

// ConnectPeer connects to peer id at any of addrs (multiaddrs, with or
// without the /p2p/<id> suffix). With no addrs, the addresses already known
// (from the DHT or earlier connections) are used.
func (h *Host) ConnectPeer(ctx context.Context, id peer.ID, addrs []string) error {
	ai := peer.AddrInfo{ID: id}
	for _, s := range addrs {
		a, err := ma.NewMultiaddr(s)
		if err != nil {
			return fmt.Errorf("address %q of peer %s: %w", s, id, err)
		}
		transport, pid := peer.SplitAddr(a)
		if pid != "" && pid != id {
			return fmt.Errorf("address %q names peer %s, not %s", s, pid, id)
		}
		if transport != nil {
			ai.Addrs = append(ai.Addrs, transport)
		}
	}
	if err := h.h.Connect(ctx, ai); err != nil {
		return fmt.Errorf("cannot connect to %s: %w", id, err)
	}
	return nil
}

// addAddrs remembers addresses of a peer learnt from the DHT or an advert.
func (h *Host) addAddrs(ai peer.AddrInfo) {
	if len(ai.Addrs) > 0 && ai.ID != h.h.ID() {
		h.h.Peerstore().AddAddrs(ai.ID, ai.Addrs, peerstore.TempAddrTTL)
	}
}

// Close stops the host: open streams are reset and every goroutine the
// host started has returned when Close returns.
func (h *Host) Close() error {
	h.closeOnce.Do(func() {
		h.trackMu.Lock()
		h.cancel() // stops gossipsub, advert readers and Provide calls
		h.trackMu.Unlock()
		var errs []error
		if h.dht != nil {
			errs = append(errs, h.dht.Close())
		}
		errs = append(errs, h.h.Close())
		h.wg.Wait()
		h.closeErr = errors.Join(errs...)
	})
	return h.closeErr
}
