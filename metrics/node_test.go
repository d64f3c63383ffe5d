package metrics

import (
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cometbft/cometbft/libs/log"
	"github.com/cometbft/cometbft/rpc/client/local"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// scrape GETs url and returns every sample, keyed by the series as the
// text format writes it (name{label="v",...}).
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	out, err := Scrape(url)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func key(t *testing.T, i int) *ecdsa.PrivateKey {
	seed := sha256.Sum256([]byte(fmt.Sprintf("ogpu-metrics-test-%d", i)))
	k, err := crypto.ToECDSA(seed[:])
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestMetricsNodeJob starts a real single-validator node in this process
// with --metrics.laddr's wiring (CometBFT's endpoint on loopback), follows
// it as `ogpud start` does, runs a pool job through to payment with two
// providers (claims, award, result commits and reveals, settlement) and a
// second job nobody delivers (no-shows, slashes), and scrapes /metrics
// over HTTP: cometbft_* and ogpu_* series are served together, and the
// ogpu_* ones moved by exactly what the chain did. The state series say
// one job running with its escrow while job 1 runs, and nothing open or
// locked once every job ended. A job nobody claims expires and a
// sealed-bid job is awarded: the FinalizeBlock timer, put between
// CometBFT and the app as `ogpud start` puts it, timed every block the
// node executed, two of them as closing auctions.
func TestMetricsNodeJob(t *testing.T) {
	const client, prov1, prov2, prov3, prov4 = 0, 1, 2, 3, 4
	keys := []*ecdsa.PrivateKey{key(t, 0), key(t, 1), key(t, 2), key(t, 3), key(t, 4)}
	addr := func(i int) types.Address { return crypto.PubkeyToAddress(keys[i].PublicKey) }
	home := t.TempDir()
	conf, err := node.LocalConfig(home, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	port, err := node.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	laddr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := EnableCometBFT(conf, laddr); err != nil {
		t.Fatal(err)
	}
	// The guard: a second node in this process would panic in CometBFT.
	if err := EnableCometBFT(node.DefaultConfig(t.TempDir()), "127.0.0.1:0"); err == nil {
		t.Fatal("CometBFT metrics enabled twice in one process")
	}
	doc := genesis.Default()
	// Random audits off: outcomes here are agreements; TestRandomAuditOnRealNodes
	// (node/agent) runs audits on real nodes.
	doc.Params.Market.AuditRateBps = 0
	for i := range keys {
		if err := doc.AddAccount(addr(i), types.OGPU(1000)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := node.InitHome(node.InitOptions{Home: home, ChainID: "ogpu-metrics-test", Genesis: doc, Config: conf}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	inProcess := httptest.NewServer(Handler()) // still serves once the node (and its endpoint) stopped
	defer inProcess.Close()
	preStart := scrape(t, inProcess.URL)
	n, err := node.StartChainNodeWrapped(ctx, conf, log.NewNopLogger(), TimeFinalizeBlock, chain.WithInvariants())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	c := &node.Client{RPC: local.New(n.Node)}
	if err := c.WaitHeight(ctx, 2); err != nil {
		t.Fatal(err)
	}
	app, err := NewApp(WithState(c))
	if err != nil {
		t.Fatal(err)
	}
	tracker, err := NewProviderTracker(addr(prov1))
	if err != nil {
		t.Fatal(err)
	}
	followCtx, stopFollow := context.WithCancel(ctx)
	followed := make(chan error, 1)
	go func() { followed <- Follow(followCtx, c, nil, app, tracker) }()
	stopFollowing := sync.OnceFunc(func() { stopFollow(); <-followed })
	t.Cleanup(stopFollowing)

	url := "http://" + laddr + "/metrics"
	before := scrape(t, url)
	if _, ok := before["cometbft_consensus_height{chain_id=\"ogpu-metrics-test\"}"]; !ok {
		t.Fatalf("CometBFT's series are not on %s", url)
	}
	send := func(i int, msgs ...types.RawMsg) {
		t.Helper()
		if _, err := node.NewSender(c, keys[i]).Send(ctx, msgs...); err != nil {
			t.Fatal(err)
		}
	}
	model := sha256.Sum256([]byte("metrics model"))
	for _, p := range []int{prov1, prov2} {
		info := market.ProviderInfo{PeerID: fmt.Sprintf("peer-metrics-%d", p), Runtimes: []string{"llama.cpp"}, Models: []types.Hash{model}}
		send(p, (&market.MsgRegisterProvider{Info: info}).Raw(), (&escrow.MsgBond{Amount: types.OGPU(200)}).Raw())
	}
	post := func(execute, verify uint64) uint64 {
		t.Helper()
		m := &market.MsgPostJob{
			Kind: market.KindInference, Mode: market.ModePool, Model: model, ModelSize: 1, Stages: 1, Redundancy: 2,
			MaxPrice: types.OGPU(1), Req: market.Requirements{MinStake: types.OGPU(100)}, Input: sha256.Sum256([]byte("metrics input")),
			Windows: market.Windows{Bid: 10, Execute: execute, Verify: verify}, Seal: sha256.Sum256([]byte("metrics seal")),
		}
		res, err := node.NewSender(c, keys[client]).Send(ctx, m.Raw())
		if err != nil {
			t.Fatal(err)
		}
		var posted market.EventJobPosted
		if err := node.FindEvent(res, &posted); err != nil {
			t.Fatal(err)
		}
		return posted.Job
	}
	waitPhase := func(job uint64, done func(*chainJob) bool) {
		t.Helper()
		for {
			j, err := c.Job(ctx, job)
			if err == nil && done(&chainJob{state: j.StateName, tasks: len(j.Tasks), slots: slotCount(j.Tasks)}) {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("job %d: %+v %v", job, j, err)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}

	// Job 1: claimed by both, same result committed and revealed: agreed, paid.
	job := post(20, 20)
	send(prov1, (&market.MsgClaimTask{Job: job}).Raw())
	send(prov2, (&market.MsgClaimTask{Job: job}).Raw())
	waitPhase(job, func(j *chainJob) bool { return j.slots == 2 })
	// Awarded, nothing else open: the state gauges say so once the
	// follower reaches the award's block, and escrow is the job's.
	jv, err := c.Job(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	awardedAt, err := c.CommittedHeight(ctx)
	if err != nil {
		t.Fatal(err)
	}
	running := waitFollowed(t, url, awardedAt)
	for state, want := range map[string]float64{"bidding": 0, "revealing": 0, "running": 1} {
		if got := running[`ogpu_app_jobs{state="`+state+`"}`]; got != want {
			t.Errorf("ogpu_app_jobs{state=%q} = %v with job %d awarded and nothing else posted, want %v", state, got, job, want)
		}
	}
	if got, want := running["ogpu_app_escrow_locked_ogpu"], toOGPU(jv.Locked); want <= 0 || got != want {
		t.Errorf("ogpu_app_escrow_locked_ogpu = %v, job %d locks %v", got, job, want)
	}
	result := sha256.Sum256([]byte("the answer"))
	salts := map[int]types.Hash{prov1: sha256.Sum256([]byte("salt1")), prov2: sha256.Sum256([]byte("salt2"))}
	for _, p := range []int{prov1, prov2} {
		send(p, (&verifier.MsgCommitResult{Job: job, Commitment: verifier.ResultCommitment(result, salts[p], addr(p))}).Raw())
	}
	for _, p := range []int{prov1, prov2} {
		send(p, (&verifier.MsgRevealResult{Job: job, Result: result, Salt: salts[p]}).Raw())
	}
	waitPhase(job, func(j *chainJob) bool { return j.state == "completed" })

	// Job 2: claimed by both, nobody delivers: no-shows, slashed.
	job2 := post(3, 3)
	send(prov1, (&market.MsgClaimTask{Job: job2}).Raw())
	send(prov2, (&market.MsgClaimTask{Job: job2}).Raw())
	waitPhase(job2, func(j *chainJob) bool { return j.state == "completed" || j.state == "expired" })

	// The follower sees a block some time after the node commits it:
	// scrape until the series reach what the chain did (undercounting
	// times out), then check none went past it (overcounting fails).
	wantDeltas := map[string]float64{
		`ogpu_app_jobs_posted_total{kind="inference",mode="pool"}`: 2,
		`ogpu_app_bids_total{step="revealed"}`:                     4, // pool claims
		`ogpu_app_awards_total`:                                    2,
		`ogpu_app_tasks_settled_total{outcome="agreed"}`:           1,
		`ogpu_app_tasks_settled_total{outcome="no_results"}`:       1,
		`ogpu_app_no_shows_total{missed="commit"}`:                 2,
		`ogpu_app_slashes_total{reason="no_show"}`:                 2,
		`ogpu_app_jobs_ended_total{end="completed"}`:               2,
		`ogpu_app_provider_jailings_total`:                         2,
		`ogpu_provider_bids_total{result="revealed"}`:              2,
		`ogpu_provider_bids_total{result="won"}`:                   2,
		`ogpu_provider_tasks_total{outcome="paid"}`:                1,
		`ogpu_provider_tasks_total{outcome="no_show"}`:             1,
		`ogpu_provider_jailed`:                                     1,
	}
	var after map[string]float64
	delta := func(series string) float64 { return after[series] - before[series] }
	mismatches := func() []string {
		var out []string
		for series, want := range wantDeltas {
			if got := delta(series); got != want {
				out = append(out, fmt.Sprintf("%s moved by %v, want %v", series, got, want))
			}
		}
		return out
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		after = scrape(t, url)
		if len(mismatches()) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, m := range mismatches() {
		t.Error(m)
	}

	// Job 3: nobody claims it; the end of its close block expires it.
	job3 := post(3, 3)
	waitPhase(job3, func(j *chainJob) bool { return j.state == "expired" })
	endAt, err := c.CommittedHeight(ctx)
	if err != nil {
		t.Fatal(err)
	}
	end := waitFollowed(t, url, endAt)
	for _, state := range []string{"bidding", "revealing", "running"} {
		if got := end[`ogpu_app_jobs{state="`+state+`"}`]; got != 0 {
			t.Errorf("ogpu_app_jobs{state=%q} = %v after every job ended", state, got)
		}
	}
	sup, err := c.Supply(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := end["ogpu_app_escrow_locked_ogpu"]; got != 0 || !sup.Locked.IsZero() {
		t.Errorf("ogpu_app_escrow_locked_ogpu = %v after every job ended (the chain locks %s)", got, sup.Locked)
	}
	if got, want := end["ogpu_app_bonded_ogpu"], toOGPU(sup.Bonded); got != want {
		t.Errorf("ogpu_app_bonded_ogpu = %v, the chain bonds %v", got, want)
	}
	if got := end["ogpu_app_state_query_errors_total"] - before["ogpu_app_state_query_errors_total"]; got != 0 {
		t.Errorf("%v /stats queries failed", got)
	}

	// Job 4: a sealed-bid auction, bids committed and revealed by two
	// providers registered now (the others are jailed): awarded at its
	// close, at the end of a block.
	bidders := []int{prov3, prov4}
	for _, p := range bidders {
		info := market.ProviderInfo{PeerID: fmt.Sprintf("peer-metrics-%d", p), Runtimes: []string{"llama.cpp"}, Models: []types.Hash{model}}
		send(p, (&market.MsgRegisterProvider{Info: info}).Raw(), (&escrow.MsgBond{Amount: types.OGPU(200)}).Raw())
	}
	auction := &market.MsgPostJob{
		Kind: market.KindInference, Mode: market.ModeAuction, Model: model, ModelSize: 1, Stages: 1, Redundancy: 2,
		MaxPrice: types.OGPU(1), Req: market.Requirements{MinStake: types.OGPU(100)}, Input: sha256.Sum256([]byte("metrics input")),
		Windows: market.Windows{Bid: 10, Reveal: 10, Execute: 100, Verify: 100}, Seal: sha256.Sum256([]byte("metrics seal")),
	}
	res, err := node.NewSender(c, keys[client]).Send(ctx, auction.Raw())
	if err != nil {
		t.Fatal(err)
	}
	var posted market.EventJobPosted
	if err := node.FindEvent(res, &posted); err != nil {
		t.Fatal(err)
	}
	job4 := posted.Job
	price, salt := types.OGPU(1), sha256.Sum256([]byte("bid salt"))
	for _, p := range bidders {
		send(p, (&market.MsgCommitBid{Job: job4, Commitment: market.BidCommitment(job4, 0, price, salt, addr(p))}).Raw())
	}
	waitPhase(job4, func(j *chainJob) bool { return j.state == "revealing" })
	for _, p := range bidders {
		send(p, (&market.MsgRevealBid{Job: job4, Price: price, Salt: salt}).Raw())
	}
	waitPhase(job4, func(j *chainJob) bool { return j.state == "running" })

	// FinalizeBlock was timed once per block, outside the state machine:
	// stop the node and count. Pool jobs are awarded at a close too since
	// AppVersion 8 (their claimants drawn from the beacon, market/pool.go):
	// the closes are jobs 1's and 2's awards, job 3's expiry and job 4's
	// award, in four blocks.
	stopFollowing()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	blocks := float64(n.BlockStore().Height())
	final := scrape(t, inProcess.URL)
	fdelta := func(series string) float64 { return final[series] - preStart[series] }
	var timed float64
	for _, b := range []string{"0", "1-9", "10-99", "100+"} {
		timed += fdelta(`ogpu_app_finalize_block_seconds_count{auctions="` + b + `"}`)
	}
	if timed != blocks {
		t.Errorf("ogpu_app_finalize_block_seconds counted %v blocks, the node executed %v", timed, blocks)
	}
	if got := fdelta(`ogpu_app_finalize_block_seconds_count{auctions="1-9"}`); got != 4 {
		t.Errorf("%v blocks closed auctions, want 4 (jobs 1 and 2 drawn, job 3's expiry, job 4's award)", got)
	}
	if got := fdelta(`ogpu_app_finalize_block_seconds_sum{auctions="0"}`); got <= 0 {
		t.Errorf("FinalizeBlock took %v s in all", got)
	}
	for result, want := range map[string]float64{"expired": 1, "awarded": 3} {
		if got := fdelta(`ogpu_app_auctions_closed_total{result="` + result + `"}`); got != want {
			t.Errorf("ogpu_app_auctions_closed_total{result=%q} moved by %v, want %v", result, got, want)
		}
	}
	if after["ogpu_provider_tasks_running"] != 0 {
		t.Errorf("ogpu_provider_tasks_running = %v after both jobs settled", after["ogpu_provider_tasks_running"])
	}
	if got := delta(`ogpu_provider_earned_ogpu_total{via="job"}`); got <= 0 || got > 1 {
		t.Errorf("prov1 earned %v oGPU on a job capped at 1 oGPU", got)
	}
	if got := delta(`ogpu_app_paid_ogpu_total{via="job"}`); got <= 0 {
		t.Errorf("ogpu_app_paid_ogpu_total moved by %v", got)
	}
	if after["ogpu_app_block_txs"] < 0 || delta("ogpu_app_txs_total") < 12 {
		t.Errorf("ogpu_app_txs_total moved by %v, want at least the 12 sent", delta("ogpu_app_txs_total"))
	}
	if got := after[`ogpu_app_slashed_ogpu_total{reason="no_show"}`] - before[`ogpu_app_slashed_ogpu_total{reason="no_show"}`]; got <= 0 {
		t.Errorf("no-show slashes moved no stake: %v", got)
	}
	found := false
	for s := range after {
		if strings.HasPrefix(s, "ogpu_build_info{") {
			found = true
		}
	}
	if !found {
		t.Error("no ogpu_build_info")
	}
}

// waitFollowed scrapes url until the follower has seen height h.
func waitFollowed(t *testing.T, url string, h int64) map[string]float64 {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := scrape(t, url)
		if s["ogpu_app_height"] >= float64(h) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("the metrics follower is at height %v, the chain at %d", s["ogpu_app_height"], h)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type chainJob struct {
	state string
	tasks int
	slots int
}

func slotCount(ts []chain.TaskView) int {
	n := 0
	for _, t := range ts {
		n += len(t.Slots)
	}
	return n
}
