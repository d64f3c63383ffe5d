package p2p

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/ogpu-network/ogpu/types"
)

// AdvertTopic is the GossipSub topic of provider capability adverts.
const AdvertTopic = "/ogpu/adverts/1"

// Advert limits; larger adverts are rejected by every peer.
const (
	MaxAdvertBytes      = 64 << 10
	maxAdvertAddrs      = 32
	maxAdvertAttributes = 256
	maxAdvertRuntimes   = 32
	maxAdvertModels     = 1024
	maxAdvertString     = 256
)

// Advert announces what a provider offers. Adverts travel signed by the
// publishing peer (GossipSub's strict signing); peers reject an advert whose
// PeerID is not its signer. Provider is the provider's on-chain address as
// the provider claims it: check it against the chain's record of the
// provider's peer id before trusting it. Replays of an old advert are
// possible, so keep the newest Time per peer.
type Advert struct {
	PeerID     string        `json:"peer_id"`
	Addrs      []string      `json:"addrs"`
	Provider   types.Address `json:"provider"`
	Attributes []string      `json:"attributes"`
	Runtimes   []string      `json:"runtimes"`
	Models     []types.Hash  `json:"models"`
	Class      string        `json:"class"`
	Time       int64         `json:"time"` // Unix seconds
}

// Validate checks the peer id, the addresses and the limits.
func (a *Advert) Validate() error {
	if _, err := peer.Decode(a.PeerID); err != nil {
		return fmt.Errorf("advert peer id %q: %w", a.PeerID, err)
	}
	if a.Time <= 0 {
		return errors.New("advert has no time")
	}
	for _, l := range []struct {
		what string
		n    int
		max  int
	}{
		{"addresses", len(a.Addrs), maxAdvertAddrs},
		{"attributes", len(a.Attributes), maxAdvertAttributes},
		{"runtimes", len(a.Runtimes), maxAdvertRuntimes},
		{"models", len(a.Models), maxAdvertModels},
	} {
		if l.n > l.max {
			return fmt.Errorf("advert lists %d %s, more than the limit %d", l.n, l.what, l.max)
		}
	}
	for _, s := range append(append([]string{a.Class}, a.Attributes...), a.Runtimes...) {
		if len(s) > maxAdvertString {
			return fmt.Errorf("advert string of %d bytes is longer than the limit %d", len(s), maxAdvertString)
		}
	}
	for _, s := range a.Addrs {
		if len(s) > maxAdvertString {
			return fmt.Errorf("advert address of %d bytes is longer than the limit %d", len(s), maxAdvertString)
		}
		if _, err := ma.NewMultiaddr(s); err != nil {
			return fmt.Errorf("advert address %q: %w", s, err)
		}
	}
	return nil
}

// DecodeAdvert parses and validates an encoded advert. Unknown fields,
// trailing data and oversized input are refused.
func DecodeAdvert(b []byte) (*Advert, error) {
	if len(b) > MaxAdvertBytes {
		return nil, fmt.Errorf("advert is %d bytes, more than the limit %d", len(b), MaxAdvertBytes)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var a Advert
	if err := d.Decode(&a); err != nil {
		return nil, fmt.Errorf("cannot decode advert: %w", err)
	}
	if len(bytes.TrimSpace(b[d.InputOffset():])) > 0 {
		return nil, errors.New("cannot decode advert: trailing data")
	}
	if err := a.Validate(); err != nil {
		return nil, err
	}
	return &a, nil
}

// clone copies a, so that each subscriber owns its slices.
func (a *Advert) clone() Advert {
	c := *a
	c.Addrs = slices.Clone(a.Addrs)
	c.Attributes = slices.Clone(a.Attributes)
	c.Runtimes = slices.Clone(a.Runtimes)
	c.Models = slices.Clone(a.Models)
	return c
}

// validateAdvert is the topic validator: it runs after pubsub checked the
// signature, for remote and local messages alike.
func (h *Host) validateAdvert(_ context.Context, from peer.ID, msg *pubsub.Message) pubsub.ValidationResult {
	a, err := DecodeAdvert(msg.Data)
	if err == nil && a.PeerID != msg.GetFrom().String() {
		err = fmt.Errorf("advert names peer %s but is signed by %s", a.PeerID, msg.GetFrom())
	}
	if err != nil {
		h.advertsRejected.Add(1)
		h.log.Debug("advert rejected", "from", from, "err", err)
		return pubsub.ValidationReject
	}
	msg.ValidatorData = a
	return pubsub.ValidationAccept
}

// PublishAdvert signs and publishes a. An empty PeerID, Addrs or Time is
// filled in with this host's id, its addresses and the current time; a
// PeerID of another peer is an error.
func (h *Host) PublishAdvert(ctx context.Context, a Advert) error {
	self := h.h.ID().String()
	if a.PeerID == "" {
		a.PeerID = self
	} else if a.PeerID != self {
		return fmt.Errorf("cannot publish advert: it names peer %s, this host is %s", a.PeerID, self)
	}
	if len(a.Addrs) == 0 {
		a.Addrs = h.Addrs()
	}
	if a.Time == 0 {
		a.Time = time.Now().Unix()
	}
	if err := a.Validate(); err != nil {
		return fmt.Errorf("cannot publish advert: %w", err)
	}
	b, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("cannot publish advert: %w", err)
	}
	if len(b) > MaxAdvertBytes {
		return fmt.Errorf("cannot publish advert: %d bytes, more than the limit %d", len(b), MaxAdvertBytes)
	}
	if err := h.adverts.Publish(ctx, b); err != nil {
		return fmt.Errorf("cannot publish advert: %w", err)
	}
	return nil
}

// Adverts subscribes to other peers' adverts. The channel is closed when ctx
// ends or the host closes. Adverts arriving while the reader lags far behind
// are dropped by GossipSub.
func (h *Host) Adverts(ctx context.Context) (<-chan Advert, error) {
	sub, err := h.adverts.Subscribe()
	if err != nil {
		return nil, fmt.Errorf("cannot subscribe to adverts: %w", err)
	}
	ch := make(chan Advert, 16)
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(h.ctx, cancel)
	started := h.goTracked(func() {
		defer close(ch)
		defer sub.Cancel()
		defer stop()
		defer cancel()
		self := h.h.ID()
		for {
			msg, err := sub.Next(ctx)
			if err != nil {
				return
			}
			a, ok := msg.ValidatorData.(*Advert)
			if !ok || msg.GetFrom() == self {
				continue
			}
			select {
			case ch <- a.clone():
			case <-ctx.Done():
				return
			}
		}
	})
	if !started {
		sub.Cancel()
		stop()
		cancel()
		return nil, errors.New("cannot subscribe to adverts: host closed")
	}
	return ch, nil
}
