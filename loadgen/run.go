package loadgen

import (
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
)

// Kinds of transaction, as the report names them.
const (
	KindPost     = "post"
	KindCommit   = "commit"
	KindReveal   = "reveal"
	KindCancel   = "cancel"
	KindTransfer = "transfer"
)

// A load job's terms: one stage, two replicas, a tiny price cap (the
// escrow comes back at the cancel), and execute and verify windows that
// are never reached when the cancel lands. When it does not (the network
// fell behind), the job closes and awards its revealed bidders, who then
// miss the commit deadline: the long execute window puts that no-show
// (slash and jail) about 390 blocks after the close, past a run of
// minutes at 1 s blocks. Such a provider is tainted: the run bids with it
// only while every job it bids on closes before that no-show can jail it
// (taintBidder), then no more. Default market params: bid + reveal + 2 × (390 + 10) + 100
// dispute blocks must be at most max_job_blocks (1,000).
var jobMaxPrice = uint256.NewInt(1_000_000_000_000)

const (
	jobExecute = 390
	jobVerify  = 10
	// MaxWindows bounds bid + reveal blocks (see jobExecute).
	MaxWindows = 100
	// lostAfter: an accepted transaction not in a block this many blocks
	// later is counted as dropped from the mempool.
	lostAfter = 30
	// taintMargin: blocks kept between a tainted provider's last bid's
	// job closing and the earliest height its no-show can jail it.
	taintMargin = 20
)

// intent is one transaction to send from one account.
type intent struct {
	kind string
	msgs []types.RawMsg
	job  *job
	bid  int // index in job.bids (commit, reveal)
}

// Job phases.
const (
	phasePost = iota
	phaseCommit
	phaseReveal
	phaseCancel
	phaseDone
)

type bid struct {
	provider  int
	salt      types.Hash
	price     *uint256.Int
	committed bool
	revealed  bool
}

type job struct {
	client            int
	id                uint64
	bidEnd, revealEnd uint64
	phase             int
	revealsOut        int  // reveals sent and not yet resolved
	notCancelled      bool // its cancel did not land: its close awards
	reserve           int  // transactions of its life cycle not sent yet
	bids              []bid
}

// sentTx is an accepted transaction not yet seen in a block.
type sentTx struct {
	in     *intent
	height int64 // committed height when it was accepted
}

// account is one sending account and its queue.
type account struct {
	key    *ecdsa.PrivateKey
	addr   types.Address
	sender *node.Sender
	queue  []*intent // guarded by run.mu
	wake   chan struct{}
}

// run is the state of one Run. mu guards everything below it.
type run struct {
	cfg      *Config
	watch    *node.Client
	clients  []*account
	provs    []*account
	tokens   chan struct{}
	seedSalt [32]byte

	mu         sync.Mutex
	queued     int
	reserved   int // the open jobs' reserves and the queued transfers
	sent       int
	pending    map[string]sentTx // by tx hash
	early      map[string]earlyTx
	jobs       map[*job]struct{}
	nextClient int
	nextProv   int
	nextJob    uint64
	tainted    map[int]uint64 // provider → the last height the run bids with it (a job that was not cancelled awards it)
	height     int64          // last block read
	st         stats
}

// earlyTx is a transaction seen in a block before its Submit returned.
type earlyTx struct {
	code   uint32
	height int64
	jobEv  *market.EventJobPosted
}

