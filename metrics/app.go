package metrics

import (
	"strings"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/session"
	"github.com/ogpu-network/ogpu/types"
)

// App series: what the chain did, from its committed blocks' events.
var (
	appHeight = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: "app", Name: "height",
		Help: "Height of the last committed block the metrics saw."})
	appBlockTxs = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: "app", Name: "block_txs",
		Help: "Transactions in the last committed block (failed ones included)."})
	appTxs = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "app", Name: "txs_total",
		Help: "Transactions committed (failed ones included)."})
	appJobsPosted = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "app", Name: "jobs_posted_total",
		Help: "Jobs posted, by kind and mode."}, []string{"kind", "mode"})
	appJobsEnded = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "app", Name: "jobs_ended_total",
		Help: "Jobs that ended: completed, expired or cancelled."}, []string{"end"})
	appBids = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "app", Name: "bids_total",
		Help: "Bids (and pool claims) by step: committed, revealed, forfeited."}, []string{"step"})
	appAwards = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "app", Name: "awards_total",
		Help: "Stages awarded (job_awarded events)."})
	appTasksSettled = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "app", Name: "tasks_settled_total",
		Help: "Stages settled, by outcome."}, []string{"outcome"})
	appNoShows = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "app", Name: "no_shows_total",
		Help: "Awarded providers that missed a result commit or reveal."}, []string{"missed"})
	appDisputes = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "app", Name: "disputes_total",
		Help: "Disputes opened: job (results differ, or an audit: see audits_total) or session_audit, session_comparison, session_equivocation."}, []string{"kind"})
	appAudits = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "app", Name: "audits_total",
		Help: "Job tasks put to a validator audit before payment, by reason: short (fewer than r agreeing results), random (drawn by the beacon), split (a split slot alone on its input)."}, []string{"reason"})
	appSlashes = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "app", Name: "slashes_total",
		Help: "Slashes, by reason class."}, []string{"reason"})
	appSlashed = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "app", Name: "slashed_ogpu_total",
		Help: "Stake slashed in oGPU (float, for charts), by reason class."}, []string{"reason"})
	appJailings = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "app", Name: "provider_jailings_total",
		Help: "Providers jailed."})
	appPaid = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "app", Name: "paid_ogpu_total",
		Help: "oGPU paid to providers (float, for charts): via job (job_completed.paid) or session (redeemed vouchers)."}, []string{"via"})
	appSessionsOpened = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "app", Name: "sessions_opened_total",
		Help: "Sessions opened."})
)

func appCollectors() []prometheus.Collector {
	return []prometheus.Collector{appHeight, appBlockTxs, appTxs, appJobsPosted, appJobsEnded, appBids, appAwards,
		appTasksSettled, appNoShows, appDisputes, appAudits, appSlashes, appSlashed, appJailings, appPaid, appSessionsOpened}
}

// App turns committed blocks into the ogpu_app_* series. Give it every
// block once, in order (Follow does): it keeps no state of its own.
// WithState adds the series read from the chain's state at each block.
type App struct {
	chain *node.Client
}

// NewApp registers the series (once per process) and returns the observer.
func NewApp(opts ...AppOption) (*App, error) {
	if err := Register(); err != nil {
		return nil, err
	}
	a := &App{}
	for _, o := range opts {
		o(a)
	}
	return a, nil
}

// ObserveBlock counts block b's events and, WithState, reads the state
// at b's height.
func (a *App) ObserveBlock(b node.BlockEvents) {
	appHeight.Set(float64(b.Height))
	appBlockTxs.Set(float64(b.Txs))
	appTxs.Add(float64(b.Txs))
	for _, ev := range b.Events {
		observeAppEvent(ev)
	}
	if a.chain != nil {
		a.observeState(b.Height)
	}
}

