package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/cometbft/cometbft/libs/log"
	rpchttp "github.com/cometbft/cometbft/rpc/client/http"
	ctypes "github.com/cometbft/cometbft/rpc/core/types"
	cmttypes "github.com/cometbft/cometbft/types"

	"github.com/ogpu-network/ogpu/types"
)

// BlockEvents are the events of one committed block: FinalizeBlock's own
// events (begin and end block, e.g. the market's job_awarded at a reveal
// window's end) followed by the events of its successful transactions in
// order. A failed transaction (code != 0) contributes none, although it paid
// its fee and used its nonce.
type BlockEvents struct {
	Height int64
	Time   time.Time
	Events []abci.Event
	// Txs is the number of transactions in the block, failed ones
	// included.
	Txs int
}

// DefaultPollInterval is how often Subscribe asks the node for its latest
// height besides listening for new-block events.
const DefaultPollInterval = time.Second

// staleAfter is how many poll intervals the chain may advance without a
// new-block event before Subscribe drops the event subscription and opens
// a new one.
const staleAfter = 3

// maxBackoff bounds the wait between attempts to re-open the event
// subscription.
const maxBackoff = 30 * time.Second

// SubscribeOption configures Subscribe.
type SubscribeOption func(*subscribeConfig)

type subscribeConfig struct {
	logger   log.Logger
	poll     time.Duration
	pollOnly bool
}

// SubscribeLogger makes Subscribe log failed fetches and re-subscriptions
// to l (default: no logging).
func SubscribeLogger(l log.Logger) SubscribeOption {
	return func(c *subscribeConfig) { c.logger = l }
}

// SubscribeEvery sets the poll interval (default DefaultPollInterval). It
// bounds how late a block is delivered when the event subscription is down.
func SubscribeEvery(d time.Duration) SubscribeOption {
	return func(c *subscribeConfig) { c.poll = d }
}

// SubscribePollOnly makes Subscribe poll the node's height only, without a
// new-block event subscription: for RPC endpoints that do not pass
// websockets.
func SubscribePollOnly() SubscribeOption {
	return func(c *subscribeConfig) { c.pollOnly = true }
}

// Subscribe delivers every committed block from height from (0: the next
// block) in order, without gaps or duplicates, until ctx ends; then it
// closes the channel. Delivery waits for the reader: a slow reader delays
// blocks, it never loses them.
//
// New-block events over CometBFT RPC (a websocket for an HTTP client, the
// event bus in-process) trigger the fetches; a poll of the node's height
// every interval keeps blocks coming while that subscription is down, and
// it is re-opened with backoff. A failed fetch is retried; no height is
// skipped. Subscribe fails at once if the node is unreachable or no longer
// holds block from.
func (c *Client) Subscribe(ctx context.Context, from int64, opts ...SubscribeOption) (<-chan BlockEvents, error) {
	cfg := subscribeConfig{logger: log.NewNopLogger(), poll: DefaultPollInterval}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.poll <= 0 {
		return nil, fmt.Errorf("poll interval %s: want a positive duration", cfg.poll)
	}
	if cfg.logger == nil {
		cfg.logger = log.NewNopLogger()
	}
	if from < 0 {
		return nil, fmt.Errorf("cannot subscribe from height %d: want 0 (the next block) or a height of 1 or more", from)
	}
	st, err := c.RPC.Status(ctx)
	if err != nil {
		return nil, c.Unreachable(err)
	}
	latest := st.SyncInfo.LatestBlockHeight
	if from == 0 {
		from = latest + 1
	}
	if earliest := st.SyncInfo.EarliestBlockHeight; from < earliest {
		return nil, fmt.Errorf("cannot subscribe from height %d: this node has pruned blocks before %d; subscribe from %d or later, or use an archive node", from, earliest, earliest)
	}
	s := &subscription{c: c, cfg: cfg, log: cfg.logger.With("module", "subscribe")}
	out := make(chan BlockEvents)
	var trig *trigger
	if !cfg.pollOnly {
		trig = newTrigger()
		go s.listen(ctx, trig)
	}
	go s.deliver(ctx, from, latest, out, trig)
	return out, nil
}