// Run sends the load of cfg (validated) from accts, which Setup made ready,
// and returns its report. It returns an error only when it cannot run at
// all; refusals and failures are counted in the report.
func Run(ctx context.Context, cfg *Config, accts Accounts) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(accts.Clients) < cfg.Clients || (cfg.Mode == ModeMarket && len(accts.Providers) < cfg.Providers) {
		return nil, errors.New("fewer accounts than the config asks for: use AccountsFor")
	}
	watch, err := node.Dial(cfg.Endpoints[0])
	if err != nil {
		return nil, err
	}
	r := &run{
		cfg: cfg, watch: watch,
		tokens:  make(chan struct{}, max(1, cfg.Rate/20)),
		pending: map[string]sentTx{}, early: map[string]earlyTx{}, jobs: map[*job]struct{}{}, tainted: map[int]uint64{},
	}
	r.seedSalt = sha256.Sum256([]byte("ogpu-loadgen/salt/" + cfg.Seed + time.Now().String()))
	n := 0
	mk := func(keys []*ecdsa.PrivateKey) ([]*account, error) {
		var out []*account
		for _, k := range keys {
			c, err := node.Dial(cfg.Endpoints[n%len(cfg.Endpoints)]) // one connection per account
			if err != nil {
				return nil, err
			}
			n++
			out = append(out, &account{key: k, addr: crypto.PubkeyToAddress(k.PublicKey), sender: node.NewSender(c, k), wake: make(chan struct{}, 1)})
		}
		return out, nil
	}
	if r.clients, err = mk(accts.Clients[:cfg.Clients]); err != nil {
		return nil, err
	}
	if cfg.Mode == ModeMarket {
		if r.provs, err = mk(accts.Providers[:cfg.Providers]); err != nil {
			return nil, err
		}
	}
	h, err := watch.CommittedHeight(ctx)
	if err != nil {
		return nil, watch.Unreachable(err)
	}
	r.height = h
	r.st.startHeight = h
	r.st.errors = map[string]int{}
	r.st.byKind = map[string]*kindCount{}
	r.st.perHeight = map[int64]int{}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for _, a := range append(append([]*account{}, r.clients...), r.provs...) {
		wg.Add(1)
		go func() { defer wg.Done(); r.worker(ctx, a) }()
	}
	wg.Add(2)
	go func() { defer wg.Done(); r.limiter(ctx) }()
	go func() { defer wg.Done(); r.watcher(ctx) }()

	start := time.Now()
	r.mu.Lock()
	r.st.start = start
	r.mu.Unlock()
	byCount := r.load(ctx, start)

	r.mu.Lock()
	r.st.loadEnd = time.Since(start)
	r.st.endHeight = r.height
	r.st.endByCount = byCount
	r.mu.Unlock()
	r.drain(ctx)
	cancel()
	wg.Wait()

	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.dropped += len(r.pending) // accepted, never seen in a block before the drain ended
	for range r.jobs {
		r.st.jobsOpen++
	}
	rep := r.report(time.Since(start))
	if cfg.Report != nil {
		rep.Write(cfg.Report)
	}
	return rep, nil
}

// load starts jobs (or transfers) while the time and the count allow,
// keeping the send queues short so that the limiter sets the pace. It
// reports whether the count ended it.
func (r *run) load(ctx context.Context, start time.Time) bool {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	second := time.NewTicker(time.Second)
	defer second.Stop()
	low := r.cfg.Rate/20 + 2
	cost := 1
	if r.cfg.Mode == ModeMarket {
		cost = 2 + 2*r.cfg.Bidders
	}
	for {
		select {
		case <-ctx.Done():
			return false
		case <-second.C:
			r.progress(time.Since(start))
			continue
		case <-tick.C:
		}
		if time.Since(start) >= r.cfg.Duration {
			return false
		}
		r.mu.Lock()
		for r.queued < low {
			if r.sent+r.reserved+cost > r.cfg.MaxTxs {
				r.mu.Unlock()
				return true
			}
			r.startOne()
		}
		r.mu.Unlock()
	}
}

// drain waits, up to cfg.Drain, for the open jobs to end and the accepted
// transactions to reach a block, printing progress.
func (r *run) drain(ctx context.Context) {
	deadline := time.After(r.cfg.Drain)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	second := time.NewTicker(time.Second)
	defer second.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-deadline:
			return
		case <-second.C:
			r.progress(time.Since(r.st.start))
		case <-tick.C:
			r.mu.Lock()
			done := len(r.jobs) == 0 && len(r.pending) == 0 && r.queued == 0
			r.mu.Unlock()
			if done {
				return
			}
		}
	}
}