func observeAppEvent(ev abci.Event) {
	switch ev.Type {
	case "job_posted":
		var e market.EventJobPosted
		if decode(ev, &e) {
			appJobsPosted.WithLabelValues(oneOf(e.Kind, market.KindInference, market.KindPipeline, market.KindSplit, market.KindSession),
				oneOf(e.Mode, market.ModeAuction, market.ModePool)).Inc()
		}
	case "job_completed":
		appJobsEnded.WithLabelValues("completed").Inc()
		var e market.EventJobCompleted
		if decode(ev, &e) {
			appPaid.WithLabelValues("job").Add(toOGPU(e.Paid))
		}
	case "job_expired":
		appJobsEnded.WithLabelValues("expired").Inc()
	case "job_cancelled":
		appJobsEnded.WithLabelValues("cancelled").Inc()
	case "bid_committed":
		appBids.WithLabelValues("committed").Inc()
	case "bid_revealed":
		appBids.WithLabelValues("revealed").Inc()
	case "bid_forfeited":
		appBids.WithLabelValues("forfeited").Inc()
	case "job_awarded":
		appAwards.Inc()
	case "task_settled":
		var e market.EventTaskSettled
		if decode(ev, &e) {
			appTasksSettled.WithLabelValues(oneOf(e.Outcome, "agreed", "verdict", "audited", "unverified", "unresolved", "no_results", "no_bids", "bad_input", "no_input", "canary")).Inc()
		}
	case "no_show":
		var e market.EventNoShow
		if decode(ev, &e) {
			appNoShows.WithLabelValues(oneOf(e.Missed, "commit", "reveal")).Inc()
		}
	case "dispute_opened":
		appDisputes.WithLabelValues("job").Inc()
	case "audit_opened":
		var e market.EventAuditOpened
		if decode(ev, &e) {
			appAudits.WithLabelValues(oneOf(e.Reason, "short", "random", "split")).Inc()
		}
	case "session_dispute_opened":
		var e session.EventDisputeOpened
		if decode(ev, &e) {
			appDisputes.WithLabelValues("session_" + oneOf(e.Kind, "audit", "comparison", "equivocation")).Inc()
		}
	case "slashed":
		var e market.EventSlashed
		if decode(ev, &e) {
			c := ReasonClass(e.Reason)
			appSlashes.WithLabelValues(c).Inc()
			appSlashed.WithLabelValues(c).Add(toOGPU(e.Amount))
		}
	case "session_slashed":
		var e session.EventSlashed
		if decode(ev, &e) {
			c := ReasonClass(e.Reason)
			appSlashes.WithLabelValues(c).Inc()
			appSlashed.WithLabelValues(c).Add(toOGPU(e.Amount))
		}
	case "provider_jailed":
		appJailings.Inc()
	case "session_redeemed":
		var e session.EventRedeemed
		if decode(ev, &e) {
			appPaid.WithLabelValues("session").Add(toOGPU(e.Paid))
		}
	case "session_opened":
		appSessionsOpened.Inc()
	}
}

// decode decodes ev into out; an event that does not decode (a chain of
// another version) is skipped rather than miscounted.
func decode(ev abci.Event, out types.Event) bool { return types.DecodeEvent(ev, out) == nil }

// oneOf is v when it is one of known, else "other": label values stay a
// fixed, small set whatever a chain of another version emits.
func oneOf(v string, known ...string) string {
	for _, k := range known {
		if v == k {
			return v
		}
	}
	return "other"
}

// ReasonClass folds a slash reason (free text naming jobs and sessions)
// into a fixed class: no_show, fraud, missed_vote, contrary_vote,
// false_canary, equivocation, wrong_receipt or other.
func ReasonClass(reason string) string {
	switch {
	case reason == "no-show":
		return "no_show"
	case strings.HasPrefix(reason, "fraud"):
		return "fraud"
	case strings.HasPrefix(reason, "missed the vote"):
		return "missed_vote"
	case strings.HasPrefix(reason, "voted against"):
		return "contrary_vote"
	case strings.HasPrefix(reason, "false canary"):
		return "false_canary"
	case strings.HasPrefix(reason, "equivocation"):
		return "equivocation"
	case strings.HasPrefix(reason, "wrong receipt"):
		return "wrong_receipt"
	}
	return "other"
}
