package p2p

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/types"
)

// DefaultParallel is the number of concurrent piece requests of a Fetch.
const DefaultParallel = 4

// maxStrikes is how many network failures in a row drop a peer from a fetch.
const maxStrikes = 3

// ErrNoHolders: no peer to fetch a blob from was given or found.
var ErrNoHolders = errors.New("no peer holds the blob")

// FetchOptions tunes Fetch. The zero value looks holders up in the DHT and
// runs DefaultParallel requests at once.
type FetchOptions struct {
	// Peers to fetch from. Empty: the holders FindHolders returns.
	Peers []peer.ID
	// Parallel is the number of piece requests in flight across all peers;
	// 0 means DefaultParallel.
	Parallel int
	// Progress, if set, is called with the bytes held and the blob size
	// when the download starts and after every piece, from one goroutine
	// at a time.
	Progress func(done, total int64)
	// MaxSize, if positive, is the largest blob the caller accepts: a
	// manifest that declares more bytes is refused (ErrTooLarge) before
	// anything is allocated on disk, and the next peer is asked. Callers
	// that know the size a job declares (a model's ModelSize) set it.
	MaxSize int64
	// Announce provides the blob in the DHT once it is stored. Only for
	// public blobs (models): a job's blobs are private, and announcing
	// one tells the network who holds it.
	Announce bool
}

// ErrTooLarge: a peer's manifest declares a blob larger than
// FetchOptions.MaxSize.
var ErrTooLarge = errors.New("blob is larger than the caller accepts")

type fetchCall struct {
	done chan struct{}
	path string
	err  error
}

// Fetch makes blob hash available locally and returns its path. A blob
// already held is returned at once. Otherwise the manifest comes from the
// first peer that serves a valid one; the missing pieces (a download
// interrupted earlier resumes) are requested from all peers at once, each
// verified against the manifest; a peer that serves a bad piece is dropped
// and the piece fetched from another. The whole is checked against hash
// before it is stored; with o.Announce it is then announced in the DHT.
// Concurrent fetches of one blob share one download.
func (h *Host) Fetch(ctx context.Context, hash types.Hash, o FetchOptions) (string, error) {
	if h.store == nil {
		return "", fmt.Errorf("cannot fetch blob %x: this host has no blob store", hash)
	}
	for {
		if path, err := h.store.Path(hash); err == nil {
			return path, nil
		} else if errors.Is(err, blobstore.ErrCorrupt) {
			h.log.Warn("local copy of blob is corrupt; fetching it again", "hash", hash, "err", err)
		}
		h.fetchMu.Lock()
		c := h.fetching[hash]
		if c == nil {
			c = &fetchCall{done: make(chan struct{})}
			h.fetching[hash] = c
			h.fetchMu.Unlock()
			c.path, c.err = h.fetch(ctx, h.store, hash, o)
			h.fetchMu.Lock()
			delete(h.fetching, hash)
			h.fetchMu.Unlock()
			close(c.done)
			return c.path, c.err
		}
		h.fetchMu.Unlock()
		select {
		case <-c.done:
		case <-ctx.Done():
			return "", fmt.Errorf("cannot fetch blob %x: %w", hash, ctx.Err())
		}
		// The other caller's context ended its download, not ours: retry.
		if c.err == nil || !errors.Is(c.err, context.Canceled) && !errors.Is(c.err, context.DeadlineExceeded) {
			return c.path, c.err
		}
	}
}