// startOne starts a job or a transfer. Called with mu held.
func (r *run) startOne() {
	c := r.nextClient
	r.nextClient = (r.nextClient + 1) % len(r.clients)
	if r.cfg.Mode == ModeTransfer {
		to := r.clients[(c+1)%len(r.clients)].addr
		r.reserved++ // until it is sent
		r.enqueue(r.clients[c], &intent{kind: KindTransfer, msgs: []types.RawMsg{(&escrow.MsgSend{To: to, Amount: uint256.NewInt(1)}).Raw()}})
		return
	}
	r.nextJob++
	j := &job{client: c, reserve: 2 + 2*r.cfg.Bidders}
	r.jobs[j] = struct{}{}
	r.reserved += j.reserve
	post := loadJob(r.cfg, r.salt("input", r.nextJob, 0), r.salt("seal", r.nextJob, 0))
	r.enqueue(r.clients[c], &intent{kind: KindPost, msgs: []types.RawMsg{post.Raw()}, job: j})
}

// loadJob is the post of one load job (see jobMaxPrice).
func loadJob(cfg *Config, input, seal types.Hash) *market.MsgPostJob {
	return &market.MsgPostJob{
		Kind: market.KindInference, Mode: market.ModeAuction, Model: Model, Stages: 1, Redundancy: 2,
		MaxPrice: jobMaxPrice, Req: market.Requirements{MinStake: new(uint256.Int)},
		Input:   input,
		Windows: market.Windows{Bid: cfg.BidBlocks, Reveal: cfg.RevealBlocks, Execute: jobExecute, Verify: jobVerify},
		Seal:    seal,
	}
}

// salt derives a per-run secret for (what, job, i).
func (r *run) salt(what string, n uint64, i int) types.Hash {
	h := sha256.New()
	h.Write(r.seedSalt[:])
	h.Write([]byte(what))
	h.Write(binary.BigEndian.AppendUint64(nil, n))
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(i)))
	return types.Hash(h.Sum(nil))
}

// enqueue hands in to a's worker. Called with mu held.
func (r *run) enqueue(a *account, in *intent) {
	a.queue = append(a.queue, in)
	r.queued++
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// limiter puts cfg.Rate tokens per second into r.tokens.
func (r *run) limiter(ctx context.Context) {
	const step = 5 * time.Millisecond
	tick := time.NewTicker(step)
	defer tick.Stop()
	last := time.Now()
	var carry float64
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			carry += now.Sub(last).Seconds() * float64(r.cfg.Rate)
			last = now
			for ; carry >= 1; carry-- {
				select {
				case r.tokens <- struct{}{}:
				default:
					carry = 0 // the bucket is full: nobody is waiting
				}
			}
		}
	}
}

// worker sends a's queue in order, one token per transaction.
func (r *run) worker(ctx context.Context, a *account) {
	for {
		r.mu.Lock()
		var in *intent
		if len(a.queue) > 0 {
			in = a.queue[0]
			a.queue = a.queue[1:]
		}
		r.mu.Unlock()
		if in == nil {
			select {
			case <-ctx.Done():
				return
			case <-a.wake:
				continue
			}
		}
		r.mu.Lock()
		if in.job != nil && in.job.phase == phaseDone {
			// Its job ended (its cancel landed, or came too late):
			// a commit or reveal now would only fail.
			r.queued--
			r.st.skipped++
			r.mu.Unlock()
			continue
		}
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-r.tokens:
		}
		hash, err := a.sender.Submit(ctx, in.msgs...)
		r.mu.Lock()
		r.queued--
		if err != nil && ctx.Err() != nil {
			r.mu.Unlock()
			return // the run ended: not sent
		}
		r.sent++
		r.st.sent++
		r.kind(in.kind).sent++
		if in.job == nil {
			r.reserved--
		} else if in.job.reserve > 0 {
			in.job.reserve--
			r.reserved--
		}
		if err != nil {
			if ctx.Err() == nil {
				r.st.errors[errorKind(in.kind, err)]++
			}
			r.resolve(in, false, nil)
		} else {
			r.st.accepted++
			r.kind(in.kind).accepted++
			if e, ok := r.early[string(hash)]; ok {
				delete(r.early, string(hash))
				r.committed(in, e.code, e.height, e.jobEv)
			} else {
				r.pending[string(hash)] = sentTx{in: in, height: r.height}
			}
		}
		r.mu.Unlock()
	}
}

