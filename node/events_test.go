package node

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	cmtcfg "github.com/cometbft/cometbft/config"
	"github.com/cometbft/cometbft/libs/log"
	"github.com/cometbft/cometbft/rpc/client/local"
	ctypes "github.com/cometbft/cometbft/rpc/core/types"
	cmttypes "github.com/cometbft/cometbft/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/gorilla/websocket"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/types"
)

// testChain is a real single-validator node in this process, making a block
// every 100ms, with funded accounts.
type testChain struct {
	node  *ChainNode
	conf  *cmtcfg.Config
	local *Client // rpc/client/local on the node
	http  *Client // Dial on the node's RPC address
	keys  []*ecdsa.PrivateKey
}

// testKey is fixed key number i, so runs are reproducible.
func testKey(t testing.TB, i int) *ecdsa.PrivateKey {
	seed := sha256.Sum256([]byte(fmt.Sprintf("ogpu-node-events-sender-%d", i)))
	k, err := crypto.ToECDSA(seed[:])
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// startTestChain funds keys 0..funded-1 with 1000 oGPU each and starts the
// node; it returns once block 1 is committed by the app (Status counts a
// block as soon as it is stored, before the app commits it: wait for the
// next one).
func startTestChain(t *testing.T, funded int) *testChain {
	t.Helper()
	return startTestChainEvery(t, funded, 100*time.Millisecond)
}

// startTestChainEvery is startTestChain with blocks every blockTime.
func startTestChainEvery(t testing.TB, funded int, blockTime time.Duration) *testChain {
	t.Helper()
	home := t.TempDir()
	conf, err := LocalConfig(home, blockTime)
	if err != nil {
		t.Fatal(err)
	}
	doc := genesis.Default()
	tc := &testChain{conf: conf}
	for i := range funded {
		k := testKey(t, i)
		tc.keys = append(tc.keys, k)
		if err := doc.AddAccount(crypto.PubkeyToAddress(k.PublicKey), types.OGPU(1000)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := InitHome(InitOptions{Home: home, ChainID: "ogpu-events-test", Genesis: doc, Config: conf}); err != nil {
		t.Fatal(err)
	}
	n, err := StartChainNode(context.Background(), conf, log.NewNopLogger(), chain.WithInvariants())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	tc.node = n
	tc.local = &Client{RPC: local.New(n.Node)}
	if tc.http, err = Dial(conf.RPC.ListenAddress); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tc.local.WaitHeight(ctx, 2); err != nil {
		t.Fatal(err)
	}
	return tc
}

// recipient is a fresh address for transfer i.
func recipient(i int) types.Address {
	h := sha256.Sum256([]byte(fmt.Sprintf("ogpu-node-events-recipient-%d", i)))
	return types.BytesToAddress(h[:])
}

func transfer(i int) types.RawMsg {
	return (&escrow.MsgSend{To: recipient(i), Amount: uint256.NewInt(uint64(1000 + i))}).Raw()
}

func latestHeight(t testing.TB, c *Client) int64 {
	t.Helper()
	st, err := c.RPC.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.SyncInfo.LatestBlockHeight
}

// readBlocks reads blocks from sub until one at height until or later,
// checking that they start at from and follow each other without gaps.
func readBlocks(t *testing.T, ctx context.Context, sub <-chan BlockEvents, from, until int64) []BlockEvents {
	t.Helper()
	var got []BlockEvents
	want := from
	for want <= until {
		select {
		case be, ok := <-sub:
			if !ok {
				t.Fatalf("subscription closed at height %d, waiting for %d", want, until)
			}
			if be.Height != want {
				t.Fatalf("got block %d, want %d", be.Height, want)
			}
			if n := len(got); n > 0 && be.Time.Before(got[n-1].Time) {
				t.Fatalf("block %d's time %s is before block %d's %s", be.Height, be.Time, got[n-1].Height, got[n-1].Time)
			}
			got = append(got, be)
			want++
		case <-ctx.Done():
			t.Fatalf("waiting for block %d: %v", want, ctx.Err())
		}
	}
	return got
}

// checkTransfers checks that every transfer in want (recipient → height of
// its transaction) is in blocks exactly once, at its height.
func checkTransfers(t *testing.T, blocks []BlockEvents, want map[types.Address]int64) {
	t.Helper()
	seen := make(map[types.Address]int64)
	for _, be := range blocks {
		for _, ev := range be.Events {
			if ev.Type != chain.EventTypeTransfer {
				continue
			}
			tr, err := chain.ParseEventTransfer(ev)
			if err != nil {
				t.Fatal(err)
			}
			if _, ours := want[tr.To]; !ours {
				continue
			}
			if h, dup := seen[tr.To]; dup {
				t.Fatalf("transfer to %s delivered twice: blocks %d and %d", tr.To, h, be.Height)
			}
			seen[tr.To] = be.Height
		}
	}
	for to, h := range want {
		if seen[to] != h {
			t.Errorf("transfer to %s: delivered in block %d, committed in block %d", to, seen[to], h)
		}
	}
}

// TestSubscribe sends transfers, some in one block and some in later
// blocks, and checks that every kind of subscription sees each transfer once
// in its block: live ones opened before the transfers (in-process and over
// the websocket) and ones opened afterwards from height 1, which replay the
// past (in-process, websocket, and polling alone).
func TestSubscribe(t *testing.T) {
	tc := startTestChain(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	before := latestHeight(t, tc.local)
	liveLocal, err := tc.local.Subscribe(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	liveHTTP, err := tc.http.Subscribe(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	after := latestHeight(t, tc.local)

	s := NewSender(tc.http, tc.keys[0])
	want := make(map[types.Address]int64)
	var hashes [][]byte
	for i := range 4 { // back to back: likely several in one block
		h, err := s.Submit(ctx, transfer(i))
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, h)
	}
	for i := 4; i < 7; i++ { // one block each at least
		res, err := s.Send(ctx, transfer(i))
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, res.Hash)
	}
	var last int64
	for i, h := range hashes {
		res, err := tc.http.WaitTx(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		want[recipient(i)] = res.Height
		last = max(last, res.Height)
	}

	// The live subscriptions start at the block after the one current
	// when Subscribe was called.
	for name, sub := range map[string]<-chan BlockEvents{"local": liveLocal, "http": liveHTTP} {
		var first BlockEvents
		select {
		case first = <-sub:
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		if first.Height <= before || first.Height > after+1 {
			t.Fatalf("live %s subscription started at block %d; the chain was at %d..%d", name, first.Height, before, after)
		}
		blocks := append([]BlockEvents{first}, readBlocks(t, ctx, sub, first.Height+1, last)...)
		checkTransfers(t, blocks, want)
	}

	replays := []struct {
		name string
		c    *Client
		opts []SubscribeOption
	}{
		{"local", tc.local, nil},
		{"http", tc.http, nil},
		{"http poll only", tc.http, []SubscribeOption{SubscribePollOnly(), SubscribeEvery(50 * time.Millisecond)}},
		{"local poll only", tc.local, []SubscribeOption{SubscribePollOnly()}},
	}
	for _, r := range replays {
		t.Run("replay "+r.name, func(t *testing.T) {
			sctx, scancel := context.WithCancel(ctx)
			sub, err := r.c.Subscribe(sctx, 1, r.opts...)
			if err != nil {
				t.Fatal(err)
			}
			// Past the transfers, and on into blocks made after Subscribe.
			until := latestHeight(t, tc.local) + 3
			checkTransfers(t, readBlocks(t, ctx, sub, 1, until), want)
			scancel()
			for range sub { // closed once ctx ends; a block in flight may come first
			}
		})
	}
}

// TestSubscribeSlowReader: a reader that takes its time loses nothing, and
// a cancelled subscription closes its channel even while it holds a block.
func TestSubscribeSlowReader(t *testing.T) {
	tc := startTestChain(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := tc.local.WaitHeight(ctx, 10); err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithCancel(ctx)
	sub, err := tc.http.Subscribe(sctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	for want := int64(2); want < 12; want++ {
		time.Sleep(150 * time.Millisecond) // slower than the chain
		if be := <-sub; be.Height != want {
			t.Fatalf("got block %d, want %d", be.Height, want)
		}
	}
	time.Sleep(300 * time.Millisecond) // let the next block wait on the send
	scancel()
	for range sub {
	}
}

func TestSubscribeRefusals(t *testing.T) {
	tc := startTestChain(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := tc.local.Subscribe(ctx, -1); err == nil || !strings.Contains(err.Error(), "height -1") {
		t.Fatalf("from -1: %v", err)
	}
	if _, err := tc.local.Subscribe(ctx, 1, SubscribeEvery(0)); err == nil || !strings.Contains(err.Error(), "poll interval") {
		t.Fatalf("poll 0: %v", err)
	}
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	down, err := Dial(fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := down.Subscribe(ctx, 0); err == nil || !strings.Contains(err.Error(), "cannot reach node") {
		t.Fatalf("no node: %v", err)
	}
}

// tcpProxy forwards loopback connections to a node's RPC port and can cut
// them all, as a dropped network would, and refuse new websockets for a
// while, as a node that is down for them would. It counts the websocket
// connections it forwarded.
type tcpProxy struct {
	l        net.Listener
	target   string
	ws       atomic.Int32
	refuseWS atomic.Bool
	// refuse closes every new connection at once (a partition, with cut).
	refuse atomic.Bool

	mu    sync.Mutex
	conns []net.Conn
}

func startProxy(t *testing.T, target string) *tcpProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{l: l, target: target}
	t.Cleanup(func() { l.Close(); p.cut() })
	go p.serve()
	return p
}

func (p *tcpProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

func (p *tcpProxy) forward(c net.Conn) {
	if p.refuse.Load() {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
	br := bufio.NewReader(c)
	head, err := br.Peek(len("GET /websocket"))
	isWS := err == nil && string(head) == "GET /websocket"
	if isWS && p.refuseWS.Load() {
		_, _ = io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		c.Close()
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, up)
	p.mu.Unlock()
	if isWS {
		p.ws.Add(1)
	}
	go func() {
		_, _ = io.Copy(up, br)
		up.Close()
	}()
	_, _ = io.Copy(c, up)
	c.Close()
}

// cut closes every connection made so far.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestSubscribeSurvivesDroppedConnections cuts the websocket (and the
// polling connections) under a subscription: blocks keep coming without a
// gap, and the event subscription is opened again.
func TestSubscribeSurvivesDroppedConnections(t *testing.T) {
	tc := startTestChain(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	target := strings.TrimPrefix(tc.conf.RPC.ListenAddress, "tcp://")
	p := startProxy(t, target)
	c, err := Dial(p.l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	from := latestHeight(t, tc.local)
	sub, err := c.Subscribe(ctx, from, SubscribeEvery(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	next := readBlocks(t, ctx, sub, from, from+5)[5].Height + 1
	for p.ws.Load() == 0 { // the websocket opens concurrently with delivery
		next = readBlocks(t, ctx, sub, next, next)[0].Height + 1
	}
	p.cut()
	for p.ws.Load() < 2 {
		next = readBlocks(t, ctx, sub, next, next)[0].Height + 1
	}
	readBlocks(t, ctx, sub, next, next+10)
}

// TestBlockEventsOf: the block's own events come first, then those of its
// successful transactions in order; failed transactions add none (but
// count in Txs).
func TestBlockEventsOf(t *testing.T) {
	ev := func(typ string) abci.Event { return abci.Event{Type: typ} }
	res := &ctypes.ResultBlockResults{
		FinalizeBlockEvents: []abci.Event{ev("begin"), ev("end")},
		TxResults: []*abci.ExecTxResult{
			{Code: 0, Events: []abci.Event{ev("tx0a"), ev("tx0b")}},
			{Code: types.ErrInsufficientFunds.Code, Events: []abci.Event{ev("tx1")}},
			{Code: 0, Events: []abci.Event{ev("tx2")}},
		},
	}
	now := time.Now()
	be := blockEventsOf(7, now, res)
	var got []string
	for _, e := range be.Events {
		got = append(got, e.Type)
	}
	if be.Height != 7 || !be.Time.Equal(now) || strings.Join(got, " ") != "begin end tx0a tx0b tx2" {
		t.Fatalf("got height %d, events %v", be.Height, got)
	}
	if be.Txs != 3 {
		t.Fatalf("Txs = %d, want 3 (the failed one included)", be.Txs)
	}
}

func TestEventsOf(t *testing.T) {
	posted := func(id uint64) market.EventJobPosted {
		return market.EventJobPosted{Job: id, Kind: market.KindInference, Mode: market.ModeAuction, Stages: 1, Redundancy: 2,
			MaxPrice: types.OGPU(3), Locked: types.OGPU(6), BidEnd: 10, RevealEnd: 12}
	}
	evs := []abci.Event{
		types.EncodeEvent(posted(1)),
		types.EncodeEvent(market.EventJobCancelled{Job: 9, Refund: types.OGPU(1)}),
		types.EncodeEvent(posted(2)),
	}
	got := EventsOf[market.EventJobPosted](evs)
	if len(got) != 2 || got[0].Job != 1 || got[1].Job != 2 || !got[1].Locked.Eq(types.OGPU(6)) {
		t.Fatalf("got %+v", got)
	}
	cancelled, err := DecodeEvents[market.EventJobCancelled](evs)
	if err != nil || len(cancelled) != 1 || cancelled[0].Job != 9 {
		t.Fatalf("got %+v, %v", cancelled, err)
	}

	bad := types.EncodeEvent(posted(3))
	bad.Attributes = bad.Attributes[1:] // no job
	evs = append(evs, bad, types.EncodeEvent(posted(4)))
	if got := EventsOf[market.EventJobPosted](evs); len(got) != 3 || got[2].Job != 4 {
		t.Fatalf("lenient: got %+v", got)
	}
	if _, err := DecodeEvents[market.EventJobPosted](evs); err == nil || !strings.Contains(err.Error(), `"job" missing`) {
		t.Fatalf("strict: missing attribute: %v", err)
	}
}

// BenchmarkSubscribeReplay measures how fast a subscription replays past
// blocks (BlockResults and Header per block), in-process and over HTTP,
// from a chain of 300 blocks made every 10ms, most of them empty.
//
//	go test -run '^$' -bench BenchmarkSubscribeReplay -benchtime 5x ./node
func BenchmarkSubscribeReplay(b *testing.B) {
	const blocks = 300
	tc := startTestChainEvery(b, 0, 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := tc.local.WaitHeight(ctx, blocks+1); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		c    *Client
	}{{"local", tc.local}, {"http", tc.http}} {
		b.Run(c.name, func(b *testing.B) {
			start := time.Now()
			for range b.N {
				sctx, scancel := context.WithCancel(ctx)
				sub, err := c.c.Subscribe(sctx, 1)
				if err != nil {
					b.Fatal(err)
				}
				for h := int64(1); h <= blocks; h++ {
					if be := <-sub; be.Height != h {
						b.Fatalf("got block %d, want %d", be.Height, h)
					}
				}
				scancel()
				for range sub {
				}
			}
			b.ReportMetric(float64(b.N*blocks)/time.Since(start).Seconds(), "blocks/s")
		})
	}
}

// TestSubscribeDeliversCommittedBlocks: a block reaches subscribers only
// once the application has committed it, so a transaction sent in answer
// to its events is checked against the state after it (the node stores a
// block's results a moment before the commit; a provider revealing a bid
// on a "revealing" event was refused as early before this).
func TestSubscribeDeliversCommittedBlocks(t *testing.T) {
	tc := startTestChain(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range []*Client{tc.local, tc.http} {
		sub, err := c.Subscribe(ctx, 0, SubscribeEvery(5*time.Millisecond), SubscribePollOnly())
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 15; i++ {
			be := <-sub
			h, err := c.CommittedHeight(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if h < be.Height {
				t.Fatalf("block %d delivered while the application has committed only %d", be.Height, h)
			}
		}
	}
}

// countLogger counts the messages logged with text msg.
type countLogger struct {
	msg string
	n   *atomic.Int32
}

func (l countLogger) Debug(msg string, _ ...any) { l.count(msg) }
func (l countLogger) Info(msg string, _ ...any)  { l.count(msg) }
func (l countLogger) Error(msg string, _ ...any) { l.count(msg) }
func (l countLogger) With(...any) log.Logger     { return l }
func (l countLogger) count(msg string) {
	if msg == l.msg {
		l.n.Add(1)
	}
}

// TestSubscribeReopenWhileNodeComesBack is the soak's crash of `ogpu job
// run` (a panic in a goroutine of CometBFT's websocket client, "send on
// closed channel") as a test. The node's websockets drop (as when it is
// killed) and new ones are refused for a while; polling goes on, and each
// subscription re-opens its events while the websocket is still refused.
// CometBFT's client, stopped by that re-open while its own reconnect was
// asleep, dialled again once the websocket was back, resubscribed, and sent
// the answer on the channel Stop had closed. Several subscriptions go
// through this several times: blocks keep coming without a gap, nothing
// panics, and no goroutine is left once they end.
func TestSubscribeReopenWhileNodeComesBack(t *testing.T) {
	const subs, rounds = 8, 3
	tc := startTestChain(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	target := strings.TrimPrefix(tc.conf.RPC.ListenAddress, "tcp://")
	p := startProxy(t, target)
	c, err := Dial(p.l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}

	sctx, scancel := context.WithCancel(ctx)
	refused := make([]*atomic.Int32, subs)
	heights := make([]atomic.Int64, subs)
	errs := make(chan error, subs)
	var readers sync.WaitGroup
	from := latestHeight(t, tc.local)
	for i := range subs {
		refused[i] = new(atomic.Int32)
		logger := countLogger{msg: "cannot subscribe to new blocks; polling meanwhile", n: refused[i]}
		sub, err := c.Subscribe(sctx, from, SubscribeEvery(100*time.Millisecond), SubscribeLogger(logger))
		if err != nil {
			t.Fatal(err)
		}
		readers.Add(1)
		go func() {
			defer readers.Done()
			want := from
			for be := range sub {
				if be.Height != want {
					errs <- fmt.Errorf("subscription %d: got block %d, want %d", i, be.Height, want)
					scancel()
					for range sub {
					}
					return
				}
				heights[i].Store(be.Height)
				want++
			}
		}()
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case <-ctx.Done():
				t.Fatalf("waiting for %s: %v", what, ctx.Err())
			case err := <-errs:
				t.Fatal(err)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	waitFor("every subscription's websocket", func() bool { return p.ws.Load() >= subs })
	for round := range rounds {
		p.refuseWS.Store(true)
		before := make([]int32, subs)
		for i := range subs {
			before[i] = refused[i].Load()
		}
		p.cut()
		waitFor(fmt.Sprintf("round %d: every subscription refused its websocket", round), func() bool {
			for i := range subs {
				if refused[i].Load() == before[i] {
					return false
				}
			}
			return true
		})
		ws := p.ws.Load()
		p.refuseWS.Store(false)
		waitFor(fmt.Sprintf("round %d: every subscription's websocket again", round), func() bool { return p.ws.Load() >= ws+subs })
		// CometBFT's client redialled 1 to 3 s after the cut.
		time.Sleep(2 * time.Second)
	}
	until := latestHeight(t, tc.local) + 3
	waitFor("blocks after the last round", func() bool {
		for i := range subs {
			if heights[i].Load() < until {
				return false
			}
		}
		return true
	})
	scancel()
	readers.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	checkNoSubscriptionGoroutines(t)
}

// subscriptionGoroutines are the stacks of the goroutines that event
// subscriptions start (ours and CometBFT's websocket client's).
func subscriptionGoroutines() []string {
	buf := make([]byte, 4<<20)
	var left []string
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		for _, mark := range []string{
			"ogpu/node.(*subscription)", "ogpu/node.(*wsEvents)",
			"rpc/jsonrpc/client.(*WSClient)", "rpc/client/http.(*WSEvents)", "rpc/client/http.newWSEvents",
		} {
			if strings.Contains(g, mark) {
				left = append(left, g)
				break
			}
		}
	}
	return left
}

// checkNoSubscriptionGoroutines fails t if a subscription's goroutine is
// still running a few seconds from now.
func checkNoSubscriptionGoroutines(t *testing.T) {
	t.Helper()
	left := subscriptionGoroutines()
	for deadline := time.Now().Add(5 * time.Second); len(left) > 0 && time.Now().Before(deadline); left = subscriptionGoroutines() {
		time.Sleep(20 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Fatalf("%d goroutines of ended subscriptions left:\n%s", len(left), strings.Join(left, "\n\n"))
	}
}

// rpcAddr is the test chain's RPC address as Dial takes it.
func (tc *testChain) rpcAddr() string { return tc.conf.RPC.ListenAddress }

var newBlockHeaders = cmttypes.EventQueryNewBlockHeader.String()

// closeWithin calls w.Close and fails t if it does not return within d, or
// if Events is then not closed, or Err is set: Close stopped it, no
// failure did.
func closeWithin(t *testing.T, w *wsEvents, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { w.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("Close did not return within %s", d)
	}
	for { // Close returned: the reader has closed Events
		select {
		case _, ok := <-w.Events():
			if ok {
				continue // an event sent before Close
			}
		default:
			t.Fatal("Close returned before Events was closed")
		}
		break
	}
	if err := w.Err(); err != nil {
		t.Fatalf("Err after Close = %v, want nil (Close is no failure)", err)
	}
}

// TestWSEventsReadAndClose: the subscriber delivers new-block headers of
// consecutive heights, and Close ends it while its reader waits for the next
// one (in the read) and while its reader waits for the caller (in the send,
// nobody reading an unbuffered channel); either way Close returns, Events
// is closed, and no goroutine is left.
func TestWSEventsReadAndClose(t *testing.T) {
	tc := startTestChain(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	w, err := dialEvents(ctx, tc.rpcAddr(), newBlockHeaders, 4)
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	for range 3 {
		select {
		case ev := <-w.Events():
			h := eventHeight(ev)
			if last != 0 && h != last+1 {
				t.Fatalf("got height %d after %d", h, last)
			}
			last = h
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	closeWithin(t, w, 3*time.Second) // the reader is in the read, or sending into the buffer
	closeWithin(t, w, time.Second)   // again: no effect

	w, err = dialEvents(ctx, tc.rpcAddr(), newBlockHeaders, 0)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // blocks are 100ms: the reader waits on the send
	closeWithin(t, w, 3*time.Second)
	checkNoSubscriptionGoroutines(t)
}

// TestWSEventsConnectionLost: a cut connection ends the subscription with
// an error, and Close racing the cut (from another goroutine) never panics
// or hangs, whichever comes first; nothing is left running.
func TestWSEventsConnectionLost(t *testing.T) {
	tc := startTestChain(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := startProxy(t, strings.TrimPrefix(tc.rpcAddr(), "tcp://"))
	via := "http://" + p.l.Addr().String()

	w, err := dialEvents(ctx, via, newBlockHeaders, 16)
	if err != nil {
		t.Fatal(err)
	}
	<-w.Events()
	p.cut()
	for range w.Events() {
	}
	if err := w.Err(); err == nil || !strings.Contains(err.Error(), "the event websocket failed") {
		t.Fatalf("Err after the cut = %v, want the websocket's failure", err)
	}
	w.Close()

	for i := range 20 {
		w, err := dialEvents(ctx, via, newBlockHeaders, i%2) // unbuffered half the time
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(i%5) * 40 * time.Millisecond)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); p.cut() }()
		go func() { defer wg.Done(); w.Close() }()
		wg.Wait()
		for range w.Events() { // closed
		}
	}
	checkNoSubscriptionGoroutines(t)
}

// TestWSEventsDialEndsWithContext: a node that accepts the connection and
// never answers the handshake, or completes it and never answers the
// subscription, holds dialEvents only until its context ends.
func TestWSEventsDialEndsWithContext(t *testing.T) {
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	var held []net.Conn
	var mu sync.Mutex
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	}()
	go func() {
		for {
			c, err := mute.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()

	upgrader := websocket.Upgrader{}
	silent := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		c, err := upgrader.Upgrade(rw, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for { // reads the subscription, answers nothing
			if _, _, err := c.ReadMessage(); err != nil {
				return
			}
		}
	}))
	defer silent.Close()

	for _, addr := range []string{"tcp://" + mute.Addr().String(), silent.URL} {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(200*time.Millisecond, cancel)
		start := time.Now()
		_, err := dialEvents(ctx, addr, newBlockHeaders, 1)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: got %v, want context.Canceled", addr, err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("%s: dialEvents returned %s after its context ended", addr, d)
		}
	}
	checkNoSubscriptionGoroutines(t)
}

// TestWSEventsRefusals: what the node or the address refuses is a clear
// error, and no subscription.
func TestWSEventsRefusals(t *testing.T) {
	tc := startTestChain(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := startProxy(t, strings.TrimPrefix(tc.rpcAddr(), "tcp://"))
	p.refuseWS.Store(true)
	for _, c := range []struct{ addr, query, want string }{
		{tc.rpcAddr(), "tm.event = ", "the node refused the subscription"},
		{"http://" + p.l.Addr().String(), newBlockHeaders, "HTTP 503"},
		{"ftp://" + p.l.Addr().String(), newBlockHeaders, `scheme "ftp" is not one of`},
		{"http://", newBlockHeaders, "no host"},
	} {
		w, err := dialEvents(ctx, c.addr, c.query, 1)
		if err == nil {
			w.Close()
			t.Fatalf("%s %q: subscribed", c.addr, c.query)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s %q: got %v, want %q", c.addr, c.query, err, c.want)
		}
	}
	checkNoSubscriptionGoroutines(t)
}

// TestWSEventsHostileNode: whatever answers at a node's address may send
// anything once the subscription is accepted. A message over
// wsMaxMessage, or one that is not a JSON-RPC event, ends the
// subscription with an error (the caller reopens it and polls), and
// nothing is delivered; no goroutine is left.
func TestWSEventsHostileNode(t *testing.T) {
	upgrader := websocket.Upgrader{}
	for _, c := range []struct {
		name string
		send []byte
		want string
	}{
		{"oversized", []byte(`{"jsonrpc":"2.0","id":0,"result":{"data":"` + strings.Repeat("x", wsMaxMessage) + `"}}`), "read limit exceeded"},
		{"garbage", []byte("\x00\xff not json"), "the event websocket failed"},
		{"not an event", []byte(`{"jsonrpc":"2.0","id":0,"result":{"query":1}}`), "cannot decode an event"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				conn, err := upgrader.Upgrade(rw, r, nil)
				if err != nil {
					return
				}
				defer conn.Close()
				if _, _, err := conn.ReadMessage(); err != nil { // the subscription
					return
				}
				_ = conn.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":0,"result":{}}`))
				_ = conn.WriteMessage(websocket.TextMessage, c.send)
				_, _, _ = conn.ReadMessage() // until the client goes
			}))
			defer srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			w, err := dialEvents(ctx, srv.URL, newBlockHeaders, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			select {
			case ev, ok := <-w.Events():
				if ok {
					t.Fatalf("delivered %+v", ev)
				}
			case <-ctx.Done():
				t.Fatal("the subscription did not end")
			}
			if err := w.Err(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ended with %v, want %q", err, c.want)
			}
		})
	}
	checkNoSubscriptionGoroutines(t)
}
