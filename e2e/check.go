package e2e

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
)

// scanner walks the chain's blocks once each, in order (read from the
// reference node, Net.Ref), and keeps what the checks and the summary
// need: the jobs posted and how they ended, every slash and jail, and the
// block times.
type scanner struct {
	next int64 // the next height to read

	posted    map[uint64]types.Address // job -> client
	kinds     map[uint64]string        // job -> kind
	paid      map[uint64]bool          // a provider was paid for the job
	pruned    map[uint64]bool          // the job ended and was pruned (retain_blocks later)
	order     []uint64
	outcomes  map[uint64][]string // task_settled outcomes
	disputed  map[uint64]bool     // a dispute between differing results
	audited   map[uint64]bool     // an audit (one result put to the validators: market short.go, audit.go)
	expired   map[uint64]bool
	cancelled map[uint64]bool
	slashes   []slashAt
	noShows   []market.EventNoShow
	valJails  []escrow.EventValidatorJailed
	provJails []market.EventProviderJailed

	lastTime     time.Time
	maxBlockTime time.Duration
	maxBlockAt   int64
	maxTxs       int
	blocks       int64
}

type slashAt struct {
	Height int64
	market.EventSlashed
}

func newScanner() *scanner {
	return &scanner{next: 1, posted: map[uint64]types.Address{}, kinds: map[uint64]string{}, paid: map[uint64]bool{}, pruned: map[uint64]bool{}, outcomes: map[uint64][]string{},
		disputed: map[uint64]bool{}, audited: map[uint64]bool{}, expired: map[uint64]bool{}, cancelled: map[uint64]bool{}}
}

// to reads every block up to c's committed height.
func (s *scanner) to(ctx context.Context, c *node.Client) error {
	top, err := c.CommittedHeight(ctx)
	if err != nil {
		return err
	}
	for ; s.next <= top; s.next++ {
		b, err := c.BlockEventsAt(ctx, s.next)
		if err != nil {
			return err
		}
		if !s.lastTime.IsZero() {
			if d := b.Time.Sub(s.lastTime); d > s.maxBlockTime {
				s.maxBlockTime, s.maxBlockAt = d, b.Height
			}
		}
		s.lastTime = b.Time
		s.maxTxs = max(s.maxTxs, b.Txs)
		s.blocks++
		if err := s.take(b); err != nil {
			return fmt.Errorf("height %d: %w", b.Height, err)
		}
	}
	return nil
}

func (s *scanner) take(b node.BlockEvents) error {
	posted, err := node.DecodeEvents[market.EventJobPosted](b.Events)
	if err != nil {
		return err
	}
	for _, e := range posted {
		if _, ok := s.posted[e.Job]; !ok {
			s.order = append(s.order, e.Job)
		}
		s.posted[e.Job] = e.Client
		s.kinds[e.Job] = e.Kind
	}
	paid, err := node.DecodeEvents[market.EventProviderPaid](b.Events)
	if err != nil {
		return err
	}
	for _, e := range paid {
		s.paid[e.Job] = true
	}
	pruned, err := node.DecodeEvents[market.EventJobPruned](b.Events)
	if err != nil {
		return err
	}
	for _, e := range pruned {
		s.pruned[e.Job] = true
	}
	settled, err := node.DecodeEvents[market.EventTaskSettled](b.Events)
	if err != nil {
		return err
	}
	for _, e := range settled {
		s.outcomes[e.Job] = append(s.outcomes[e.Job], e.Outcome)
	}
	disputes, err := node.DecodeEvents[market.EventDisputeOpened](b.Events)
	if err != nil {
		return err
	}
	for _, e := range disputes {
		if len(e.Results) > 1 {
			s.disputed[e.Job] = true
		}
	}
	audits, err := node.DecodeEvents[market.EventAuditOpened](b.Events)
	if err != nil {
		return err
	}
	for _, e := range audits {
		s.audited[e.Job] = true
	}
	expired, err := node.DecodeEvents[market.EventJobExpired](b.Events)
	if err != nil {
		return err
	}
	for _, e := range expired {
		s.expired[e.Job] = true
	}
	cancelled, err := node.DecodeEvents[market.EventJobCancelled](b.Events)
	if err != nil {
		return err
	}
	for _, e := range cancelled {
		s.cancelled[e.Job] = true
	}
	slashes, err := node.DecodeEvents[market.EventSlashed](b.Events)
	if err != nil {
		return err
	}
	for _, e := range slashes {
		s.slashes = append(s.slashes, slashAt{b.Height, e})
	}
	noShows, err := node.DecodeEvents[market.EventNoShow](b.Events)
	if err != nil {
		return err
	}
	s.noShows = append(s.noShows, noShows...)
	vj, err := node.DecodeEvents[escrow.EventValidatorJailed](b.Events)
	if err != nil {
		return err
	}
	s.valJails = append(s.valJails, vj...)
	pj, err := node.DecodeEvents[market.EventProviderJailed](b.Events)
	if err != nil {
		return err
	}
	s.provJails = append(s.provJails, pj...)
	return nil
}

