package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/holiman/uint256"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
)

// TestMetricsRegisterIdempotent: every in-process node, agent and gateway
// calls Register; a second call must neither panic nor fail, and the
// series must be on the default registry exactly once.
func TestMetricsRegisterIdempotent(t *testing.T) {
	for range 3 {
		if err := Register(); err != nil {
			t.Fatal(err)
		}
		if _, err := NewApp(); err != nil {
			t.Fatal(err)
		}
		if _, err := Gateway(http.NotFoundHandler()); err != nil {
			t.Fatal(err)
		}
	}
	if err := prometheus.DefaultRegisterer.Register(appAwards); err == nil {
		t.Fatal("ogpu_app_awards_total was not on the default registry")
	}
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, mf := range mfs {
		seen[mf.GetName()]++
	}
	if seen["ogpu_build_info"] != 1 {
		t.Fatalf("ogpu_build_info gathered %d times", seen["ogpu_build_info"])
	}
}

// TestMetricsReasonClass: slash reasons name jobs and sessions; as labels
// they would grow without bound. Every reason the chain writes folds into
// a fixed class, and an attacker's novel text folds into "other".
func TestMetricsReasonClass(t *testing.T) {
	for reason, want := range map[string]string{
		"no-show":                                             "no_show",
		"fraud: agreed":                                       "fraud",
		"fraud: verdict":                                      "fraud",
		"fraud: handoff equivocation":                         "fraud",
		"missed the vote on job 7":                            "missed_vote",
		"voted against the outcome of job 7":                  "contrary_vote",
		"missed the vote on dispute 1 of session 3":           "missed_vote",
		"voted against the verdict of dispute 1 of session 3": "contrary_vote",
		"false canary answer for job 12":                      "false_canary",
		"equivocation: two receipts for session 3 seq 4":      "equivocation",
		"wrong receipt for session 3 seq 9":                   "wrong_receipt",
		"job 99 0xdeadbeef":                                   "other",
		"":                                                    "other",
	} {
		if got := ReasonClass(reason); got != want {
			t.Errorf("ReasonClass(%q) = %q, want %q", reason, got, want)
		}
	}
	if got := oneOf("<script>", market.KindInference); got != "other" {
		t.Errorf("oneOf kept an unknown label value: %q", got)
	}
}

// TestMetricsProviderIgnoresOthers: events naming other providers (or
// a forged list with the address as a substring) move nothing; a
// settlement on another result than the provider's is "lost", unpaid.
func TestMetricsProviderIgnoresOthers(t *testing.T) {
	me := types.BytesToAddress([]byte{1})
	other := types.BytesToAddress([]byte{2})
	p, err := NewProviderTracker(me)
	if err != nil {
		t.Fatal(err)
	}
	won := value(t, provBids.WithLabelValues("won"))
	lost := value(t, provTasks.WithLabelValues("lost"))
	earned := value(t, provEarned.WithLabelValues("job"))
	mine, theirs := types.Hash{1}, types.Hash{2}
	ev := func(e types.Event) node.BlockEvents {
		return node.BlockEvents{Height: 1, Events: types.Events{types.EncodeEvent(e)}}
	}
	p.ObserveBlock(ev(market.EventJobAwarded{Job: 5, Providers: []string{other.Hex(), other.Hex() + me.Hex()}, Price: types.OGPU(1)}))
	if got := value(t, provBids.WithLabelValues("won")); got != won {
		t.Fatalf("an award to others counted as won: %v", got-won)
	}
	p.ObserveBlock(ev(market.EventJobAwarded{Job: 6, Providers: []string{strings.ToLower(me.Hex())}, Price: types.OGPU(1)}))
	if got := value(t, provTasksRunning); got != 1 {
		t.Fatalf("tasks running %v, want 1", got)
	}
	p.ObserveBlock(ev(market.EventResultRevealed{Job: 6, Provider: me, Result: mine}))
	p.ObserveBlock(ev(market.EventTaskSettled{Job: 6, Outcome: "verdict", Result: theirs, Paid: types.OGPU(1), Refund: new(uint256.Int)}))
	if got := value(t, provTasks.WithLabelValues("lost")); got != lost+1 {
		t.Fatalf("lost tasks moved by %v, want 1", got-lost)
	}
	if got := value(t, provEarned.WithLabelValues("job")); got != earned {
		t.Fatalf("a lost verdict earned %v", got-earned)
	}
	if got := value(t, provTasksRunning); got != 0 {
		t.Fatalf("tasks running %v after settlement", got)
	}
}

