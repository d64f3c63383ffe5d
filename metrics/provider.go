package metrics

import (
	"strings"
	"sync"
	"time"

	"github.com/holiman/uint256"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/session"
	"github.com/ogpu-network/ogpu/types"
)

// Provider series: one provider agent's auctions, tasks and earnings, from
// the events that name it, and what its runtime measured.
var (
	provBids = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "provider", Name: "bids_total",
		Help: "This provider's bids by result: committed, revealed, won (stages awarded to it), forfeited."}, []string{"result"})
	provTasksRunning = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: "provider", Name: "tasks_running",
		Help: "Stages awarded to this provider and not settled yet."})
	provTasks = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "provider", Name: "tasks_total",
		Help: "This provider's settled stages by outcome: paid, lost (its result differed), no_show, refunded (settled without a decided result)."}, []string{"outcome"})
	provEarned = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "provider", Name: "earned_ogpu_total",
		Help: "oGPU earned (float, for charts), via job (a settled stage's price) or session (redeemed vouchers)."}, []string{"via"})
	provSlashed = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "provider", Name: "slashed_ogpu_total",
		Help: "oGPU of this provider's stake slashed (float, for charts)."})
	provJailed = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: "provider", Name: "jailed",
		Help: "1 while this provider is jailed (since the metrics started), else 0."})
	provGenerated = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "provider", Name: "generated_tokens_total",
		Help: "Tokens this provider generated."})
	provTokensPerSecond = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: "provider", Name: "tokens_per_second",
		Help: "Decode speed of the last generation measured (tokens per second)."})
	provGeneration = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Subsystem: "provider", Name: "generation_seconds",
		Help: "Duration of a generation.", Buckets: prometheus.ExponentialBuckets(0.01, 2.5, 12)})
)

func providerCollectors() []prometheus.Collector {
	return []prometheus.Collector{provBids, provTasksRunning, provTasks, provEarned, provSlashed, provJailed,
		provGenerated, provTokensPerSecond, provGeneration}
}

// ObserveGeneration records one generation of tokens tokens that took d:
// the provider agent calls it after each run of its runtime.
func ObserveGeneration(tokens int, d time.Duration) {
	if tokens <= 0 || d <= 0 {
		return
	}
	provGenerated.Add(float64(tokens))
	provGeneration.Observe(d.Seconds())
	provTokensPerSecond.Set(float64(tokens) / d.Seconds())
}

// SetTokensPerSecond sets the tokens/s gauge to a speed measured outside
// a job (the provider's start-up benchmark).
func SetTokensPerSecond(tps float64) {
	if tps > 0 {
		provTokensPerSecond.Set(tps)
	}
}

// maxTracked bounds the stages a ProviderTracker remembers: a provider
// runs far fewer at once; beyond it the oldest are dropped (their
// settlement then counts nothing).
const maxTracked = 4096

type taskKey struct {
	job   uint64
	stage uint16
}

type task struct {
	price    *uint256.Int
	result   types.Hash
	revealed bool
	noShow   bool
}

// ProviderTracker turns committed blocks into the ogpu_provider_* series
// of one provider address. Give it every block once, in order.
//
// A job stage earns its price when it settles "agreed", "verdict" or
// "audited" on
// the result this provider revealed (market.Keeper.settle's rule), or
// "bad_input" on stage 0 while it was live. Reassigned slots and split
// jobs' slots are not counted.
type ProviderTracker struct {
	addr  types.Address
	mu    sync.Mutex
	tasks map[taskKey]*task
	order []taskKey
}

// NewProviderTracker registers the series (once per process) and tracks
// addr.
func NewProviderTracker(addr types.Address) (*ProviderTracker, error) {
	if err := Register(); err != nil {
		return nil, err
	}
	return &ProviderTracker{addr: addr, tasks: map[taskKey]*task{}}, nil
}