// ProveHeld downloads blob hash from o.Peers (required: the parties that
// must prove they hold it) into a scratch store and discards it: it
// succeeds only if one of them served every byte. The local store's copy,
// if any, is neither used nor changed. A provider asks it of a client
// whose job names an input the provider holds for another client's job:
// the input's hash is public on chain, its bytes are not, and naming a
// hash must not buy the output of someone else's prompt.
func (h *Host) ProveHeld(ctx context.Context, hash types.Hash, o FetchOptions) error {
	if len(o.Peers) == 0 {
		return fmt.Errorf("cannot check who holds blob %x: no peer to ask", hash)
	}
	dir, err := os.MkdirTemp("", "ogpu-held-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	st, err := blobstore.Open(dir)
	if err != nil {
		return err
	}
	o.Announce = false
	_, err = h.fetch(ctx, st, hash, o)
	return err
}

func (h *Host) fetch(ctx context.Context, store *blobstore.Store, hash types.Hash, o FetchOptions) (string, error) {
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("cannot fetch blob %x: %w", hash, err)
	}
	var peers []peer.ID
	seen := map[peer.ID]bool{h.h.ID(): true}
	for _, p := range o.Peers {
		if !seen[p] {
			seen[p] = true
			peers = append(peers, p)
		}
	}
	if len(o.Peers) == 0 {
		ais, err := h.FindHolders(ctx, hash, DefaultMaxHolders)
		if err != nil {
			return fail(err)
		}
		for _, ai := range ais {
			peers = append(peers, ai.ID)
		}
	}
	if len(peers) == 0 {
		return fail(fmt.Errorf("%w: the DHT found no holder and FetchOptions.Peers is empty", ErrNoHolders))
	}

	refused := map[peer.ID]error{}
	var m *blobstore.Manifest
	for _, p := range peers {
		var err error
		if m, err = h.fetchManifest(ctx, p, hash); err == nil {
			if o.MaxSize <= 0 || m.Size <= o.MaxSize {
				break
			}
			err = fmt.Errorf("peer %s: %w: its manifest declares %d bytes, at most %d accepted", p, ErrTooLarge, m.Size, o.MaxSize)
			m = nil
		}
		if ctx.Err() != nil {
			return fail(ctx.Err())
		}
		refused[p] = err
	}
	if m == nil {
		return fail(fmt.Errorf("no peer served its manifest: %w", joinPeerErrors(peers, refused)))
	}
	part, err := store.Begin(m)
	if errors.Is(err, blobstore.ErrExists) {
		return store.Path(hash)
	} else if err != nil {
		return fail(err)
	}
	for round := 0; ; round++ {
		if err := h.download(ctx, part, peers, refused, o); err != nil {
			part.Close()
			return fail(err)
		}
		path, err := part.Complete()
		if err == nil && o.Announce {
			h.goTracked(func() {
				ctx, cancel := context.WithTimeout(h.ctx, time.Minute)
				defer cancel()
				if err := h.Provide(ctx, hash); err != nil {
					h.log.Info("cannot announce fetched blob", "hash", hash, "err", err)
				}
			})
		}
		if err == nil {
			return path, nil
		}
		// Pieces damaged on disk since they were written: fetch them again,
		// once.
		if errors.Is(err, blobstore.ErrIncomplete) && round == 0 {
			h.log.Warn("refetching damaged pieces", "hash", hash, "err", err)
			continue
		}
		part.Close()
		if errors.Is(err, blobstore.ErrHashMismatch) {
			return fail(fmt.Errorf("the manifest served by the peers is false (pieces match it, the whole does not match the hash): %w", err))
		}
		return fail(err)
	}
}

func joinPeerErrors(peers []peer.ID, errs map[peer.ID]error) error {
	var out []error
	for _, p := range peers {
		if err := errs[p]; err != nil {
			out = append(out, err)
		}
	}
	return errors.Join(out...)
}

// fetchPeer is a peer's standing in one download.
type fetchPeer struct {
	id      peer.ID
	active  int   // requests in flight
	strikes int   // network failures in a row
	dropped error // why the peer is no longer asked
}

// scheduler hands missing pieces to workers, each with the live peer that
// has the fewest requests in flight (round-robin among equals), and puts
// failed pieces back in the queue.
type scheduler struct {
	mu       sync.Mutex
	cond     *sync.Cond
	queue    []int
	inflight int
	peers    []*fetchPeer
	rr       int
	err      error // ends the download
}

type outcome int

const (
	gotPiece   outcome = iota
	dropPeer           // the peer refused or misbehaved
	strikePeer         // a network failure
	fatal              // context ended or the local store failed
)

func (s *scheduler) take() (int, *fetchPeer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.err != nil {
			return 0, nil, false
		}
		if len(s.queue) > 0 {
			p := s.pick()
			if p == nil {
				var reasons []error
				for _, p := range s.peers {
					reasons = append(reasons, p.dropped)
				}
				s.err = fmt.Errorf("every peer failed, %d pieces still missing: %w", len(s.queue)+s.inflight, errors.Join(reasons...))
				s.cond.Broadcast()
				return 0, nil, false
			}
			i := s.queue[0]
			s.queue = s.queue[1:]
			s.inflight++
			p.active++
			return i, p, true
		}
		if s.inflight == 0 {
			return 0, nil, false
		}
		s.cond.Wait() // a piece in flight may fail and come back
	}
}

func (s *scheduler) pick() *fetchPeer {
	var best *fetchPeer
	bi := 0
	for k := range s.peers {
		i := (s.rr + k) % len(s.peers)
		p := s.peers[i]
		if p.dropped == nil && (best == nil || p.active < best.active) {
			best, bi = p, i
		}
	}
	if best != nil {
		s.rr = bi + 1
	}
	return best
}

