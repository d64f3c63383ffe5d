package loadgen

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"
)

type kindCount struct{ sent, accepted, committed int }

type blockStat struct {
	height   int64
	time     time.Time
	interval time.Duration // since the block before (0: unknown)
	txs      int           // all transactions, the run's and others'
}

// stats are the run's counters, guarded by run.mu.
type stats struct {
	start                  time.Time
	loadEnd                time.Duration
	startHeight, endHeight int64 // committed heights when the load began and ended
	sent, accepted         int
	committed, failed      int           // in a block: succeeded, failed there
	perHeight              map[int64]int // the run's transactions that succeeded, by height
	endByCount             bool          // max-txs, not the duration, ended the load
	dropped, foreign       int
	jobsPosted             int
	jobsCancelled          int
	jobsLate, jobsOpen     int
	tainted                int
	skipped                int // commits and reveals of ended jobs, not sent
	errors                 map[string]int
	byKind                 map[string]*kindCount
	blocks                 []blockStat
	maxMempool             int
	// progress: the counters at the last line
	lastSent, lastAccepted, lastCommitted int
	lastBlock                             int
}

// KindReport counts one kind of transaction.
type KindReport struct {
	Kind                      string
	Sent, Accepted, Committed int
}

// Report is what a run did. Committed counts the run's transactions that
// succeeded in a block, Failed those that failed in their block; an
// accepted transaction is one of the two or Dropped.
type Report struct {
	Mode           string
	Rate           int
	Elapsed        time.Duration // start to the end of the drain
	Load           time.Duration // the load phase
	Sent, Accepted int
	Committed      int
	Failed         int
	Dropped        int
	// Foreign counts transactions of other senders in the blocks read.
	Foreign int
	// StartHeight and EndHeight are the committed heights when the load
	// began and ended (when max-txs ended it: the last block with one of
	// the run's transactions); CommittedInLoad the run's transactions
	// committed in blocks StartHeight+1..EndHeight, and CommittedPerSec
	// those per second of block time over the same blocks: the sustained
	// figure.
	StartHeight, EndHeight int64
	CommittedInLoad        int
	CommittedPerSec        float64
	// Blocks read; block intervals (header time to header time) of the
	// load's blocks, and the most transactions (all senders) in one.
	Blocks                          int
	BlockMin, BlockMedian, BlockMax time.Duration
	BlockP99                        time.Duration
	MaxBlockTxs                     int
	MaxMempool                      int
	JobsPosted, JobsCancelled       int
	JobsLate, JobsOpen              int
	// Tainted counts providers that a job not cancelled awards a task
	// they will miss (slashed and jailed some 390 blocks after the
	// award). The run bids with each until its jobs could outlast that;
	// Retired counts those it no longer bids with at the end.
	Tainted, Retired int
	// Skipped counts commits and reveals not sent because their job had
	// ended (cancelled early, or too late to cancel).
	Skipped int
	Errors  map[string]int
	Kinds   []KindReport
}