// errorKind names a refusal for the report: the CheckTx code and the
// error's description, or the transport failure.
func errorKind(kind string, err error) string {
	var te *node.TxError
	switch {
	case errors.As(err, &te):
		// The log is "message N: <description>: <details>" or
		// "<description>: <details>"; the description names the kind.
		log := te.Log
		if rest, ok := strings.CutPrefix(log, "message "); ok {
			if _, after, ok := strings.Cut(rest, ": "); ok {
				log = after
			}
		}
		desc, _, _ := strings.Cut(log, ":")
		return fmt.Sprintf("%s refused by CheckTx, code %d: %s", kind, te.Code, desc)
	case strings.Contains(err.Error(), "mempool is full"):
		return kind + " refused: mempool is full"
	}
	return kind + " not sent: " + firstLine(err.Error(), 80)
}

func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

func (r *run) kind(k string) *kindCount {
	c := r.st.byKind[k]
	if c == nil {
		c = &kindCount{}
		r.st.byKind[k] = c
	}
	return c
}

// committed records an accepted transaction in a block. Called with mu held.
func (r *run) committed(in *intent, code uint32, height int64, ev *market.EventJobPosted) {
	if code == 0 {
		r.st.committed++
		r.kind(in.kind).committed++
		r.st.perHeight[height]++
	} else {
		r.st.failed++
		r.st.errors[fmt.Sprintf("%s failed in its block, code %d", in.kind, code)]++
	}
	if in.kind == KindPost && code == 0 && ev != nil {
		in.job.id, in.job.bidEnd, in.job.revealEnd = ev.Job, ev.BidEnd, ev.RevealEnd
	}
	r.resolve(in, code == 0, ev)
}

// resolve moves in's job on once in is refused, failed or committed.
// Called with mu held.
func (r *run) resolve(in *intent, ok bool, ev *market.EventJobPosted) {
	j := in.job
	if j == nil {
		return
	}
	if j.phase == phaseDone {
		// A reveal that lands after its job ended: if the job was not
		// cancelled, its close awards this bidder too.
		if in.kind == KindReveal && ok && j.notCancelled {
			r.taintBidder(j, j.bids[in.bid].provider)
		}
		return
	}
	switch in.kind {
	case KindPost:
		if !ok || ev == nil {
			r.finish(j)
			return
		}
		r.st.jobsPosted++
		j.phase = phaseCommit
		for b := range r.cfg.Bidders {
			p, ok := r.nextBidder()
			if !ok {
				r.st.errors["bids not sent: every load provider is tainted (a job of theirs was not cancelled)"]++
				break
			}
			salt := r.salt("bid", j.id, b)
			price := new(uint256.Int).SubUint64(jobMaxPrice, uint64(b))
			j.bids = append(j.bids, bid{provider: p, salt: salt, price: price})
			commit := &market.MsgCommitBid{Job: j.id, Commitment: market.BidCommitment(j.id, 0, price, salt, r.provs[p].addr)}
			r.enqueue(r.provs[p], &intent{kind: KindCommit, msgs: []types.RawMsg{commit.Raw()}, job: j, bid: b})
		}
	case KindCommit:
		j.bids[in.bid].committed = ok
		if ok && j.phase == phaseReveal {
			// In a block by the bid window's end, but its Submit
			// returned after the reveals went out.
			j.revealsOut++
			r.reveal(j, in.bid)
		}
	case KindReveal:
		j.revealsOut--
		j.bids[in.bid].revealed = ok
	case KindCancel:
		if ok {
			r.st.jobsCancelled++
		} else {
			r.notCancelled(j)
		}
		r.finish(j)
		return
	}
	r.advance(j)
}

