package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/holiman/uint256"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ogpu-network/ogpu/types"
)

// Namespace prefixes every series of this package.
const Namespace = "ogpu"

// DefaultListen is the default --metrics.laddr: loopback, CometBFT's
// usual Prometheus port. Metrics reveal activity (jobs, earnings): expose
// them beyond the machine only on purpose.
const DefaultListen = "127.0.0.1:26660"

var (
	regOnce sync.Once
	regErr  error

	buildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "build_info",
		Help: "Always 1; the labels say which build of ogpu runs.",
	}, []string{"version", "commit", "goversion"})
)

// all lists every collector of the package, registered together.
func all() []prometheus.Collector {
	cs := []prometheus.Collector{buildInfo}
	cs = append(cs, appCollectors()...)
	cs = append(cs, appStateCollectors()...)
	cs = append(cs, runtimeCollectors()...)
	cs = append(cs, providerCollectors()...)
	cs = append(cs, gatewayCollectors()...)
	return cs
}

// Register puts every ogpu_* series on the default registry. It runs once
// per process; later calls return the first call's result, so any number
// of in-process nodes, agents and gateways may call it. A series somebody
// else registered under the same name first is an error.
func Register() error {
	regOnce.Do(func() {
		version, commit := buildVersion()
		buildInfo.WithLabelValues(version, commit, runtime.Version()).Set(1)
		var errs []error
		for _, c := range all() {
			if err := prometheus.DefaultRegisterer.Register(c); err != nil {
				var are prometheus.AlreadyRegisteredError
				if errors.As(err, &are) && are.ExistingCollector == c {
					continue
				}
				errs = append(errs, err)
			}
		}
		if err := errors.Join(errs...); err != nil {
			regErr = fmt.Errorf("cannot register the ogpu metrics: %w", err)
		}
	})
	return regErr
}

// buildVersion is the main module's version and VCS revision, as the Go
// toolchain stamped them ("unknown" when it did not, e.g. in tests).
func buildVersion() (version, commit string) {
	version, commit = "unknown", "unknown"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	if v := bi.Main.Version; v != "" {
		version = v
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && s.Value != "" {
			commit = s.Value
		}
	}
	return
}

// Handler serves the default registry (ogpu_*, libp2p_*, go_*, process_*
// and, in a node, cometbft_*) in the Prometheus text format.
func Handler() http.Handler {
	return promhttp.InstrumentMetricHandler(prometheus.DefaultRegisterer,
		promhttp.HandlerFor(prometheus.DefaultGatherer, promhttp.HandlerOpts{MaxRequestsInFlight: 4}))
}

// Listen registers the series and opens laddr for Serve: a busy or bad
// address is an error now, not a log line later.
func Listen(laddr string) (net.Listener, error) {
	if err := Register(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", laddr)
	if err != nil {
		return nil, fmt.Errorf("cannot serve metrics on %s: %w (choose another --metrics.laddr, or \"off\")", laddr, err)
	}
	return ln, nil
}

// Serve answers GET /metrics on ln until ctx ends, then closes it.
func Serve(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	err := srv.Serve(ln)
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Off reports whether laddr turns metrics off ("" or "off").
func Off(laddr string) bool { return laddr == "" || laddr == "off" }

// toOGPU converts base units to float oGPU, for charts only: exact amounts
// come from chain queries. Precision is that of a float64.
func toOGPU(x *uint256.Int) float64 {
	if x == nil {
		return 0
	}
	var q, r uint256.Int
	q.DivMod(x, types.OneOGPU, &r)
	return q.Float64() + r.Float64()/1e18
}