// hashChecker compares every node's block headers with the reference
// headers, height by height, each height once per node: the app hash and
// the block hash (which covers the rest of the header) must agree
// everywhere. A height's reference header is read once, from the node
// that was the reference (Net.Ref) when the height was first compared, so
// every node is compared with the same header at every height.
type hashChecker struct {
	cs      []*node.Client
	checked []int64           // per node, the last height compared
	ref     map[int64]refHash // the reference headers
}

type refHash struct {
	app, block []byte
	from       int // the node it was read from
}

func newHashChecker(cs []*node.Client) *hashChecker {
	return &hashChecker{cs: cs, checked: make([]int64, len(cs)), ref: map[int64]refHash{}}
}

// headers returns node i's headers from..to (BlockchainInfo pages of 20).
func (h *hashChecker) headers(ctx context.Context, i int, from, to int64) (map[int64]refHash, error) {
	out := map[int64]refHash{}
	for lo := from; lo <= to; lo += 20 {
		hi := min(lo+19, to)
		res, err := h.cs[i].RPC.BlockchainInfo(ctx, lo, hi)
		if err != nil {
			return nil, fmt.Errorf("node%d headers %d..%d: %w", i, lo, hi, err)
		}
		for _, m := range res.BlockMetas {
			out[m.Header.Height] = refHash{app: m.Header.AppHash, block: m.BlockID.Hash, from: i}
		}
	}
	return out, nil
}

// check compares the new heights of every node that answers with the
// reference headers, read from node r where missing; a node that is down
// or behind is compared later. It returns the heights compared.
func (h *hashChecker) check(ctx context.Context, up []bool, r int) (int, error) {
	topR, err := h.cs[r].CommittedHeight(ctx)
	if err != nil {
		return 0, fmt.Errorf("node%d (the reference): %w", r, err)
	}
	compared := 0
	for i := range h.cs {
		if !up[i] {
			continue
		}
		topI, err := h.cs[i].CommittedHeight(ctx)
		if err != nil {
			continue // down or paused: compared once it answers
		}
		to := min(topR, topI)
		from := h.checked[i] + 1
		if from > to {
			continue
		}
		var missing int64
		for k := from; k <= to; k++ {
			if _, ok := h.ref[k]; !ok {
				missing = k
				break
			}
		}
		if missing != 0 {
			got, err := h.headers(ctx, r, missing, to)
			if err != nil {
				return compared, err
			}
			for k, v := range got {
				if _, ok := h.ref[k]; !ok {
					h.ref[k] = v
				}
			}
		}
		got, err := h.headers(ctx, i, from, to)
		if err != nil {
			continue
		}
		for k := from; k <= to; k++ {
			want, ok := h.ref[k]
			g, ok2 := got[k]
			if !ok || !ok2 {
				return compared, fmt.Errorf("height %d: header missing (reference %v, node%d %v)", k, ok, i, ok2)
			}
			if !bytes.Equal(want.app, g.app) || !bytes.Equal(want.block, g.block) {
				return compared, fmt.Errorf("node%d disagrees with node%d at height %d: app hash %X vs %X, block %X vs %X", i, want.from, k, g.app, want.app, g.block, want.block)
			}
			compared++
		}
		h.checked[i] = to
	}
	return compared, nil
}