// notCancelled counts a job whose cancel did not land (or was never sent
// in time) and taints its revealed bidders. Called with mu held.
func (r *run) notCancelled(j *job) {
	r.st.jobsLate++
	j.notCancelled = true
	r.taint(j)
}

// nextBidder picks the next provider the run still bids with, round
// robin: one not tainted, or tainted but before its last bid height.
// Called with mu held.
func (r *run) nextBidder() (int, bool) {
	for range r.provs {
		p := r.nextProv
		r.nextProv = (r.nextProv + 1) % len(r.provs)
		if last, ok := r.tainted[p]; !ok || uint64(r.height) < last {
			return p, true
		}
	}
	return 0, false
}

// taint marks the revealed bidders of a job that will close with an award.
// Called with mu held.
func (r *run) taint(j *job) {
	for _, b := range j.bids {
		if b.revealed {
			r.taintBidder(j, b.provider)
		}
	}
}

// taintBidder records that j will award provider p a task it will miss:
// slashed and jailed at j's commit deadline, jobExecute blocks after the
// award, which comes after j's bid window at the earliest. A job the run
// bids on with p from height h closes by h + bid + reveal blocks, so the
// run bids with p while h is before that deadline less those windows and
// taintMargin: every such job closes before p is jailed, and none of its
// bids is refused as ineligible. Called with mu held.
func (r *run) taintBidder(j *job, p int) {
	last := j.bidEnd + 1 + jobExecute - r.cfg.BidBlocks - r.cfg.RevealBlocks - taintMargin
	if prev, ok := r.tainted[p]; ok {
		if prev <= last {
			return
		}
	} else {
		r.st.tainted++
	}
	r.tainted[p] = last
}

// cancelMargin: the cancel is sent once every reveal is in, or when the
// chain is this many blocks before the job's last reveal height, whichever
// comes first (a reveal stuck in a mempool must not hold it back).
const cancelMargin = 3

// advance sends a job's reveals once its bid window is over (every commit
// that can succeed is then in a block) and its cancel once the reveals are
// in or the reveal window nears its end. Called with mu held, after each
// block and each resolved transaction of the job.
func (r *run) advance(j *job) {
	h := uint64(r.height)
	switch j.phase {
	case phaseCommit:
		if h < j.bidEnd {
			return
		}
		j.phase = phaseReveal
		holdout := -1 // the last committed bid keeps its reveal back (see the package doc)
		for b, bd := range j.bids {
			if bd.committed {
				holdout = b
			}
		}
		for b, bd := range j.bids {
			if !bd.committed || b == holdout {
				continue
			}
			j.revealsOut++
			r.reveal(j, b)
		}
		r.advance(j)
	case phaseReveal:
		if j.revealsOut > 0 && h+cancelMargin < j.revealEnd {
			return
		}
		if h >= j.revealEnd {
			// Too late: the job closes on its own, and its revealed
			// bidders are awarded a task they will not run.
			r.notCancelled(j)
			r.finish(j)
			return
		}
		j.phase = phaseCancel
		r.enqueue(r.clients[j.client], &intent{kind: KindCancel, msgs: []types.RawMsg{(&market.MsgCancelJob{Job: j.id}).Raw()}, job: j})
	}
}

// reveal sends bid b's reveal. Called with mu held.
func (r *run) reveal(j *job, b int) {
	bd := j.bids[b]
	rv := &market.MsgRevealBid{Job: j.id, Price: bd.price, Salt: bd.salt}
	r.enqueue(r.provs[bd.provider], &intent{kind: KindReveal, msgs: []types.RawMsg{rv.Raw()}, job: j, bid: b})
}

// finish ends a job and returns what it reserved and did not send.
// Called with mu held.
func (r *run) finish(j *job) {
	j.phase = phaseDone
	r.reserved -= j.reserve
	j.reserve = 0
	delete(r.jobs, j)
}