// ObserveBlock counts block b's events that name the provider.
func (p *ProviderTracker) ObserveBlock(b node.BlockEvents) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ev := range b.Events {
		switch ev.Type {
		case "bid_committed":
			var e market.EventBidCommitted
			if decode(ev, &e) && e.Provider == p.addr {
				provBids.WithLabelValues("committed").Inc()
			}
		case "bid_revealed":
			var e market.EventBidRevealed
			if decode(ev, &e) && e.Provider == p.addr {
				provBids.WithLabelValues("revealed").Inc()
			}
		case "bid_forfeited":
			var e market.EventBidForfeited
			if decode(ev, &e) && e.Provider == p.addr {
				provBids.WithLabelValues("forfeited").Inc()
			}
		case "job_awarded":
			var e market.EventJobAwarded
			if decode(ev, &e) && p.named(e.Providers) {
				provBids.WithLabelValues("won").Inc()
				p.add(taskKey{e.Job, e.Stage}, e.Price)
			}
		case "result_revealed":
			var e market.EventResultRevealed
			if decode(ev, &e) && e.Provider == p.addr {
				if t := p.tasks[taskKey{e.Job, e.Stage}]; t != nil {
					t.result, t.revealed = e.Result, true
				}
			}
		case "no_show":
			var e market.EventNoShow
			if decode(ev, &e) && e.Provider == p.addr {
				if t := p.tasks[taskKey{e.Job, e.Stage}]; t != nil {
					t.noShow = true
				}
			}
		case "task_settled":
			var e market.EventTaskSettled
			if decode(ev, &e) {
				p.settle(e)
			}
		case "slashed":
			var e market.EventSlashed
			if decode(ev, &e) && e.Account == p.addr {
				provSlashed.Add(toOGPU(e.Amount))
			}
		case "session_slashed":
			var e session.EventSlashed
			if decode(ev, &e) && e.Account == p.addr {
				provSlashed.Add(toOGPU(e.Amount))
			}
		case "session_redeemed":
			var e session.EventRedeemed
			if decode(ev, &e) && e.Provider == p.addr {
				provEarned.WithLabelValues("session").Add(toOGPU(e.Paid))
			}
		case "provider_jailed":
			var e market.EventProviderJailed
			if decode(ev, &e) && e.Provider == p.addr {
				provJailed.Set(1)
			}
		case "provider_unjailed":
			var e market.EventProviderUnjailed
			if decode(ev, &e) && e.Provider == p.addr {
				provJailed.Set(0)
			}
		}
	}
	provTasksRunning.Set(float64(len(p.tasks)))
}

// named reports whether the provider is in a list of hex addresses.
func (p *ProviderTracker) named(list []string) bool {
	me := p.addr.Hex()
	for _, s := range list {
		if strings.EqualFold(s, me) {
			return true
		}
	}
	return false
}

func (p *ProviderTracker) add(k taskKey, price *uint256.Int) {
	if _, ok := p.tasks[k]; ok {
		return
	}
	for len(p.order) >= maxTracked {
		delete(p.tasks, p.order[0])
		p.order = p.order[1:]
	}
	p.tasks[k] = &task{price: price}
	p.order = append(p.order, k)
}

func (p *ProviderTracker) settle(e market.EventTaskSettled) {
	k := taskKey{e.Job, e.Stage}
	t := p.tasks[k]
	if t == nil {
		return
	}
	delete(p.tasks, k)
	for i, o := range p.order {
		if o == k {
			p.order = append(p.order[:i], p.order[i+1:]...)
			break
		}
	}
	decided := e.Outcome == "agreed" || e.Outcome == "verdict" || e.Outcome == market.OutcomeAudited
	switch {
	case t.noShow:
		provTasks.WithLabelValues("no_show").Inc()
	case decided && t.revealed && t.result == e.Result, e.Outcome == "bad_input" && e.Stage == 0:
		provTasks.WithLabelValues("paid").Inc()
		provEarned.WithLabelValues("job").Add(toOGPU(t.price))
	case decided && t.revealed:
		provTasks.WithLabelValues("lost").Inc()
	default:
		provTasks.WithLabelValues("refunded").Inc()
	}
}
