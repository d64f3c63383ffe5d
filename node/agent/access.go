package agent

import (
	"context"
	"fmt"
	"sync"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/types"
)

// Access decides which peers may fetch which blobs. Blobs never
// registered here (models) are public. A job's blobs (its input, its
// outputs) go only to the job's parties as the chain records them: the
// client (a peer whose secp256k1 identity is the client's account key),
// the providers holding a slot (by the peer id in their provider record)
// and validator operators (who re-check disputed work).
type Access struct {
	Chain *node.Client

	mu   sync.Mutex
	jobs map[types.Hash]uint64
}

// NewAccess returns an Access that reads the chain through c.
func NewAccess(c *node.Client) *Access {
	return &Access{Chain: c, jobs: make(map[types.Hash]uint64)}
}

// Restrict limits blob h to the parties of job.
func (a *Access) Restrict(h types.Hash, job uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.jobs[h] = job
}

// Authorize is p2p.Config.Authorize.
func (a *Access) Authorize(ctx context.Context, remote peer.ID, h types.Hash) error {
	a.mu.Lock()
	job, restricted := a.jobs[h]
	a.mu.Unlock()
	if !restricted {
		return nil
	}
	return a.JobParty(ctx, job, remote)
}

// JobParty returns nil if remote is a party to job on chain.
func (a *Access) JobParty(ctx context.Context, job uint64, remote peer.ID) error {
	j, err := a.Chain.Job(ctx, job)
	if err != nil {
		return fmt.Errorf("job %d: %w", job, err)
	}
	if addr, err := p2p.AddressOf(remote); err == nil {
		if addr == j.Client {
			return nil
		}
		vals, err := a.Chain.Validators(ctx)
		if err != nil {
			return err
		}
		for _, v := range vals {
			if v.Operator == addr {
				return nil
			}
		}
	}
	for _, addr := range slotProviders(j) {
		pv, err := a.Chain.Provider(ctx, addr)
		if err == nil && pv.PeerID == remote.String() {
			return nil
		}
	}
	return fmt.Errorf("peer %s is not a party to job %d (not its client, a provider assigned to it, or a validator)", remote, job)
}

// slotProviders lists the providers holding a slot in any of j's stages.
func slotProviders(j *chain.JobView) []types.Address {
	var out []types.Address
	for _, t := range j.Tasks {
		for _, s := range t.Slots {
			out = append(out, s.Provider)
		}
	}
	return out
}

// connectProvider dials a provider at the peer id and addresses its
// on-chain record publishes, and returns the peer id.
func connectProvider(ctx context.Context, h *p2p.Host, c *node.Client, addr types.Address) (peer.ID, error) {
	pv, err := c.Provider(ctx, addr)
	if err != nil {
		return "", err
	}
	id, err := peer.Decode(pv.PeerID)
	if err != nil {
		return "", fmt.Errorf("provider %s publishes a bad peer id %q: %w", addr, pv.PeerID, err)
	}
	if err := h.ConnectPeer(ctx, id, pv.Addrs); err != nil {
		return "", fmt.Errorf("cannot reach provider %s at %v: %w", addr, pv.Addrs, err)
	}
	return id, nil
}

// peersOf lists the connected peers whose identity is addr's account key.
func peersOf(h *p2p.Host, addr types.Address) []peer.ID {
	var out []peer.ID
	for _, id := range h.Host().Network().Peers() {
		if a, err := p2p.AddressOf(id); err == nil && a == addr {
			out = append(out, id)
		}
	}
	return out
}
