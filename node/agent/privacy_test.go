package agent

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	ethcrypto "github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// barePeer is a registered, bonded provider with a libp2p host and no
// agent: the test drives it by hand (an attacker that never loads a
// model).
type barePeer struct {
	key    *ecdsa.PrivateKey
	addr   types.Address
	host   *p2p.Host
	sender *node.Sender
}

func (n *testNet) barePeer(name string) *barePeer {
	n.t.Helper()
	nodeKey, _ := ethcrypto.GenerateKey()
	h, _ := n.host(name, nodeKey)
	k := n.keys[name]
	bp := &barePeer{key: k, addr: ethcrypto.PubkeyToAddress(k.PublicKey), host: h, sender: node.NewSender(n.c, k)}
	addrs := h.Addrs()
	if len(addrs) > market.MaxAddrs {
		addrs = addrs[:market.MaxAddrs]
	}
	info := market.ProviderInfo{PeerID: h.ID().String(), Addrs: addrs, Attributes: []string{"ram/16Gi"},
		Runtimes: []string{Runtime}, Models: []types.Hash{n.model}, Class: "lazy"}
	if _, err := bp.sender.Send(n.ctx, (&market.MsgRegisterProvider{Info: info}).Raw(), (&escrow.MsgBond{Amount: types.OGPU(200)}).Raw()); err != nil {
		n.t.Fatal(err)
	}
	return bp
}

// worth is addr's balance plus bonded stake.
func (n *testNet) worth(addr types.Address) *uint256.Int {
	n.t.Helper()
	acc, err := n.c.Account(n.ctx, addr)
	if err != nil {
		n.t.Fatal(err)
	}
	st, err := n.c.Stake(n.ctx, addr)
	if err != nil {
		n.t.Fatal(err)
	}
	return new(uint256.Int).Add(acc.Balance, st.Bonded)
}

