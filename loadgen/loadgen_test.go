package loadgen

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"strings"
	"testing"
	"time"

	"github.com/cometbft/cometbft/libs/log"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
)

// startNode starts a real single-validator node in this process, blocks
// every blockTime, with a funded faucet, and returns its RPC address and a
// client to it.
func startNode(t *testing.T, blockTime time.Duration) (string, *node.Client) {
	t.Helper()
	home := t.TempDir()
	conf, err := node.LocalConfig(home, blockTime)
	if err != nil {
		t.Fatal(err)
	}
	doc := genesis.Default()
	if err := doc.AddAccount(crypto.PubkeyToAddress(faucetKey(t).PublicKey), types.OGPU(1_000_000)); err != nil {
		t.Fatal(err)
	}
	if _, err := node.InitHome(node.InitOptions{Home: home, ChainID: "ogpu-loadgen-test", Genesis: doc, Config: conf}); err != nil {
		t.Fatal(err)
	}
	n, err := node.StartChainNode(context.Background(), conf, log.NewNopLogger(), chain.WithInvariants())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	c, err := node.Dial(conf.RPC.ListenAddress)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitHeight(ctx, 2); err != nil {
		t.Fatal(err)
	}
	return conf.RPC.ListenAddress, c
}

// readyAccounts validates cfg and returns its accounts, funded and
// registered from the faucet.
func readyAccounts(t *testing.T, c *node.Client, cfg *Config) Accounts {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	accts := AccountsFor(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := Setup(ctx, c, accts, faucetKey(t)); err != nil {
		t.Fatal(err)
	}
	return accts
}

func faucetKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	seed := sha256.Sum256([]byte("ogpu-loadgen-test-faucet"))
	k, err := crypto.ToECDSA(seed[:])
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// nonces sums the on-chain nonces of accts: each transaction in a block,
// succeeded or failed, used one.
func nonces(t *testing.T, c *node.Client, accts Accounts) uint64 {
	t.Helper()
	var sum uint64
	for _, k := range append(append([]*ecdsa.PrivateKey{}, accts.Clients...), accts.Providers...) {
		a, err := c.Account(context.Background(), crypto.PubkeyToAddress(k.PublicKey))
		if err != nil {
			t.Fatal(err)
		}
		sum += a.Nonce
	}
	return sum
}

// TestMarketLoadCountsAddUp: a short market run against a real node. Every
// accepted transaction is found in a block (none dropped), the chain's own
// nonces count exactly the committed ones, every job the run posted is
// cancelled on chain after its reveals (no provider awarded, none jailed),
// and the run stops at --max-txs, well before --duration.
func TestMarketLoadCountsAddUp(t *testing.T) {
	addr, c := startNode(t, 200*time.Millisecond)
	var out bytes.Buffer
	cfg := &Config{
		Endpoints: []string{addr}, Rate: 100, Duration: time.Minute, MaxTxs: 120, Drain: 30 * time.Second,
		Clients: 3, Providers: 5, Bidders: 3, BidBlocks: 8, RevealBlocks: 14, Seed: "test", Report: &out,
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	accts := AccountsFor(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := Setup(ctx, c, accts, faucetKey(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.Funded != 8 || res.Registered != 5 {
		t.Fatalf("setup funded %d and registered %d, want 8 and 5", res.Funded, res.Registered)
	}
	// Setup again finds nothing to do: a second run reuses the accounts.
	if res, err := Setup(ctx, c, accts, nil); err != nil || res != (SetupResult{}) {
		t.Fatalf("second setup: %+v, %v; want nothing done", res, err)
	}
	before := nonces(t, c, accts)

	start := time.Now()
	rep, err := Run(ctx, cfg, accts)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	if took := time.Since(start); took > 50*time.Second {
		t.Fatalf("the run took %s: --max-txs 120 should have ended the load long before --duration 1m", took)
	}
	// Each job costs 1 post + 3 commits + 3 reveals + 1 cancel = 8: the
	// run starts only jobs whose whole life fits in max-txs.
	if rep.Sent > cfg.MaxTxs || rep.JobsPosted != cfg.MaxTxs/8 {
		t.Fatalf("sent %d in %d jobs, want at most max-txs %d in %d jobs", rep.Sent, rep.JobsPosted, cfg.MaxTxs, cfg.MaxTxs/8)
	}
	if rep.Dropped != 0 || rep.JobsOpen != 0 {
		t.Fatalf("%d accepted txs never in a block, %d jobs open after the drain", rep.Dropped, rep.JobsOpen)
	}
	if rep.Accepted != rep.Committed+rep.Failed {
		t.Fatalf("accepted %d != committed %d + failed in block %d", rep.Accepted, rep.Committed, rep.Failed)
	}
	if got := nonces(t, c, accts) - before; got != uint64(rep.Committed+rep.Failed) {
		t.Fatalf("the accounts' nonces moved by %d, the report counts %d txs in blocks", got, rep.Committed+rep.Failed)
	}
	if rep.JobsPosted == 0 || rep.JobsPosted*8 < rep.Committed {
		t.Fatalf("%d jobs posted for %d committed txs", rep.JobsPosted, rep.Committed)
	}
	// max-txs ended the load: the sustained window runs to the last block
	// with one of the run's transactions, so it holds all of them.
	if rep.CommittedInLoad != rep.Committed || rep.CommittedPerSec <= 0 || rep.BlockMedian <= 0 {
		t.Fatalf("sustained window: %d of %d committed, %.1f tx/s, median block %s", rep.CommittedInLoad, rep.Committed, rep.CommittedPerSec, rep.BlockMedian)
	}
	cancelled := 0
	for _, k := range accts.Clients {
		jobs, err := c.Jobs(ctx, "/client/"+crypto.PubkeyToAddress(k.PublicKey).Hex())
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if j.StateName == "cancelled" {
				cancelled++
			}
		}
	}
	if cancelled != rep.JobsCancelled || cancelled != rep.JobsPosted-rep.JobsLate {
		t.Fatalf("chain has %d cancelled load jobs; report: %d posted, %d cancelled, %d late", cancelled, rep.JobsPosted, rep.JobsCancelled, rep.JobsLate)
	}
	// Every job's last bidder holds its reveal back: an auction closes at
	// its last sealed bid's reveal, and a job awarded before its cancel
	// would hand load providers a task they then miss (slashed, jailed).
	if rep.JobsLate != 0 || rep.Tainted != 0 {
		t.Fatalf("%d load jobs awarded before their cancel, %d providers tainted", rep.JobsLate, rep.Tainted)
	}
	for _, k := range rep.Kinds {
		if k.Kind == KindReveal && k.Committed == 0 {
			t.Fatalf("no reveal committed: %+v", rep.Kinds)
		}
	}
	if !strings.Contains(out.String(), "sustained:") || !strings.Contains(out.String(), "t=  1s") {
		t.Fatalf("report lacks the per-second lines or the summary:\n%s", out.String())
	}
}

// TestTransferLoadStopsAtMaxTxs: the transfer baseline sends exactly
// --max-txs and every one reaches a block.
func TestTransferLoadStopsAtMaxTxs(t *testing.T) {
	addr, c := startNode(t, 100*time.Millisecond)
	cfg := &Config{Endpoints: []string{"http://" + strings.TrimPrefix(addr, "tcp://")}, Mode: ModeTransfer, Rate: 200, Duration: time.Minute, MaxTxs: 57, Clients: 4, Seed: "t"}
	accts := readyAccounts(t, c, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	before := nonces(t, c, accts)
	rep, err := Run(ctx, cfg, accts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sent != 57 || rep.Accepted != 57 || rep.Committed != 57 || rep.Dropped != 0 {
		t.Fatalf("sent %d, accepted %d, committed %d, dropped %d; want 57, 57, 57, 0 (errors %v)", rep.Sent, rep.Accepted, rep.Committed, rep.Dropped, rep.Errors)
	}
	if got := nonces(t, c, accts) - before; got != 57 {
		t.Fatalf("nonces moved by %d, want 57", got)
	}
	if rep.Load > 30*time.Second {
		t.Fatalf("load phase %s: max-txs should end it at once", rep.Load)
	}
}

// TestEndpointsMustBeLoopback: the generator refuses any endpoint not on
// this machine before it sends anything, and says why.
func TestEndpointsMustBeLoopback(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:26657", "http://127.0.0.1:26657", "tcp://127.0.0.1:26657", "http://localhost:26657", "http://[::1]:26657", "127.0.0.2:1"} {
		if err := CheckLoopback(ok); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"10.0.0.1:26657", "http://0.0.0.0:26657", "http://example.com:26657", "https://127.0.0.1:26657",
		"http://127.0.0.1.example.com:26657", "http://[::ffff:8.8.8.8]:26657", "unix:///tmp/sock", "http://localhost.evil.org:1"} {
		if err := CheckLoopback(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	cfg := &Config{Endpoints: []string{"127.0.0.1:26657", "192.168.1.5:26657"}, Rate: 10, Duration: time.Second, MaxTxs: 10, Clients: 2, Providers: 2}
	_, err := Run(context.Background(), cfg, AccountsFor(cfg))
	if err == nil || !strings.Contains(err.Error(), "not on loopback") {
		t.Fatalf("Run with a non-loopback endpoint: %v", err)
	}
}

// TestConfigBounds: the run is bounded in time and count, and a bad
// setting is refused with what to do.
func TestConfigBounds(t *testing.T) {
	base := func() *Config {
		return &Config{Endpoints: []string{"127.0.0.1:26657"}, Rate: 10, Duration: time.Second, MaxTxs: 10, Clients: 2, Providers: 4}
	}
	if err := base().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*Config){
		"no duration":      func(c *Config) { c.Duration = 0 },
		"no max txs":       func(c *Config) { c.MaxTxs = 0 },
		"no rate":          func(c *Config) { c.Rate = 0 },
		"huge rate":        func(c *Config) { c.Rate = MaxRate + 1 },
		"no endpoint":      func(c *Config) { c.Endpoints = nil },
		"bidders > provs":  func(c *Config) { c.Bidders = 5 },
		"unknown mode":     func(c *Config) { c.Mode = "spam" },
		"1-block reveal":   func(c *Config) { c.RevealBlocks = 1 },
		"one transferrer":  func(c *Config) { c.Mode, c.Clients = ModeTransfer, 1 },
		"too many clients": func(c *Config) { c.Clients = MaxAccounts + 1 },
	} {
		c := base()
		mod(c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestKeysAreStable: the same seed gives the same accounts, another seed
// or role others.
func TestKeysAreStable(t *testing.T) {
	a, b := Keys("s", "client", 3), Keys("s", "client", 3)
	for i := range a {
		if !a[i].Equal(b[i]) {
			t.Fatalf("key %d differs between two derivations", i)
		}
	}
	if Keys("s", "provider", 1)[0].Equal(a[0]) || Keys("t", "client", 1)[0].Equal(a[0]) || a[0].Equal(a[1]) {
		t.Fatal("keys collide across roles, seeds or indexes")
	}
}

// TestTaintedProvidersBidUntilTheirNoShow: a job whose cancel did not land
// awards its revealed bidders, who then miss its commit deadline (slashed,
// jailed). The run bids with exactly those only while a job it bids on
// closes before that deadline (a jailed provider's bids are refused), and
// once none is left a new job gets no bids instead of bids a jailed
// provider would have refused. Before, a tainted provider was never used
// again, and runs of minutes ran out of providers long before any was
// jailed (docs/benchmarks.md, 4-validator loopback net).
func TestTaintedProvidersBidUntilTheirNoShow(t *testing.T) {
	cfg := &Config{BidBlocks: 5, RevealBlocks: 10}
	r := &run{cfg: cfg, provs: make([]*account, 3), tainted: map[int]uint64{}, height: 100}
	j := &job{bidEnd: 105, bids: []bid{{provider: 0, revealed: true}, {provider: 1}, {provider: 2, revealed: true}}}
	r.taint(j)
	last := r.tainted[0]
	if len(r.tainted) != 2 || r.tainted[2] != last || r.st.tainted != 2 {
		t.Fatalf("tainted %v (%d), want providers 0 and 2", r.tainted, r.st.tainted)
	}
	// The earliest jail is the commit deadline of an award in the block
	// after the bid window; a job bid on at the last height closes by its
	// bid and reveal windows (plus the close's block).
	if deadline := j.bidEnd + 1 + jobExecute; last+cfg.BidBlocks+cfg.RevealBlocks+1 >= deadline || last <= uint64(r.height) {
		t.Fatalf("tainted providers bid until height %d: a job bid on then closes by %d, their no-show is at %d", last, last+cfg.BidBlocks+cfg.RevealBlocks+1, deadline)
	}
	bidders := func() []int {
		var got []int
		for range 3 {
			if p, ok := r.nextBidder(); ok {
				got = append(got, p)
			}
		}
		return got
	}
	if got := bidders(); len(got) != 3 || got[0]+got[1]+got[2] != 3 || got[0] == got[1] || got[1] == got[2] || got[0] == got[2] {
		t.Fatalf("bidders before the tainted providers' last height: %v, want all three", got)
	}
	r.height = int64(last)
	for range 3 {
		if got := bidders(); len(got) != 3 || got[0] != 1 || got[1] != 1 || got[2] != 1 {
			t.Fatalf("bidders at height %d: %v; want 1 only, the one not tainted", r.height, got)
		}
	}
	if rep := r.report(0); rep.Tainted != 2 || rep.Retired != 2 {
		t.Fatalf("report: %d tainted, %d retired; want 2 and 2", rep.Tainted, rep.Retired)
	}
	// A later job keeps the earlier, sooner deadline of provider 0 and
	// taints provider 1 from its own.
	r.taint(&job{bidEnd: 200, bids: []bid{{provider: 1, revealed: true}, {provider: 0, revealed: true}}})
	if r.tainted[0] != last || r.tainted[1] <= last || r.st.tainted != 3 {
		t.Fatalf("after a second late job: %v (%d counted)", r.tainted, r.st.tainted)
	}
	if got := bidders(); len(got) != 3 || got[0] != 1 {
		t.Fatalf("bidders at height %d: %v; want 1 only", r.height, got)
	}
	r.height = int64(r.tainted[1])
	if _, ok := r.nextBidder(); ok {
		t.Fatalf("a bidder was found among 3 providers past their last bid height")
	}
}

// TestTaintedProviderBidsBeforeItsJail checks the taint rule's premises on a
// real node: a load job that is not cancelled awards its revealed bidders,
// the chain jails them at the task's commit deadline, and a job the run
// bids on with such a provider at the last height it still may (one block
// before taintBidder's limit) closes and awards it before that jail. Should
// the chain jail sooner, or the award come later than taintBidder assumes,
// the run would send bids the chain refuses, and this test fails.
func TestTaintedProviderBidsBeforeItsJail(t *testing.T) {
	addr, c := startNode(t, 50*time.Millisecond)
	cfg := &Config{
		Endpoints: []string{addr}, Rate: 10, Duration: time.Minute, MaxTxs: 100, Drain: 10 * time.Second,
		Clients: 1, Providers: 3, Bidders: 2, BidBlocks: 4, RevealBlocks: 6, Seed: "taint",
	}
	accts := readyAccounts(t, c, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	client := node.NewSender(c, accts.Clients[0])
	provs := make([]*node.Sender, len(accts.Providers))
	for i, k := range accts.Providers {
		provs[i] = node.NewSender(c, k)
	}
	send := func(s *node.Sender, what string, m types.RawMsg) {
		t.Helper()
		if _, err := s.Send(ctx, m); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// auction posts load job n, has providers ps bid on it and reveal,
	// and returns the job once it closed (every bid revealed: at once).
	auction := func(n byte, ps ...int) *chain.JobView {
		t.Helper()
		send(client, "post", loadJob(cfg, types.Hash{n}, types.Hash{n, 1}).Raw())
		jobs, err := c.Jobs(ctx, "/client/"+client.Address().Hex())
		if err != nil {
			t.Fatal(err)
		}
		id := jobs[0].ID
		for _, j := range jobs {
			id = max(id, j.ID)
		}
		price := func(p int) *uint256.Int { return new(uint256.Int).SubUint64(jobMaxPrice, uint64(p)) }
		for _, p := range ps {
			commit := &market.MsgCommitBid{Job: id, Commitment: market.BidCommitment(id, 0, price(p), types.Hash{n, byte(p)}, provs[p].Address())}
			send(provs[p], "commit", commit.Raw())
		}
		j, err := c.Job(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.WaitHeight(ctx, int64(j.BidEnd)+1); err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			send(provs[p], "reveal", (&market.MsgRevealBid{Job: id, Price: price(p), Salt: types.Hash{n, byte(p)}}).Raw())
		}
		for {
			if j, err = c.Job(ctx, id); err != nil {
				t.Fatal(err)
			}
			if j.State != market.JobBidding && j.State != market.JobRevealing {
				return j
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	awarded := func(j *chain.JobView, p int) bool {
		for _, sl := range j.Tasks[0].Slots {
			if sl.Provider == provs[p].Address() {
				return true
			}
		}
		return false
	}

	j1 := auction(1, 0, 1)
	if j1.StateName != "running" || !awarded(j1, 0) || !awarded(j1, 1) {
		t.Fatalf("job %d %s, slots %+v: want providers 0 and 1 awarded", j1.ID, j1.StateName, j1.Tasks)
	}
	jail := j1.Tasks[0].CommitDeadline
	r := &run{cfg: cfg, provs: make([]*account, 3), tainted: map[int]uint64{}}
	r.taint(&job{bidEnd: j1.BidEnd, bids: []bid{{provider: 0, revealed: true}, {provider: 1, revealed: true}}})
	last := r.tainted[0]

	// One block before the limit, the run still bids with provider 0.
	r.height = int64(last) - 1
	found := false
	for range 3 {
		if p, ok := r.nextBidder(); ok && p == 0 {
			found = true
		}
	}
	if !found {
		t.Fatalf("at height %d (limit %d) the run no longer bids with provider 0", r.height, last)
	}
	// The chain's part: a job posted once that height is committed (a
	// block or two later here; taintMargin covers that) awards provider
	// 0 before its jail.
	if err := c.WaitHeight(ctx, int64(last)-1); err != nil {
		t.Fatal(err)
	}
	j2 := auction(2, 0, 2)
	award2 := j2.Tasks[0].CommitDeadline - jobExecute
	if !awarded(j2, 0) || award2 >= jail {
		t.Fatalf("job %d (posted at %d, bid limit %d) awarded at %d (slots %+v); provider 0 is jailed at %d", j2.ID, j2.Posted, last, award2, j2.Tasks[0].Slots, jail)
	}

	// The premise: the chain jails provider 0 at job 1's commit deadline,
	// and from then on the run bids with it no more.
	if err := c.WaitHeight(ctx, int64(jail)+2); err != nil {
		t.Fatal(err)
	}
	pv, err := c.Provider(ctx, provs[0].Address())
	if err != nil {
		t.Fatal(err)
	}
	if !pv.Jailed {
		t.Fatalf("provider 0 not jailed at height %d, past job %d's commit deadline %d", jail+2, j1.ID, jail)
	}
	r.height = int64(jail) + 2
	for range 3 {
		if p, ok := r.nextBidder(); ok && p == 0 {
			t.Fatalf("the run bids with provider 0 after its jail")
		}
	}
}