// TestMetricsGatewayMiddleware: requests are counted by route (ids
// folded), code and mode; the first token of a stream is the first data
// event with text, not the role event sent at dispatch; streams still
// flush through the wrapper.
func TestMetricsGatewayMiddleware(t *testing.T) {
	release := make(chan struct{})
	h, err := Gateway(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/chat/completions":
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("X-Ogpu-Job", "42")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, ": ogpu: posted\n\n")
			_, _ = io.WriteString(w, `data: {"choices":[{"delta":{"role":"assistant","content":""}}]}`+"\n\n")
			http.NewResponseController(w).Flush()
			<-release
			_, _ = io.WriteString(w, `data: {"choices":[{"delta":{"content":"Hi"}}]}`+"\n\n")
			_, _ = io.WriteString(w, "data: [DONE]\n\n")
		default:
			http.Error(w, "no", http.StatusNotFound)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	count := func(ep, code, mode string) float64 {
		t.Helper()
		return value(t, gwRequests.WithLabelValues(ep, code, mode))
	}
	ttftCount := func() uint64 { return histCount(t, "ogpu_gateway_time_to_first_token_seconds") }
	n0, nf0, t0 := count("/v1/chat/completions", "200", "job"), count("/v1/ogpu/jobs/{id}", "404", "none"), ttftCount()

	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	got := ""
	for !strings.Contains(got, `"role"`) { // the role event arrives before the token: flushed
		n, err := resp.Body.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got += string(buf[:n])
	}
	time.Sleep(30 * time.Millisecond)
	close(release)
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, id := range []string{"1", "2", "3"} {
		r, err := http.Get(srv.URL + "/v1/ogpu/jobs/" + id)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
	}
	if d := count("/v1/chat/completions", "200", "job") - n0; d != 1 {
		t.Errorf("chat requests moved by %v", d)
	}
	if d := count("/v1/ogpu/jobs/{id}", "404", "none") - nf0; d != 3 {
		t.Errorf("job lookups moved by %v, want 3 under one folded endpoint", d)
	}
	if d := ttftCount() - t0; d != 1 {
		t.Fatalf("TTFT observations moved by %d", d)
	}
	if s := histSum(t, "ogpu_gateway_time_to_first_token_seconds"); s < 0.03 {
		t.Errorf("TTFT sum %v s: the role event was taken for the first token", s)
	}
	AddGatewaySpent(types.OGPU(2))
	if v := value(t, gwSpent); v < 2 {
		t.Errorf("spent %v oGPU after adding 2", v)
	}
}

func histCount(t *testing.T, name string) uint64 {
	t.Helper()
	var n uint64
	for _, m := range gatherMetric(t, name) {
		n += m.GetHistogram().GetSampleCount()
	}
	return n
}

func histSum(t *testing.T, name string) float64 {
	t.Helper()
	var s float64
	for _, m := range gatherMetric(t, name) {
		s += m.GetHistogram().GetSampleSum()
	}
	return s
}

func gatherMetric(t *testing.T, name string) []*dto.Metric {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()
		}
	}
	return nil
}

// value reads a counter's or gauge's current value.
func value(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 1)
	c.Collect(ch)
	close(ch)
	var m dto.Metric
	if err := (<-ch).Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// fakeApp answers FinalizeBlock with fixed events (or an error).
type fakeApp struct {
	abci.BaseApplication
	res *abci.FinalizeBlockResponse
	err error
}

func (f *fakeApp) FinalizeBlock(context.Context, *abci.FinalizeBlockRequest) (*abci.FinalizeBlockResponse, error) {
	return f.res, f.err
}