// TestH2LazyCopierGetsNothing is the review's H2 attack with real agents:
// one honest provider agent (real llama.cpp) and one lazy provider that
// never loads a model. The lazy one bids, and once both are awarded it
// opens the honest provider's token stream to read the result hash the
// stream ends with, commits that hash as its own and reveals it. The
// stream now goes to the client only: the lazy provider reads nothing,
// commits nothing, and is not paid.
func TestH2LazyCopierGetsNothing(t *testing.T) {
	n := newTestNet(t)
	honest := n.provider("prov1", 40, false)
	lazy := n.barePeer("prov2")
	before := n.worth(lazy.addr)
	cl := n.client()

	ctx, cancel := context.WithCancel(n.ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	var (
		mu        sync.Mutex
		streamErr error
		copied    *types.Hash
	)
	wg.Add(1)
	go func() { // the lazy provider
		defer wg.Done()
		blocks, err := n.c.Subscribe(ctx, 1)
		if err != nil {
			return
		}
		price, bidSalt, resSalt := types.OGPU(1), types.Hash{1}, types.Hash{2}
		for b := range blocks {
			for _, e := range node.EventsOf[market.EventJobPosted](b.Events) {
				msg := &market.MsgCommitBid{Job: e.Job, Commitment: market.BidCommitment(e.Job, 0, price, bidSalt, lazy.addr)}
				_, _ = lazy.sender.Send(ctx, msg.Raw())
			}
			for _, e := range node.EventsOf[market.EventJobRevealing](b.Events) {
				_, _ = lazy.sender.Send(ctx, (&market.MsgRevealBid{Job: e.Job, Price: price, Salt: bidSalt}).Raw())
			}
			for _, e := range node.EventsOf[market.EventJobAwarded](b.Events) {
				if !strings.Contains(strings.Join(e.Providers, ","), lazy.addr.Hex()) {
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					pid, err := connectProvider(ctx, lazy.host, n.c, honest.agent.Address())
					if err != nil {
						t.Errorf("lazy: cannot reach the honest provider: %v", err)
						return
					}
					h, err := StreamTokens(ctx, lazy.host, pid, e.Job, nil)
					mu.Lock()
					streamErr = err
					mu.Unlock()
					if err != nil {
						t.Logf("lazy: token stream of the honest provider: %v", err)
						return
					}
					t.Logf("lazy: read the honest result hash %x from the token stream; committing it as its own", h[:8])
					mu.Lock()
					copied = &h
					mu.Unlock()
					_, _ = lazy.sender.Send(ctx, (&verifier.MsgCommitResult{Job: e.Job, Commitment: verifier.ResultCommitment(h, resSalt, lazy.addr)}).Raw())
					for ctx.Err() == nil { // reveal once reveals open
						if _, err := lazy.sender.Send(ctx, (&verifier.MsgRevealResult{Job: e.Job, Result: h, Salt: resSalt}).Raw()); err == nil {
							return
						}
						time.Sleep(200 * time.Millisecond)
					}
				}()
			}
		}
	}()

	res, err := cl.RunLLM(n.ctx, n.job(16), func(f string, a ...any) { t.Logf("[client] "+f, a...) }, nil)
	t.Logf("client: job ended: outcome %v, err %v", res.Outcome, err)
	j, qerr := n.c.Job(n.ctx, res.Job)
	if qerr != nil {
		t.Fatal(qerr)
	}
	after := n.worth(lazy.addr)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("lazy provider worth %s -> %s (it never loaded a model)", types.FormatAmount(before), types.FormatAmount(after))
	if copied != nil {
		t.Errorf("the lazy provider read the honest result hash %x from the token stream before committing", copied[:8])
	}
	if streamErr == nil || !strings.Contains(streamErr.Error(), "token stream") {
		t.Errorf("lazy provider's stream request: %v, want a refusal that names the token stream", streamErr)
	}
	for _, s := range j.Tasks[0].Slots {
		if s.Provider == lazy.addr && (s.Committed || s.Revealed) {
			t.Errorf("the lazy provider committed a result: %+v", s)
		}
	}
	if !after.Lt(before) {
		t.Errorf("lazy provider worth %s -> %s: paid (or at least not slashed) without computing", types.FormatAmount(before), types.FormatAmount(after))
	}
}

// TestH3StrangerBlobRefused: after a disputed job (a liar forces the
// validator to fetch the prompt and both outputs), a stranger with a
// fresh key and no role asks the provider, the validator agent and the
// client for the prompt and the outputs: every one refuses. The client
// itself fetched the verified output. A restarted provider (its access
// rules read back from disk) still refuses the stranger and serves the
// client.
func TestH3StrangerBlobRefused(t *testing.T) {
	n := newTestNet(t)
	honest := n.provider("prov1", 40, false)
	n.provider("prov2", 50, true)
	cl := n.client()
	job := n.job(16)
	job.Prompt = "Once upon a time, PRIVATE-4711"
	res, err := cl.RunLLM(n.ctx, job, func(f string, a ...any) { t.Logf("[client] "+f, a...) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != "verdict" || res.Text == "" {
		t.Fatalf("outcome %s text %q: want a verdict and the verified text fetched by the client", res.Outcome, res.Text)
	}
	j, err := n.c.Job(n.ctx, res.Job)
	if err != nil {
		t.Fatal(err)
	}
	blobs := map[string]types.Hash{"prompt": j.Input}
	for _, s := range j.Tasks[0].Slots {
		if s.Result != nil {
			blobs["output of "+s.Provider.Hex()[:8]] = *s.Result
		}
	}
	vals, err := n.c.Validators(n.ctx)
	if err != nil || len(vals) == 0 {
		t.Fatal(vals, err)
	}
	sk, _ := ethcrypto.GenerateKey()
	stranger, _ := n.host("stranger", sk)
	holders := map[string]peer.ID{"provider": honest.host.ID(), "client": cl.Host.ID()}
	for _, id := range peersOf(stranger, vals[0].Operator) {
		holders["validator"] = id
	}
	if _, ok := holders["validator"]; !ok {
		t.Fatal("the stranger is not connected to the validator agent (its bootstrap peer)")
	}
	if err := stranger.ConnectPeer(n.ctx, cl.Host.ID(), cl.Host.Addrs()); err != nil {
		t.Fatal(err)
	}
	if _, err := connectProvider(n.ctx, stranger, n.c, honest.agent.Address()); err != nil {
		t.Fatal(err)
	}
	for who, id := range holders {
		for what, h := range blobs {
			fctx, cancel := context.WithTimeout(n.ctx, 20*time.Second)
			_, err := stranger.Fetch(fctx, h, p2p.FetchOptions{Peers: []peer.ID{id}})
			cancel()
			switch {
			case err == nil:
				t.Errorf("%-20s from %-9s: SERVED to a stranger", what, who)
			case errors.Is(err, p2p.ErrForbidden):
				t.Logf("%-20s from %-9s: refused: %v", what, who, err)
			case errors.Is(err, p2p.ErrNotHeld):
				t.Logf("%-20s from %-9s: not held", what, who)
			default:
				t.Errorf("%-20s from %-9s: %v, want a refusal (forbidden)", what, who, err)
			}
		}
	}
	// A restart reads the rules back from disk: still private, still the
	// client's.
	restarted, err := OpenAccess(n.c, honest.agent.cfg.Access.dir)
	if err != nil {
		t.Fatal(err)
	}
	for what, h := range blobs {
		if !honest.agent.cfg.Store.Has(h) {
			continue
		}
		if err := restarted.Authorize(n.ctx, stranger.ID(), h); err == nil {
			t.Errorf("after a restart the provider serves the %s to a stranger", what)
		}
		if err := restarted.Authorize(n.ctx, cl.Host.ID(), h); err != nil {
			t.Errorf("after a restart the provider refuses the %s to the job's client: %v", what, err)
		}
	}
}

// TestH3StrangerStreamRefused: while a job runs, a stranger asking a
// winner for the job's token stream is refused with a clear message, the
// client still streams the text. L4: the client asking a provider that
// holds no slot of the job is refused at once, not held for minutes.
func TestH3StrangerStreamRefused(t *testing.T) {
	n := newTestNet(t)
	p1 := n.provider("prov1", 40, false)
	n.provider("prov2", 50, false)
	p3 := n.provider("prov3", 60, false) // the backup: no slot
	cl := n.client()
	sk, _ := ethcrypto.GenerateKey()
	stranger, _ := n.host("stranger", sk)

	ctx, cancel := context.WithCancel(n.ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	var strangerErr, notHeldErr error
	var notHeldTook time.Duration
	wg.Add(1)
	go func() {
		defer wg.Done()
		blocks, err := n.c.Subscribe(ctx, 1)
		if err != nil {
			return
		}
		for b := range blocks {
			for _, e := range node.EventsOf[market.EventJobAwarded](b.Events) {
				pid, err := connectProvider(ctx, stranger, n.c, p1.agent.Address())
				if err == nil {
					_, err = StreamTokens(ctx, stranger, pid, e.Job, nil)
				}
				strangerErr = err
				// The client asks the provider that lost the auction.
				pid, err = connectProvider(ctx, cl.Host, n.c, p3.agent.Address())
				if err == nil {
					sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
					t0 := time.Now()
					_, err = StreamTokens(sctx, cl.Host, pid, e.Job, nil)
					notHeldTook = time.Since(t0)
					scancel()
				}
				notHeldErr = err
				return
			}
		}
	}()
	var text strings.Builder
	res, err := cl.RunLLM(n.ctx, n.job(16), nil, func(s string) { text.WriteString(s) })
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	wg.Wait()
	t.Logf("stranger: %v", strangerErr)
	if strangerErr == nil || !strings.Contains(strangerErr.Error(), "may not read") {
		t.Errorf("stranger's stream request: %v, want a refusal", strangerErr)
	}
	if text.Len() == 0 || res.Outcome != "agreed" {
		t.Errorf("the client streamed %q (outcome %s): the job's client must still get the stream", text.String(), res.Outcome)
	}
	t.Run("L4 job not held", func(t *testing.T) {
		t.Logf("client asking the provider without a slot: %v (after %s)", notHeldErr, notHeldTook.Round(time.Millisecond))
		if notHeldErr == nil || !strings.Contains(notHeldErr.Error(), "holds no slot") {
			t.Errorf("stream request to a provider holding no slot: %v, want a refusal at once", notHeldErr)
		}
	})
	for deadline := time.Now().Add(10 * time.Second); p1.agent.feeds.len() != 0 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond) // the provider sees the close a block later
	}
	if n := p1.agent.feeds.len(); n != 0 {
		t.Errorf("L4: the provider still holds %d token streams after the job closed", n)
	}
}
