package p2p

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	mh "github.com/multiformats/go-multihash"

	"github.com/ogpu-network/ogpu/types"
)

// ErrNoDHTPeers: the DHT's routing table is empty, so nothing can be
// announced or looked up.
var ErrNoDHTPeers = errors.New("no DHT peers: connect to a bootstrap peer first")

// DefaultMaxHolders is the number of holders FindHolders looks for when max
// is 0 or less, and Fetch's lookup size.
const DefaultMaxHolders = 20

// CIDOf returns the DHT key of a blob: a CIDv1 (raw codec) of the sha256
// multihash of its 32-byte hash.
func CIDOf(hash types.Hash) cid.Cid {
	m, err := mh.Encode(hash[:], mh.SHA2_256)
	if err != nil {
		panic(err) // cannot happen: a 32-byte digest is a valid sha2-256
	}
	return cid.NewCidV1(cid.Raw, m)
}

// routingWait bounds how long a lookup waits for the routing table to fill.
const routingWait = 15 * time.Second

// waitRouting waits until the DHT has a peer in its routing table. Peers
// join the table asynchronously after a connection, once they answered a
// DHT query.
func (h *Host) waitRouting(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, routingWait)
	defer cancel()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for h.dht.RoutingTable().Size() == 0 {
		if len(h.h.Network().Peers()) == 0 {
			return ErrNoDHTPeers
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (connected, but no peer answered as a DHT server)", ErrNoDHTPeers)
		case <-h.ctx.Done():
			return errors.New("host closed")
		case <-t.C:
		}
	}
	return nil
}

// Provide announces in the DHT that this host holds blob hash.
func (h *Host) Provide(ctx context.Context, hash types.Hash) error {
	if err := h.waitRouting(ctx); err != nil {
		return fmt.Errorf("cannot announce blob %x: %w", hash, err)
	}
	if err := h.dht.Provide(ctx, CIDOf(hash), true); err != nil {
		return fmt.Errorf("cannot announce blob %x: %w", hash, err)
	}
	return nil
}

// FindHolders looks up in the DHT up to max peers (other than this host)
// that announced blob hash. Their addresses are remembered for dialing. No
// holder is not an error: the result is empty.
func (h *Host) FindHolders(ctx context.Context, hash types.Hash, max int) ([]peer.AddrInfo, error) {
	if max <= 0 {
		max = DefaultMaxHolders
	}
	if err := h.waitRouting(ctx); err != nil {
		return nil, fmt.Errorf("cannot look up blob %x: %w", hash, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out []peer.AddrInfo
	for ai := range h.dht.FindProvidersAsync(ctx, CIDOf(hash), max+1) {
		if ai.ID == h.h.ID() || len(out) == max {
			continue
		}
		h.addAddrs(ai)
		out = append(out, ai)
	}
	if err := ctx.Err(); err != nil && len(out) == 0 {
		return nil, fmt.Errorf("cannot look up blob %x: %w", hash, err)
	}
	return out, nil
}

// FindPeer looks up peer id's addresses in the DHT and connects to it (at
// once if already connected).
func (h *Host) FindPeer(ctx context.Context, id peer.ID) error {
	if h.h.Network().Connectedness(id) == network.Connected {
		return nil
	}
	if err := h.waitRouting(ctx); err != nil {
		return fmt.Errorf("cannot look up peer %s: %w", id, err)
	}
	ai, err := h.dht.FindPeer(ctx, id)
	if err != nil {
		return fmt.Errorf("cannot look up peer %s: %w", id, err)
	}
	h.addAddrs(ai)
	if err := h.h.Connect(ctx, ai); err != nil {
		return fmt.Errorf("cannot connect to %s: %w", id, err)
	}
	return nil
}