// BlockEventsAt returns the events of committed block h.
func (c *Client) BlockEventsAt(ctx context.Context, h int64) (BlockEvents, error) {
	res, err := c.RPC.BlockResults(ctx, &h)
	if err != nil {
		return BlockEvents{}, fmt.Errorf("cannot get the results of block %d: %w", h, err)
	}
	hdr, err := c.RPC.Header(ctx, &h)
	if err != nil {
		return BlockEvents{}, fmt.Errorf("cannot get the header of block %d: %w", h, err)
	}
	if hdr.Header == nil {
		return BlockEvents{}, fmt.Errorf("the node has no header for block %d", h)
	}
	return blockEventsOf(h, hdr.Header.Time, res), nil
}

// blockEventsOf assembles a block's events from its results.
func blockEventsOf(h int64, t time.Time, res *ctypes.ResultBlockResults) BlockEvents {
	evs := append([]abci.Event(nil), res.FinalizeBlockEvents...)
	for _, r := range res.TxResults {
		if r != nil && r.Code == 0 {
			evs = append(evs, r.Events...)
		}
	}
	return BlockEvents{Height: h, Time: t, Events: evs, Txs: len(res.TxResults)}
}

// EventsOf decodes the events of E's type among evs, in order, skipping
// any that do not decode (a chain of another version); DecodeEvents
// reports those instead. P is *E and is inferred:
// node.EventsOf[market.EventJobPosted](be.Events).
func EventsOf[E any, P interface {
	*E
	types.Event
}](evs []abci.Event) []E {
	out, _ := decodeEvents[E, P](evs, false)
	return out
}

// DecodeEvents decodes the events of E's type among evs, in order; an event
// of that type that does not decode is an error.
func DecodeEvents[E any, P interface {
	*E
	types.Event
}](evs []abci.Event) ([]E, error) {
	return decodeEvents[E, P](evs, true)
}

