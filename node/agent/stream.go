package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/types"
)

// StreamProtocol streams a job's tokens from a provider to its client as
// they are generated (to the client only: see Access.StreamParty). The client sends one JSON line {"job":N}; the
// provider answers with one JSON line per token and a last line with the
// result hash (or an error).
const StreamProtocol = "/ogpu/llm/stream/1"

type streamRequest struct {
	Job uint64 `json:"job"`
}

type streamMsg struct {
	Token  *int        `json:"token,omitempty"`
	Piece  string      `json:"piece,omitempty"`
	Done   bool        `json:"done,omitempty"`
	Result *types.Hash `json:"result,omitempty"`
	Error  string      `json:"error,omitempty"`
}

// feed is one job's token stream on the provider: every message so far,
// and a channel closed at each change.
type feed struct {
	mu      sync.Mutex
	msgs    []streamMsg
	done    bool
	changed chan struct{}
}

func newFeed() *feed { return &feed{changed: make(chan struct{})} }

func (f *feed) push(m streamMsg) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return
	}
	f.msgs = append(f.msgs, m)
	f.done = m.Done || m.Error != ""
	close(f.changed)
	f.changed = make(chan struct{})
}

// from returns the messages from index i on, whether the feed ended, and
// a channel that closes at the next change.
func (f *feed) from(i int) ([]streamMsg, bool, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.msgs[i:], f.done, f.changed
}

// feeds holds the provider's streams by job, and how many streams each
// peer has open.
type feeds struct {
	mu    sync.Mutex
	m     map[uint64]*feed
	added chan struct{} // closed when a feed is added
	open  map[peer.ID]int
}

func (fs *feeds) init() {
	if fs.m == nil {
		fs.m = make(map[uint64]*feed)
		fs.added = make(chan struct{})
		fs.open = make(map[peer.ID]int)
	}
}

// get returns job's feed, making it (the provider starts the job).
func (fs *feeds) get(job uint64) *feed {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.init()
	f, ok := fs.m[job]
	if !ok {
		f = newFeed()
		fs.m[job] = f
		close(fs.added)
		fs.added = make(chan struct{})
	}
	return f
}

// lookup returns job's feed if the provider started the job, and a
// channel closed when a feed is added.
func (fs *feeds) lookup(job uint64) (*feed, <-chan struct{}) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.init()
	return fs.m[job], fs.added
}

// drop forgets job's feed (the job is closed).
func (fs *feeds) drop(job uint64) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	delete(fs.m, job)
}

// len is the number of feeds held.
func (fs *feeds) len() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return len(fs.m)
}

// enter counts a stream of p; false if p has maxStreamsPerPeer open.
func (fs *feeds) enter(p peer.ID) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.init()
	if fs.open[p] >= maxStreamsPerPeer {
		return false
	}
	fs.open[p]++
	return true
}

func (fs *feeds) leave(p peer.ID) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.open[p]--; fs.open[p] <= 0 {
		delete(fs.open, p)
	}
}

// Stream limits: streams one peer may have open at once; how long a
// request for a job this provider holds a slot of but has not started
// waits for it to start.
const (
	maxStreamsPerPeer = 4
	streamStartWait   = 30 * time.Second
)

// serveStreams installs the stream handler on h. Only the job's client
// (and validators while it is disputed) may listen; see
// Access.StreamParty. holds says whether this provider holds a slot of
// the job: a request for a job it does not hold is refused at once, one
// for a job it holds but has not started waits up to streamStartWait, and
// one for a started job up to wait for the job to finish.
func serveStreams(h *p2p.Host, fs *feeds, access *Access, holds func(ctx context.Context, job uint64) error, wait time.Duration) {
	h.Host().SetStreamHandler(StreamProtocol, func(s network.Stream) {
		defer s.Close()
		remote := s.Conn().RemotePeer()
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_ = s.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, err := bufio.NewReader(io.LimitReader(s, 1024)).ReadBytes('\n')
		if err != nil {
			_ = s.Reset()
			return
		}
		var req streamRequest
		enc := json.NewEncoder(s)
		refuse := func(msg string) {
			_ = s.SetWriteDeadline(time.Now().Add(10 * time.Second))
			_ = enc.Encode(streamMsg{Error: msg})
		}
		if err := json.Unmarshal(line, &req); err != nil {
			refuse("bad request: want {\"job\":N}")
			return
		}
		if !fs.enter(remote) {
			refuse(fmt.Sprintf("too many open streams from peer %s (at most %d at once)", remote, maxStreamsPerPeer))
			return
		}
		defer fs.leave(remote)
		if err := access.StreamParty(ctx, req.Job, remote); err != nil {
			refuse(err.Error())
			return
		}
		f, added := fs.lookup(req.Job)
		if f == nil {
			if err := holds(ctx, req.Job); err != nil {
				refuse(err.Error())
				return
			}
			start := time.NewTimer(streamStartWait)
			defer start.Stop()
			for f == nil {
				select {
				case <-added:
					f, added = fs.lookup(req.Job)
				case <-start.C:
					refuse(fmt.Sprintf("the provider has not started job %d yet: ask again later", req.Job))
					return
				case <-ctx.Done():
					return
				}
			}
		}
		for i := 0; ; {
			msgs, done, changed := f.from(i)
			for _, m := range msgs {
				_ = s.SetWriteDeadline(time.Now().Add(30 * time.Second))
				if err := enc.Encode(m); err != nil {
					return
				}
			}
			i += len(msgs)
			if done {
				return
			}
			select {
			case <-changed:
			case <-ctx.Done():
				refuse("the provider has not finished the job in time")
				return
			}
		}
	})
}

// StreamTokens opens provider's token stream for job and calls onPiece
// with each piece of text as it arrives; it returns the result hash the
// provider announces at the end.
func StreamTokens(ctx context.Context, h *p2p.Host, provider peer.ID, job uint64, onPiece func(string)) (types.Hash, error) {
	s, err := h.Host().NewStream(ctx, provider, StreamProtocol)
	if err != nil {
		return types.Hash{}, fmt.Errorf("cannot open a token stream to %s: %w", provider, err)
	}
	defer s.Close()
	stop := context.AfterFunc(ctx, func() { _ = s.Reset() })
	defer stop()
	if err := json.NewEncoder(s).Encode(streamRequest{Job: job}); err != nil {
		return types.Hash{}, err
	}
	dec := json.NewDecoder(bufio.NewReader(io.LimitReader(s, 64<<20)))
	for {
		var m streamMsg
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return types.Hash{}, fmt.Errorf("token stream from %s broke: %w", provider, err)
		}
		switch {
		case m.Error != "":
			return types.Hash{}, fmt.Errorf("provider %s: %s", provider, m.Error)
		case m.Done && m.Result != nil:
			return *m.Result, nil
		case m.Done:
			return types.Hash{}, fmt.Errorf("provider %s ended the stream without a result", provider)
		case onPiece != nil:
			onPiece(m.Piece)
		}
	}
}
