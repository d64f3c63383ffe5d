package metrics

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holiman/uint256"
	"github.com/prometheus/client_golang/prometheus"
)

// Gateway series: the OpenAI-compatible gateway's requests, latency and
// spending.
var (
	gwRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "gateway", Name: "requests_total",
		Help: "Requests answered, by endpoint, HTTP status code and mode (job, session or none: answered before anything was dispatched)."},
		[]string{"endpoint", "code", "mode"})
	gwInFlight = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: "gateway", Name: "requests_in_flight",
		Help: "Requests being answered."})
	gwDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Subsystem: "gateway", Name: "request_duration_seconds",
		Help: "Time from a request's arrival to the end of its answer.", Buckets: latencyBuckets}, []string{"endpoint", "mode"})
	gwTTFT = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Subsystem: "gateway", Name: "time_to_first_token_seconds",
		Help:    "Time from a generation request's arrival to its first token (streamed) or its whole answer (not streamed), successful answers only.",
		Buckets: latencyBuckets}, []string{"endpoint", "mode"})
	gwSpent = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "gateway", Name: "spent_ogpu_total",
		Help: "oGPU the gateway spent (float, for charts): requests' actual costs and session fees, as its ledger counts them."})
	gwSessionsOpen = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: "gateway", Name: "sessions_open",
		Help: "Sessions the gateway holds open for requests (each model's current and next), read at each scrape."},
		func() float64 {
			if f := gwSessions.Load(); f != nil {
				return float64((*f)())
			}
			return 0
		})
	gwSessions atomic.Pointer[func() int]
)

// WatchGatewaySessions makes ogpu_gateway_sessions_open read count at
// every scrape: the session backend's warm sessions
// (len(SessionBackend.Sessions())). One gateway per process: the last
// call wins; nil stops watching.
func WatchGatewaySessions(count func() int) {
	if count == nil {
		gwSessions.Store(nil)
		return
	}
	gwSessions.Store(&count)
}

// latencyBuckets span a llama-server's milliseconds to a slow chain's
// auction (tens of seconds).
var latencyBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 1.5, 2, 3, 4, 6, 8, 12, 20, 30, 60, 120}

func gatewayCollectors() []prometheus.Collector {
	return []prometheus.Collector{gwRequests, gwInFlight, gwDuration, gwTTFT, gwSpent, gwSessionsOpen}
}

// AddGatewaySpent counts amount (base units) as spent by the gateway.
func AddGatewaySpent(amount *uint256.Int) { gwSpent.Add(toOGPU(amount)) }

// endpoint names a request path by its route, never by an id in it.
func endpoint(path string) string {
	switch {
	case path == "/v1/chat/completions", path == "/v1/completions", path == "/v1/models", path == "/health":
		return path
	case strings.HasPrefix(path, "/v1/models/"):
		return "/v1/models/{model}"
	case strings.HasPrefix(path, "/v1/ogpu/jobs/"):
		return "/v1/ogpu/jobs/{id}"
	}
	return "other"
}

// Gateway wraps the gateway's handler with the ogpu_gateway_* series. It
// registers them (once per process) and fails only if that fails.
//
// The mode comes from the answer's X-Ogpu-Session or X-Ogpu-Job header.
// The first token of a stream is its first SSE data event that is neither
// the chat role event, an error nor [DONE].
func Gateway(next http.Handler) (http.Handler, error) {
	if err := Register(); err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ep := endpoint(r.URL.Path)
		gen := ep == "/v1/chat/completions" || ep == "/v1/completions"
		gwInFlight.Inc()
		defer gwInFlight.Dec()
		rw := &recorder{ResponseWriter: w, start: start, gen: gen}
		next.ServeHTTP(rw, r)
		rw.mu.Lock()
		defer rw.mu.Unlock()
		code := rw.code
		if code == 0 {
			code = http.StatusOK
		}
		mode := modeOf(w.Header())
		gwRequests.WithLabelValues(ep, strconv.Itoa(code), mode).Inc()
		gwDuration.WithLabelValues(ep, mode).Observe(time.Since(start).Seconds())
		if gen && code == http.StatusOK && rw.firstToken > 0 {
			gwTTFT.WithLabelValues(ep, mode).Observe(rw.firstToken.Seconds())
		}
	}), nil
}

func modeOf(h http.Header) string {
	switch {
	case h.Get("X-Ogpu-Session") != "":
		return "session"
	case h.Get("X-Ogpu-Job") != "":
		return "job"
	}
	return "none"
}

// recorder notes the status code and when the first token was written.
type recorder struct {
	http.ResponseWriter
	start      time.Time
	gen        bool
	mu         sync.Mutex
	code       int
	firstToken time.Duration
}

func (r *recorder) WriteHeader(code int) {
	r.mu.Lock()
	if r.code == 0 {
		r.code = code
	}
	r.mu.Unlock()
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.mu.Lock()
	if r.code == 0 {
		r.code = http.StatusOK
	}
	if r.gen && r.firstToken == 0 && isToken(r.ResponseWriter.Header().Get("Content-Type"), b) {
		r.firstToken = time.Since(r.start)
	}
	r.mu.Unlock()
	return r.ResponseWriter.Write(b)
}

// isToken reports whether a body write carries the answer's first text:
// any write of a JSON answer, or an SSE data event with text in it.
func isToken(contentType string, b []byte) bool {
	if !strings.HasPrefix(contentType, "text/event-stream") {
		return len(b) > 0
	}
	for _, ev := range bytes.Split(b, []byte("\n\n")) {
		data, ok := bytes.CutPrefix(bytes.TrimSpace(ev), []byte("data: "))
		if !ok || bytes.Equal(data, []byte("[DONE]")) || bytes.Contains(data, []byte(`"error":`)) || bytes.Contains(data, []byte(`"role":`)) {
			continue
		}
		return true
	}
	return false
}

// Flush passes on to the wrapped writer: streams stay streamed.
func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the wrapped writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