// Check runs the invariants now: no process died on its own, every node
// agrees with the reference headers at every height so far, the supply adds up to the cap
// on every node that answers, and no honest provider or validator was
// slashed. It fails the test on a violation.
//
// With KeepGoing (the soak) a violation fails the test but the run goes
// on: each finding is reported once (a slash found stays in the chain's
// history and would be found again at every later check), and a check
// passes when it found nothing new.
func (n *Net) Check(what string) {
	n.T.Helper()
	errs := n.check()
	if !n.KeepGoing {
		if len(errs) > 0 {
			n.T.Fatalf("check after %s: %s", what, strings.Join(errs, "\n  "))
		}
		n.passed()
		return
	}
	fresh := 0
	for _, e := range errs {
		n.mu.Lock()
		seen := n.reported[e]
		n.reported[e] = true
		n.mu.Unlock()
		if !seen {
			fresh++
			n.T.Errorf("check after %s: %s", what, e)
		}
	}
	if fresh == 0 {
		n.passed()
	}
}

// passed counts a check passed.
func (n *Net) passed() {
	n.mu.Lock()
	n.checks++
	n.mu.Unlock()
}

// Findings counts the distinct violations found with KeepGoing.
func (n *Net) Findings() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.reported)
}

// check returns the violations found now (none: the check passed).
func (n *Net) check() []string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []string
	for _, p := range n.procs() {
		errs = append(errs, p.Unexpected()...)
	}
	up := make([]bool, len(n.Vals))
	for i, v := range n.Vals {
		up[i] = v.Running()
	}
	r := n.Ref()
	compared, err := n.hashes.check(ctx, up, r)
	if err != nil {
		errs = append(errs, "app hash: "+err.Error())
	}
	for i, c := range n.Clients {
		if !up[i] {
			continue
		}
		qctx, qcancel := context.WithTimeout(ctx, 3*time.Second)
		sup, err := c.Supply(qctx)
		qcancel()
		if err != nil {
			continue // paused or cut off: it answers at a later check
		}
		if !sup.Total().Eq(types.MaxSupply) {
			errs = append(errs, fmt.Sprintf("node%d: the supply adds up to %s, not the cap %s", i, types.FormatAmount(sup.Total()), types.FormatAmount(types.MaxSupply)))
		}
	}
	if err := n.scan.to(ctx, n.Clients[r]); err != nil {
		errs = append(errs, "reading blocks: "+err.Error())
	}
	errs = append(errs, n.slashFindings()...)
	if len(errs) == 0 {
		n.T.Logf("check passed: %d new headers compared, node%d at %d, %d jobs posted", compared, r, n.scan.next-1, len(n.scan.order))
	}
	return errs
}

// slashFindings: a provider is slashed only for a no-show, and only if the
// harness killed or paused it; no validator is jailed (no perturbation
// lasts the downtime window, and none double-signs).
func (n *Net) slashFindings() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	ours := map[types.Address]string{}
	nodeOf := map[types.Address]int{}
	for _, p := range n.Provs {
		ours[p.Addr] = p.Name
		nodeOf[p.Addr] = p.RPCNode
	}
	// itsNode says when the provider's node was perturbed (for the reader).
	itsNode := func(a types.Address) string {
		i := nodeOf[a]
		return fmt.Sprintf("; its node node%d perturbed at heights %v", i, n.valDown[i])
	}
	var out []string
	for _, s := range n.scan.slashes {
		name, isProv := ours[s.Account]
		switch {
		case !isProv:
			out = append(out, fmt.Sprintf("height %d: %s slashed %s (%s) on job %d, not a provider of this net", s.Height, s.Account.Hex(), types.FormatAmount(s.Amount), s.Reason, s.Job))
		case s.Reason != "no-show":
			out = append(out, fmt.Sprintf("height %d: honest provider %s slashed %s for %q on job %d", s.Height, name, types.FormatAmount(s.Amount), s.Reason, s.Job))
		case !n.perturbed[s.Account]:
			out = append(out, fmt.Sprintf("height %d: provider %s, never killed or paused, slashed %s as a no-show on job %d stage %d%s", s.Height, name, types.FormatAmount(s.Amount), s.Job, s.Stage, itsNode(s.Account)))
		default:
			// Killed and restarted: a no-show only if it came back too
			// late for the deadline it missed (the restarted agent
			// resumes its awarded tasks, TestProviderRestartResumes).
			// The slash comes at the deadline missed: it must fall
			// while the provider was down, or within 5 blocks of its
			// return (time to fetch the prompt, generate and commit).
			excused := false
			for _, d := range n.down[s.Account] {
				if s.Height >= d.from && (d.to == 0 || s.Height <= d.to+5) {
					excused = true
				}
			}
			if !excused {
				out = append(out, fmt.Sprintf("height %d: provider %s slashed as a no-show on job %d stage %d although it was serving (down %v%s)", s.Height, name, s.Job, s.Stage, n.down[s.Account], itsNode(s.Account)))
			}
		}
	}
	for _, j := range n.scan.valJails {
		out = append(out, fmt.Sprintf("validator %s jailed: %s", j.Operator.Hex(), j.Reason))
	}
	return out
}