func decodeEvents[E any, P interface {
	*E
	types.Event
}](evs []abci.Event, strict bool) ([]E, error) {
	typ := P(new(E)).EventType()
	var out []E
	for _, ev := range evs {
		if ev.Type != typ {
			continue
		}
		var e E
		if err := types.DecodeEvent(ev, P(&e)); err != nil {
			if strict {
				return out, err
			}
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

// subscription is one Subscribe call: deliver owns the output channel and
// the poll; listen owns the event subscription.
type subscription struct {
	c   *Client
	cfg subscribeConfig
	log log.Logger
}

// deliver sends blocks next, next+1, ... as the node reports them, and
// closes out when ctx ends, after listen has returned.
func (s *subscription) deliver(ctx context.Context, next, known int64, out chan<- BlockEvents, trig *trigger) {
	defer close(out)
	var notify <-chan struct{}
	if trig != nil {
		notify = trig.notify
		defer func() { <-trig.done }()
	}
	tick := time.NewTicker(s.cfg.poll)
	defer tick.Stop()
	var committed int64 // the application's last committed height, as last seen
	for {
		for next <= known {
			// The node stores a block, and its results, a moment before
			// the application commits it: until then the mempool still
			// checks transactions against the state before it. Deliver
			// a block only once it is committed, so that a transaction
			// sent in answer to its events is checked after it.
			if next > committed {
				h, err := s.c.CommittedHeight(ctx)
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					s.log.Debug("cannot read the committed height; retrying", "err", err)
					break // on the next event or tick
				}
				if committed = h; next > committed {
					select {
					case <-ctx.Done():
						return
					case <-time.After(10 * time.Millisecond):
					}
					continue
				}
			}
			be, err := s.c.BlockEventsAt(ctx, next)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				// Status counts a block once stored, a moment before its
				// results are: retry on the next event or tick.
				s.log.Debug("fetch failed; retrying", "height", next, "err", err)
				break
			}
			select {
			case out <- be:
				next++
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-notify:
			known = max(known, trig.height())
		case <-tick.C:
			st, err := s.c.RPC.Status(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				s.log.Error("cannot poll the node's height; retrying", "err", s.c.Unreachable(err))
				continue
			}
			latest := st.SyncInfo.LatestBlockHeight
			if trig != nil && trig.stale(latest, staleAfter*s.cfg.poll) {
				trig.reopen()
			}
			known = max(known, latest)
		}
	}
}

// trigger is what listen tells deliver: the highest height announced, a
// wake-up, and the state of the event subscription.
type trigger struct {
	notify chan struct{} // capacity 1: wake-ups coalesce
	again  chan struct{} // capacity 1: deliver asks listen to re-open
	done   chan struct{} // closed when listen returns

	mu   sync.Mutex
	open bool      // an event subscription is open
	last int64     // highest height announced
	at   time.Time // when the subscription opened or last announced a block
}

func newTrigger() *trigger {
	return &trigger{notify: make(chan struct{}, 1), again: make(chan struct{}, 1), done: make(chan struct{})}
}

func (t *trigger) height() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

func (t *trigger) announce(h int64) {
	t.mu.Lock()
	t.last = max(t.last, h)
	t.at = time.Now()
	t.mu.Unlock()
	select {
	case t.notify <- struct{}{}:
	default:
	}
}

func (t *trigger) setOpen(open bool) {
	t.mu.Lock()
	t.open = open
	t.at = time.Now()
	t.mu.Unlock()
}

// stale reports whether the chain reached latest while the open
// subscription announced nothing for longer than d.
func (t *trigger) stale(latest int64, d time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.open && latest > t.last && time.Since(t.at) > d
}

func (t *trigger) reopen() {
	select {
	case t.again <- struct{}{}:
	default:
	}
}

var subscriberSeq atomic.Uint64

// listen keeps a new-block event subscription open until ctx ends,
// re-opening it with backoff after a failure or when deliver finds it
// stale, and announces each block's height.
func (s *subscription) listen(ctx context.Context, t *trigger) {
	defer close(t.done)
	backoff := time.Duration(0)
	for {
		if backoff > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
		}
		src, err := s.openEvents(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			backoff = min(max(2*backoff, 500*time.Millisecond), maxBackoff)
			s.log.Error("cannot subscribe to new blocks; polling meanwhile", "err", err, "retry_in", backoff, "poll", s.cfg.poll)
			continue
		}
		t.setOpen(true)
		select { // a request made for the previous subscription
		case <-t.again:
		default:
		}
		reopen := false
		for !reopen {
			select {
			case ev, ok := <-src.events:
				if !ok {
					s.log.Info("the new-block subscription ended; re-opening it, polling meanwhile", "err", src.err())
					reopen = true
					break
				}
				t.announce(eventHeight(ev))
				backoff = 0
			case <-t.again:
				s.log.Info("no new-block events while the chain advanced; resubscribing")
				reopen = true
			case <-ctx.Done():
				src.close()
				return
			}
		}
		t.setOpen(false)
		src.close()
		backoff = min(max(2*backoff, 500*time.Millisecond), maxBackoff)
	}
}

// eventSource is an open new-block event subscription.
type eventSource struct {
	events <-chan ctypes.ResultEvent // closed if the subscription ends
	close  func()                    // ends it; returns once its goroutines have
	err    func() error              // why events was closed, if known
}

// openEvents subscribes to new block headers. An HTTP client gets a
// websocket of its own (wsEvents: it ends on the first error and never
// reconnects by itself, listen does); any other client's event interface
// (rpc/client/local's event bus) is used under a unique subscriber name.
func (s *subscription) openEvents(ctx context.Context) (*eventSource, error) {
	query := cmttypes.EventQueryNewBlockHeader.String()
	const capacity = 16
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if h, ok := s.c.RPC.(*rpchttp.HTTP); ok {
		ws, err := dialEvents(sctx, h.Remote(), query, capacity)
		if err != nil {
			return nil, s.c.Unreachable(err)
		}
		return &eventSource{events: ws.Events(), close: ws.Close, err: ws.Err}, nil
	}
	name := fmt.Sprintf("ogpu-subscribe-%d", subscriberSeq.Add(1))
	events, err := s.c.RPC.Subscribe(sctx, name, query, capacity)
	if err != nil {
		return nil, err
	}
	return &eventSource{events: events, close: func() {
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.c.RPC.UnsubscribeAll(uctx, name); err != nil && !errors.Is(err, context.Canceled) {
			s.log.Debug("unsubscribe", "err", err)
		}
	}, err: func() error { return nil }}, nil
}

// eventHeight is the height a new-block-header event announces, or 0.
func eventHeight(ev ctypes.ResultEvent) int64 {
	switch d := ev.Data.(type) {
	case cmttypes.EventDataNewBlockHeader:
		return d.Header.Height
	case *cmttypes.EventDataNewBlockHeader:
		return d.Header.Height
	}
	return 0
}
