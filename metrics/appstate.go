package metrics

import (
	"context"
	"encoding/json"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
)

// App series read from the chain's state (the /stats query, at each
// followed block) and measured around FinalizeBlock (TimeFinalizeBlock).
var (
	appJobs = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: "app", Name: "jobs",
		Help: "Open jobs by state (bidding, revealing, running) at the last followed block; ended jobs are counted by ogpu_app_jobs_ended_total."},
		[]string{"state"})
	appLocked = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: "app", Name: "escrow_locked_ogpu",
		Help: "oGPU locked in job and session escrow at the last followed block (float, for charts)."})
	appBonded = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: "app", Name: "bonded_ogpu",
		Help: "oGPU bonded by providers and validators at the last followed block (float, for charts)."})
	appUnbonding = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: "app", Name: "unbonding_ogpu",
		Help: "oGPU unbonding at the last followed block (float, for charts)."})
	appStateErrors = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "app", Name: "state_query_errors_total",
		Help: "Followed blocks whose /stats query failed (the state gauges then keep their last values)."})

	appFinalize = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Subsystem: "app", Name: "finalize_block_seconds",
		Help:    "Time the app took to execute a block (ABCI FinalizeBlock, measured outside the state machine), by how many auctions closed in it.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"auctions"})
	appAuctionsClosed = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "app", Name: "auctions_closed_total",
		Help: "Auctions the end of a block closed: awarded (job_awarded) or expired (job_expired), one per job."}, []string{"result"})
)

func appStateCollectors() []prometheus.Collector {
	return []prometheus.Collector{appJobs, appLocked, appBonded, appUnbonding, appStateErrors, appFinalize, appAuctionsClosed}
}

// AppOption configures NewApp.
type AppOption func(*App)

// WithState makes the App read the chain's /stats at every block it is
// given, for ogpu_app_jobs{state} and the escrow and stake gauges. c is
// the node's own client (a query per block).
func WithState(c *node.Client) AppOption { return func(a *App) { a.chain = c } }

// stateQueryTimeout bounds the /stats query of one block.
const stateQueryTimeout = 10 * time.Second

// observeState sets the state gauges from /stats at height h.
func (a *App) observeState(h int64) {
	ctx, cancel := context.WithTimeout(context.Background(), stateQueryTimeout)
	defer cancel()
	res, err := a.chain.Query(ctx, chain.QueryStats, nil, h, false)
	var v chain.StatsView
	if err == nil {
		err = json.Unmarshal(res.Value, &v)
	}
	if err != nil {
		appStateErrors.Inc()
		return
	}
	for _, s := range chain.OpenJobStates {
		appJobs.WithLabelValues(s.String()).Set(float64(v.Jobs[s.String()]))
	}
	appLocked.Set(toOGPU(v.Locked))
	appBonded.Set(toOGPU(v.Bonded))
	appUnbonding.Set(toOGPU(v.Unbonding))
}

// TimeFinalizeBlock wraps the app CometBFT calls (node.AppWrapper) to
// time FinalizeBlock: ogpu_app_finalize_block_seconds, labelled by the
// auctions its end-block events closed, and ogpu_app_auctions_closed_total.
// The clock is read here, never inside the state machine; requests and
// answers pass through unchanged. It registers the series (once per
// process); a registration failure leaves the app unwrapped.
func TimeFinalizeBlock(app abci.Application) abci.Application {
	if Register() != nil {
		return app
	}
	return &timedApp{Application: app}
}

type timedApp struct{ abci.Application }

func (t *timedApp) FinalizeBlock(ctx context.Context, req *abci.FinalizeBlockRequest) (*abci.FinalizeBlockResponse, error) {
	start := time.Now()
	res, err := t.Application.FinalizeBlock(ctx, req)
	took := time.Since(start)
	if err != nil || res == nil {
		return res, err
	}
	awarded, expired := auctionsClosed(res.Events)
	appFinalize.WithLabelValues(auctionsBucket(awarded + expired)).Observe(took.Seconds())
	appAuctionsClosed.WithLabelValues("awarded").Add(float64(awarded))
	appAuctionsClosed.WithLabelValues("expired").Add(float64(expired))
	return res, err
}

// auctionsClosed counts the jobs a block's own events (its begin and end,
// not its transactions) awarded or expired.
func auctionsClosed(evs []abci.Event) (awarded, expired int) {
	seen := map[uint64]bool{}
	for _, ev := range evs {
		switch ev.Type {
		case "job_awarded":
			var e market.EventJobAwarded
			if decode(ev, &e) && !seen[e.Job] {
				seen[e.Job] = true
				awarded++
			}
		case "job_expired":
			var e market.EventJobExpired
			if decode(ev, &e) && !seen[e.Job] {
				seen[e.Job] = true
				expired++
			}
		}
	}
	return awarded, expired
}

// auctionsBucket folds a count into a fixed label value.
func auctionsBucket(n int) string {
	switch {
	case n == 0:
		return "0"
	case n < 10:
		return "1-9"
	case n < 100:
		return "10-99"
	}
	return "100+"
}