func (n *Net) procs() []*Proc {
	ps := append([]*Proc(nil), n.Vals...)
	for _, p := range n.Provs {
		if p.Proc != nil {
			ps = append(ps, p.Proc)
		}
	}
	return ps
}

// JobCounts is how a set of posted jobs ended.
type JobCounts struct {
	Posted, Settled, Refunded, Disputed, Open int
	// Audited counts the jobs with an audit (of those above: an audited
	// job that paid is settled, verified by the validators).
	Audited int
}

func (c *JobCounts) String() string {
	return fmt.Sprintf("posted %d: settled %d, refunded %d, disputed %d, open %d (audited %d)", c.Posted, c.Settled, c.Refunded, c.Disputed, c.Open, c.Audited)
}

// JobTally is how the posted jobs ended, in all and by kind (inference,
// pipeline).
type JobTally struct {
	JobCounts
	ByKind map[string]*JobCounts
	// Stuck lists the jobs still open, with their phase.
	Stuck []string
}

// Jobs tallies the posted jobs from the chain: settled (completed on an
// agreed or audited result), refunded (expired, cancelled, or completed
// with no result), disputed (a dispute between differing results opened
// and was decided), open (not ended yet); audited counts the jobs an
// audit checked (a short stage or a random draw).
func (n *Net) Jobs(ctx context.Context) (JobTally, error) {
	r := n.Ref()
	if err := n.scan.to(ctx, n.Clients[r]); err != nil {
		return JobTally{}, err
	}
	t := JobTally{ByKind: map[string]*JobCounts{}}
	ids := append([]uint64(nil), n.scan.order...)
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	for _, id := range ids {
		// A job pruned from the state (market/prune.go: retain_blocks after
		// it ended) is tallied from its events: it ended; settled if a
		// provider was paid for it.
		j := &chain.JobView{Job: &market.Job{Kind: n.scan.kinds[id]}}
		if !n.scan.pruned[id] {
			var err error
			if j, err = n.Clients[r].Job(ctx, id); err != nil {
				return t, fmt.Errorf("job %d: %w", id, err)
			}
		}
		k := t.ByKind[j.Kind]
		if k == nil {
			k = &JobCounts{}
			t.ByKind[j.Kind] = k
		}
		for _, c := range []*JobCounts{&t.JobCounts, k} {
			c.Posted++
			if n.scan.audited[id] {
				c.Audited++
			}
			switch {
			case n.scan.pruned[id] && n.scan.disputed[id]:
				c.Disputed++
			case n.scan.pruned[id] && n.scan.paid[id]:
				c.Settled++
			case n.scan.pruned[id]:
				c.Refunded++
			case j.State.Open():
				c.Open++
			case n.scan.disputed[id]:
				c.Disputed++
			case j.State == market.JobCompleted && j.Paid != nil && !j.Paid.IsZero():
				c.Settled++
			default:
				c.Refunded++
			}
		}
		if !n.scan.pruned[id] && j.State.Open() {
			t.Stuck = append(t.Stuck, fmt.Sprintf("%s job %d %s: %s", j.Kind, id, j.StateName, j.Phase))
		}
	}
	return t, nil
}

// WaitJobsEnded waits until no posted job is open (bidding, revealing or
// running): the windows of the last one must have passed by within.
func (n *Net) WaitJobsEnded(within time.Duration) JobTally {
	n.T.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		t, err := n.Jobs(ctx)
		cancel()
		if err == nil && t.Open == 0 {
			return t
		}
		if time.Now().After(deadline) {
			n.T.Fatalf("jobs still open %s after the load stopped (err %v):\n  %s", within, err, strings.Join(t.Stuck, "\n  "))
		}
		time.Sleep(time.Second)
	}
}