func (s *scheduler) finish(i int, p *fetchPeer, o outcome, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight--
	p.active--
	switch o {
	case gotPiece:
		p.strikes = 0
	case dropPeer:
		if p.dropped == nil {
			p.dropped = err
		}
	case strikePeer:
		if p.strikes++; p.strikes >= maxStrikes && p.dropped == nil {
			p.dropped = err
		}
	case fatal:
		if s.err == nil {
			s.err = err
		}
	}
	if o != gotPiece {
		s.queue = append(s.queue, i)
	}
	s.cond.Broadcast()
}

// download fetches part's missing pieces from peers. refused holds peers
// known not to serve the blob.
func (h *Host) download(ctx context.Context, part *blobstore.Partial, peers []peer.ID, refused map[peer.ID]error, o FetchOptions) error {
	m := part.Manifest()
	s := &scheduler{queue: part.Missing()}
	s.cond = sync.NewCond(&s.mu)
	for _, id := range peers {
		s.peers = append(s.peers, &fetchPeer{id: id, dropped: refused[id]})
	}
	var progressMu sync.Mutex
	done := m.Size
	for _, i := range s.queue {
		done -= m.PieceLen(i)
	}
	if o.Progress != nil {
		o.Progress(done, m.Size)
	}
	workers := o.Parallel
	if workers <= 0 {
		workers = DefaultParallel
	}
	workers = min(workers, len(s.queue))
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			conns := map[peer.ID]*blobClient{}
			defer func() {
				for _, c := range conns {
					c.close()
				}
			}()
			for {
				i, p, ok := s.take()
				if !ok {
					return
				}
				o2, err := h.getPiece(ctx, conns, p.id, part, i)
				s.finish(i, p, o2, err)
				if o2 == gotPiece && o.Progress != nil {
					progressMu.Lock()
					done += m.PieceLen(i)
					o.Progress(done, m.Size)
					progressMu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if s.err != nil {
		return s.err
	}
	return ctx.Err()
}

// getPiece requests piece i from p, reusing the worker's stream to p, and
// writes it to part.
func (h *Host) getPiece(ctx context.Context, conns map[peer.ID]*blobClient, p peer.ID, part *blobstore.Partial, i int) (outcome, error) {
	m := part.Manifest()
	c := conns[p]
	if c == nil {
		var err error
		if c, err = h.dialBlob(ctx, p); err != nil {
			if ctx.Err() != nil {
				return fatal, ctx.Err()
			}
			return strikePeer, err
		}
		conns[p] = c
	}
	data, err := c.do(ctx, request{kind: kindPiece, hash: m.Hash, index: uint32(i)}, int(m.PieceLen(i)))
	if err != nil {
		c.close()
		delete(conns, p)
		switch {
		case ctx.Err() != nil:
			return fatal, ctx.Err()
		case errors.Is(err, ErrUnavailable):
			// Not a refusal: the peer may serve it once its chain node
			// answers; a few in a row drop it from this fetch.
			return strikePeer, err
		case errors.Is(err, ErrForbidden), errors.Is(err, ErrNotHeld), errors.Is(err, ErrProtocol):
			h.log.Info("peer dropped from fetch", "peer", p, "hash", m.Hash, "err", err)
			return dropPeer, err
		}
		return strikePeer, err
	}
	if err := part.WritePiece(i, data); errors.Is(err, blobstore.ErrBadPiece) {
		h.badPieces.Add(1)
		err = fmt.Errorf("peer %s: %w", p, err)
		h.log.Warn("peer served a bad piece; dropped from fetch", "peer", p, "hash", m.Hash, "piece", i, "err", err)
		return dropPeer, err
	} else if err != nil {
		return fatal, err
	}
	if h.onBytes != nil {
		h.onBytes(false, len(data))
	}
	return gotPiece, nil
}

// goTracked runs f in a goroutine that Close waits for, unless the host is
// closing.
func (h *Host) goTracked(f func()) bool {
	if !h.track() {
		return false
	}
	go func() {
		defer h.wg.Done()
		f()
	}()
	return true
}

// track adds the calling goroutine to those Close waits for (the caller
// must call h.wg.Done), unless the host is closing.
func (h *Host) track() bool {
	h.trackMu.Lock()
	defer h.trackMu.Unlock()
	if h.ctx.Err() != nil {
		return false
	}
	h.wg.Add(1)
	return true
}