// progress prints one line for the last second and samples the mempool.
func (r *run) progress(elapsed time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	mempool := -1
	if res, err := r.watch.RPC.NumUnconfirmedTxs(ctx); err == nil {
		mempool = res.Total
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &r.st
	if mempool > s.maxMempool {
		s.maxMempool = mempool
	}
	var blocks []string
	var txs int
	for _, b := range s.blocks[s.lastBlock:] {
		blocks = append(blocks, fmtDur(b.interval))
		txs += b.txs
	}
	s.lastBlock = len(s.blocks)
	errs := 0
	for _, n := range s.errors {
		errs += n
	}
	if r.cfg.Report != nil {
		fmt.Fprintf(r.cfg.Report, "t=%3.0fs sent=%d accepted=%d committed=%d (+%d) height=%d blocks=%v block-txs=%d mempool=%d open-jobs=%d errors=%d\n",
			elapsed.Seconds(), s.sent-s.lastSent, s.accepted-s.lastAccepted, s.committed, s.committed-s.lastCommitted,
			r.height, blocks, txs, mempool, len(r.jobs), errs)
	}
	s.lastSent, s.lastAccepted, s.lastCommitted = s.sent, s.accepted, s.committed
}

func fmtDur(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s"
}

func itoa(n int) string { return strconv.Itoa(n) }

// report builds the Report. Called with mu held.
func (r *run) report(elapsed time.Duration) *Report {
	s := &r.st
	rep := &Report{
		Mode: r.cfg.Mode, Rate: r.cfg.Rate, Elapsed: elapsed, Load: s.loadEnd,
		Sent: s.sent, Accepted: s.accepted, Committed: s.committed, Failed: s.failed, Dropped: s.dropped, Foreign: s.foreign,
		StartHeight: s.startHeight, EndHeight: s.endHeight,
		Blocks: len(s.blocks), MaxMempool: s.maxMempool,
		JobsPosted: s.jobsPosted, JobsCancelled: s.jobsCancelled, JobsLate: s.jobsLate, JobsOpen: s.jobsOpen, Tainted: s.tainted, Skipped: s.skipped,
		Errors: s.errors,
	}
	for _, last := range r.tainted {
		if uint64(r.height) >= last {
			rep.Retired++
		}
	}
	if s.endByCount {
		rep.EndHeight = s.startHeight
		for h := range s.perHeight {
			rep.EndHeight = max(rep.EndHeight, h)
		}
	}
	for h, n := range s.perHeight {
		if h > rep.StartHeight && h <= rep.EndHeight {
			rep.CommittedInLoad += n
		}
	}
	var ivals []time.Duration
	var first, last time.Time
	for _, b := range s.blocks {
		rep.MaxBlockTxs = max(rep.MaxBlockTxs, b.txs)
		if b.height == s.startHeight+1 && b.interval > 0 {
			first = b.time.Add(-b.interval)
		}
		if b.height > rep.StartHeight && b.height <= rep.EndHeight {
			if b.interval > 0 {
				ivals = append(ivals, b.interval)
			}
			last = b.time
		}
	}
	if !first.IsZero() && last.After(first) {
		rep.CommittedPerSec = float64(rep.CommittedInLoad) / last.Sub(first).Seconds()
	}
	if len(ivals) > 0 {
		slices.Sort(ivals)
		rep.BlockMin, rep.BlockMedian, rep.BlockMax = ivals[0], ivals[len(ivals)/2], ivals[len(ivals)-1]
		rep.BlockP99 = ivals[min(len(ivals)-1, len(ivals)*99/100)]
	}
	for _, k := range []string{KindPost, KindCommit, KindReveal, KindCancel, KindTransfer} {
		if c := s.byKind[k]; c != nil {
			rep.Kinds = append(rep.Kinds, KindReport{Kind: k, Sent: c.sent, Accepted: c.accepted, Committed: c.committed})
		}
	}
	return rep
}

// Write prints the report for people.
func (rep *Report) Write(w io.Writer) {
	fmt.Fprintf(w, "\nloadgen %s at %d tx/s: load %s, then drained (%s in all)\n", rep.Mode, rep.Rate, rep.Load.Round(time.Millisecond), rep.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "  sent %d, accepted by CheckTx %d, committed %d, failed in a block %d, accepted but in no block %d\n",
		rep.Sent, rep.Accepted, rep.Committed, rep.Failed, rep.Dropped)
	for _, k := range rep.Kinds {
		fmt.Fprintf(w, "    %-8s sent %d, accepted %d, committed %d\n", k.Kind, k.Sent, k.Accepted, k.Committed)
	}
	fmt.Fprintf(w, "  sustained: %d committed in blocks %d..%d: %.1f tx/s of block time\n",
		rep.CommittedInLoad, rep.StartHeight+1, rep.EndHeight, rep.CommittedPerSec)
	fmt.Fprintf(w, "  block times over the load: min %s, median %s, p99 %s, max %s (%d blocks read, at most %d txs in one)\n",
		fmtDur(rep.BlockMin), fmtDur(rep.BlockMedian), fmtDur(rep.BlockP99), fmtDur(rep.BlockMax), rep.Blocks, rep.MaxBlockTxs)
	fmt.Fprintf(w, "  mempool at most %d txs (sampled each second)\n", rep.MaxMempool)
	if rep.Mode == ModeMarket {
		fmt.Fprintf(w, "  jobs: %d posted, %d cancelled after their reveals, %d not cancelled in time, %d still open; %d providers tainted (a job of theirs will award them), %d of them no longer bid; %d commits and reveals of ended jobs not sent\n",
			rep.JobsPosted, rep.JobsCancelled, rep.JobsLate, rep.JobsOpen, rep.Tainted, rep.Retired, rep.Skipped)
	}
	if rep.Foreign > 0 {
		fmt.Fprintf(w, "  %d transactions of other senders in those blocks\n", rep.Foreign)
	}
	if len(rep.Errors) == 0 {
		fmt.Fprintln(w, "  errors: none")
		return
	}
	fmt.Fprintln(w, "  errors:")
	keys := make([]string, 0, len(rep.Errors))
	for k := range rep.Errors {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "    %6d  %s\n", rep.Errors[k], k)
	}
}
