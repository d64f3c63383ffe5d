package node

import (
	"context"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cmtcfg "github.com/cometbft/cometbft/config"
	cmtcrypto "github.com/cometbft/cometbft/crypto"
	"github.com/cometbft/cometbft/crypto/ed25519"
	"github.com/cometbft/cometbft/libs/log"
	"github.com/cometbft/cometbft/p2p"
	"github.com/cometbft/cometbft/privval"
	rpcclient "github.com/cometbft/cometbft/rpc/client"
	"github.com/cometbft/cometbft/rpc/client/local"
	ctypes "github.com/cometbft/cometbft/rpc/core/types"
	cmttypes "github.com/cometbft/cometbft/types"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/types"
)

// startFullNode starts a node that validates nothing, on tc's genesis,
// whose only peer is tc's node reached through a proxy the test owns.
func startFullNode(t *testing.T, tc *testChain) (*Client, *tcpProxy) {
	t.Helper()
	home := t.TempDir()
	conf, err := LocalConfig(home, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	conf.SetRoot(home)
	cmtcfg.EnsureRoot(home)
	gen, err := os.ReadFile(tc.conf.GenesisFile())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf.GenesisFile(), gen, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := p2p.LoadOrGenNodeKey(conf.NodeKeyFile()); err != nil {
		t.Fatal(err)
	}
	if _, err := privval.LoadOrGenFilePV(conf.PrivValidatorKeyFile(), conf.PrivValidatorStateFile(), func() (cmtcrypto.PrivKey, error) { return ed25519.GenPrivKey(), nil }); err != nil {
		t.Fatal(err)
	}
	proxy := startProxy(t, strings.TrimPrefix(tc.conf.P2P.ListenAddress, "tcp://"))
	conf.P2P.PersistentPeers = string(tc.node.NodeInfo().ID()) + "@" + proxy.l.Addr().String()
	conf.P2P.PexReactor = false
	n, err := StartChainNode(context.Background(), conf, log.NewNopLogger(), chain.WithInvariants())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return &Client{RPC: local.New(n.Node)}, proxy
}

// TestSendThroughACutOffNode is soak finding 13: providers revealed their
// bids through their own node while it was partitioned from the
// validators; its mempool took the reveals, could not pass them on, and
// the 3-block reveal window ended without them (the job was refunded).
// A client given other nodes (Client.Also, --broadcast) hands them every
// transaction its node took: the transfer lands on the validator while
// the sender's own node is still cut off, and Send returns once that node
// is back and has the block.
func TestSendThroughACutOffNode(t *testing.T) {
	tc := startTestChain(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	full, proxy := startFullNode(t, tc)
	for { // caught up: its mempool takes transactions
		st, err := full.RPC.Status(ctx)
		if err == nil && !st.SyncInfo.CatchingUp && st.SyncInfo.LatestBlockHeight > 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the full node never caught up")
		}
		time.Sleep(50 * time.Millisecond)
	}

	proxy.refuse.Store(true)
	proxy.cut()
	cutAt := latestHeight(t, full)
	s := NewSender(&Client{RPC: full.RPC, Also: []rpcclient.Client{tc.local.RPC}}, tc.keys[0])
	done := make(chan error, 1)
	go func() {
		_, err := s.Send(ctx, transfer(0))
		done <- err
	}()
	// The transfer lands within a few blocks, with the sender's node cut
	// off all along.
	landed := false
	for range 20 {
		if err := tc.local.WaitHeight(ctx, latestHeight(t, tc.local)+1); err != nil {
			t.Fatal(err)
		}
		if acct, err := tc.local.Account(ctx, recipient(0)); err == nil && !acct.Balance.IsZero() {
			landed = true
			break
		}
	}
	if h := latestHeight(t, full); h > cutAt+1 {
		t.Fatalf("the sender's node went on from height %d to %d while cut off: the test partitions nothing", cutAt, h)
	}
	if !landed {
		select {
		case err := <-done:
			t.Logf("Send: %v", err)
		default:
		}
		t.Fatal("20 blocks passed without the transfer its node took while cut off: it was handed to no other node")
	}
	proxy.refuse.Store(false)
	if err := <-done; err != nil {
		t.Fatalf("Send after its node came back: %v", err)
	}
	if acct, err := tc.local.Account(ctx, recipient(0)); err != nil || acct.Balance.Uint64() != 1000 {
		t.Fatalf("the recipient holds %v, %v: want 1000 base units, once", acct, err)
	}
}

// TestDialAll: the first address is the node queried, the others only
// take transactions; no address is an error that says what to give.
func TestDialAll(t *testing.T) {
	if _, err := DialAll(nil); err == nil || !strings.Contains(err.Error(), "at least one") {
		t.Fatalf("DialAll(nil): %v, want an error asking for an address", err)
	}
	c, err := DialAll([]string{"127.0.0.1:1", "tcp://127.0.0.1:2", "http://127.0.0.1:3"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "http://127.0.0.1:1" || len(c.Also) != 2 {
		t.Fatalf("DialAll: queries %q, hands on to %d nodes; want http://127.0.0.1:1 and 2", c.Addr, len(c.Also))
	}
}

// orderRPC records the transactions handed to it, answering each after a
// random pause (as a loaded node does).
type orderRPC struct {
	rpcclient.Client
	mu  sync.Mutex
	got [][]byte
}

func (o *orderRPC) BroadcastTxSync(_ context.Context, tx cmttypes.Tx) (*ctypes.ResultBroadcastTx, error) {
	time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
	o.mu.Lock()
	o.got = append(o.got, tx)
	o.mu.Unlock()
	return &ctypes.ResultBroadcastTx{}, nil
}

// TestHandOnKeepsOrder: another node gets a sender's transactions in the
// order they were handed on, however its answers are delayed. Out of
// order, it refuses nonce n+1 before n ("nonce ahead") and, having
// refused it, does not take it from its peers' gossip either: the
// transaction reaches the validators only through the sender's own node,
// the one that was cut off.
func TestHandOnKeepsOrder(t *testing.T) {
	a, b := &orderRPC{}, &orderRPC{}
	c := &Client{Also: []rpcclient.Client{a, b}}
	const n = 40
	for i := range n {
		c.handOn([]byte{byte(i)})
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, o := range []*orderRPC{a, b} {
		for {
			o.mu.Lock()
			k := len(o.got)
			o.mu.Unlock()
			if k == n || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		o.mu.Lock()
		if len(o.got) != n {
			t.Fatalf("%d of %d transactions handed on", len(o.got), n)
		}
		for i, tx := range o.got {
			if tx[0] != byte(i) {
				t.Fatalf("transaction %d was handed on as number %d: want the order they were sent in", tx[0], i)
			}
		}
		o.mu.Unlock()
	}
}

// refusingRPC answers every transaction handed to it with a nonce
// refusal: another node that lags, or one that lies.
type refusingRPC struct {
	rpcclient.Client
	got atomic.Int64
}

func (r *refusingRPC) BroadcastTxSync(context.Context, cmttypes.Tx) (*ctypes.ResultBroadcastTx, error) {
	r.got.Add(1)
	return &ctypes.ResultBroadcastTx{Code: types.ErrNonceUsed.Code, Log: "nonce used"}, nil
}

// TestHostileBroadcastNodeCannotMakeSenderResign: the other node refuses
// everything handed to it. The Sender acts on its own node's answers
// only: three transfers land once each, with nonces 0, 1, 2, and nothing
// is signed twice.
func TestHostileBroadcastNodeCannotMakeSenderResign(t *testing.T) {
	tc := startTestChain(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bad := &refusingRPC{}
	s := NewSender(&Client{RPC: tc.local.RPC, Also: []rpcclient.Client{bad}}, tc.keys[0])
	for i := range 3 {
		res, err := s.Send(ctx, transfer(i))
		if err != nil {
			t.Fatal(err)
		}
		if got := txNonce(t, res); got != uint64(i) {
			t.Fatalf("transfer %d landed with nonce %d", i, got)
		}
	}
	acct, err := tc.local.Account(ctx, crypto.PubkeyToAddress(tc.keys[0].PublicKey))
	if err != nil || acct.Nonce != 3 {
		t.Fatalf("sender's nonce %v, %v: want 3 (nothing signed twice)", acct, err)
	}
	for bad.got.Load() < 3 && ctx.Err() == nil { // hand-offs are asynchronous
		time.Sleep(10 * time.Millisecond)
	}
	if bad.got.Load() < 3 {
		t.Fatalf("the other node was handed %d of 3 transactions", bad.got.Load())
	}
}

// behindRPC refuses the first transaction it is given as a node one block
// behind does for a transaction valid from the next block ("not yet"),
// and passes the rest on.
type behindRPC struct {
	rpcclient.Client
	given atomic.Int32
}

func (r *behindRPC) BroadcastTxSync(ctx context.Context, tx cmttypes.Tx) (*ctypes.ResultBroadcastTx, error) {
	if r.given.Add(1) == 1 {
		return &ctypes.ResultBroadcastTx{Hash: tx.Hash(), Code: types.ErrWrongPhase.Code, Log: "job 53 takes bid reveals from height 625"}, nil
	}
	return r.Client.BroadcastTxSync(ctx, tx)
}

// TestHandOnAgainSoon is the soak's job 53: two providers revealed their
// bids once their node had committed the bid window's last block; the
// other nodes had not yet, refused the reveals, and were never given them
// again (a peer gossips a transaction once, and the sender rebroadcast
// every 3 s, after the 3-block reveal window). Here the sender's own node
// takes the transfer and passes it to nobody, and the other node refuses
// it the first time: it lands because the sender hands it on again within
// the first second and a half, not at the next regular rebroadcast (20 s).
func TestHandOnAgainSoon(t *testing.T) {
	tc := startTestChain(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	own := &losingRPC{Client: tc.local.RPC}
	own.lose.Store(1 << 20) // cut off: it takes everything and passes nothing on
	other := &behindRPC{Client: tc.local.RPC}
	s := NewSender(&Client{RPC: own, Also: []rpcclient.Client{other}}, tc.keys[0])
	s.RebroadcastEvery = 20 * time.Second
	if _, err := s.Send(ctx, transfer(0)); err != nil {
		t.Fatalf("the transfer refused once by a node a block behind was not handed to it again soon: %v", err)
	}
	if n := other.given.Load(); n < 2 {
		t.Fatalf("the other node was given the transfer %d times", n)
	}
	if own.sent.Load() != 0 {
		t.Fatal("the sender's own node passed the transfer on: the test tested nothing")
	}
}