// TestMetricsTimeFinalizeBlock: the timer passes the app's answer through
// untouched, counts an auction once per job however many stages it
// awarded, labels the block by the auctions it closed, and counts nothing
// for a failed block.
func TestMetricsTimeFinalizeBlock(t *testing.T) {
	res := &abci.FinalizeBlockResponse{Events: types.Events{
		types.EncodeEvent(market.EventJobAwarded{Job: 7, Stage: 0, Price: types.OGPU(1)}),
		types.EncodeEvent(market.EventJobAwarded{Job: 7, Stage: 1, Price: types.OGPU(1)}),
		types.EncodeEvent(market.EventJobAwarded{Job: 7, Stage: 2, Price: types.OGPU(1)}),
		types.EncodeEvent(market.EventJobAwarded{Job: 9, Stage: 0, Price: types.OGPU(1)}),
		types.EncodeEvent(market.EventJobExpired{Job: 8, Refund: types.OGPU(1), Reason: "no bids"}),
	}}
	app := &fakeApp{res: res}
	timed := TimeFinalizeBlock(app)
	awarded := value(t, appAuctionsClosed.WithLabelValues("awarded"))
	expired := value(t, appAuctionsClosed.WithLabelValues("expired"))
	count := func(bucket string) uint64 {
		m := &dto.Metric{}
		if err := appFinalize.WithLabelValues(bucket).(prometheus.Histogram).Write(m); err != nil {
			t.Fatal(err)
		}
		return m.GetHistogram().GetSampleCount()
	}
	few, none := count("1-9"), count("0")
	got, err := timed.FinalizeBlock(t.Context(), &abci.FinalizeBlockRequest{Height: 3})
	if err != nil || got != res {
		t.Fatalf("the timer changed the answer: %v %v", got, err)
	}
	if d := value(t, appAuctionsClosed.WithLabelValues("awarded")) - awarded; d != 2 {
		t.Errorf("awarded auctions moved by %v, want 2 (jobs 7 and 9)", d)
	}
	if d := value(t, appAuctionsClosed.WithLabelValues("expired")) - expired; d != 1 {
		t.Errorf("expired auctions moved by %v, want 1", d)
	}
	if count("1-9") != few+1 || count("0") != none {
		t.Errorf("block not timed in the 1-9 bucket: %d→%d, 0: %d→%d", few, count("1-9"), none, count("0"))
	}
	app.res, app.err = nil, errors.New("boom")
	if _, err := timed.FinalizeBlock(t.Context(), &abci.FinalizeBlockRequest{Height: 4}); err == nil {
		t.Fatal("the timer swallowed the app's error")
	}
	if count("0") != none || count("1-9") != few+1 {
		t.Error("a failed block was timed")
	}
	for n, want := range map[int]string{0: "0", 1: "1-9", 9: "1-9", 10: "10-99", 99: "10-99", 100: "100+", 5000: "100+"} {
		if got := auctionsBucket(n); got != want {
			t.Errorf("auctionsBucket(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestMetricsRuntimeHooks: blob bytes go to their direction and an empty
// transfer counts nothing; a preset name no build has (too long to be
// one) folds into "other".
func TestMetricsRuntimeHooks(t *testing.T) {
	if err := Register(); err != nil {
		t.Fatal(err)
	}
	served, fetched := value(t, blobBytes.WithLabelValues("served")), value(t, blobBytes.WithLabelValues("fetched"))
	ObserveBlobBytes(true, 100)
	ObserveBlobBytes(false, 7)
	ObserveBlobBytes(false, 0)
	if d := value(t, blobBytes.WithLabelValues("served")) - served; d != 100 {
		t.Errorf("served moved by %v, want 100", d)
	}
	if d := value(t, blobBytes.WithLabelValues("fetched")) - fetched; d != 7 {
		t.Errorf("fetched moved by %v, want 7", d)
	}
	ObserveHEStage(strings.Repeat("x", 100), time.Second)
	m := &dto.Metric{}
	if err := heStage.WithLabelValues("other").(prometheus.Histogram).Write(m); err != nil || m.GetHistogram().GetSampleCount() != 1 {
		t.Errorf("a long preset did not fold into other: %v %v", m, err)
	}
}
