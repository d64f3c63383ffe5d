package devnet

import (
	"fmt"
	"strings"

	"github.com/ogpu-network/ogpu/metrics"
)

// The devnet serves its chain's ogpu_* series (package metrics: one
// subscription to committed blocks, never read back into state) on a
// loopback port, prints the address, and after each round the series that
// tell the rounds apart.

// metricsShown are the ogpu_app_* families printed after each round, by
// the name the line uses.
var metricsShown = []struct{ family, name string }{
	{"ogpu_app_height", "height"},
	{"ogpu_app_jobs_posted_total", "jobs posted"},
	{"ogpu_app_bids_total", "bids"},
	{"ogpu_app_awards_total", "awards"},
	{"ogpu_app_tasks_settled_total", "tasks settled"},
	{"ogpu_app_disputes_total", "disputes"},
	{"ogpu_app_slashes_total", "slashes"},
	{"ogpu_app_sessions_opened_total", "sessions"},
}

// startMetrics serves the metrics until the agents stop.
func (d *devnet) startMetrics() error {
	app, err := metrics.NewApp(metrics.WithState(d.c))
	if err != nil {
		return err
	}
	ln, err := metrics.Listen("127.0.0.1:0")
	if err != nil {
		return err
	}
	ctx := d.ctx
	d.goAgent(func() { _ = metrics.Serve(ctx, ln) })
	d.goAgent(func() { _ = metrics.Follow(ctx, d.c, nil, app) })
	d.metricsURL = "http://" + ln.Addr().String() + "/metrics"
	fmt.Fprintf(d.w, "metrics: curl -s %s | grep '^ogpu_'\n", d.metricsURL)
	return nil
}

// printMetrics scrapes the devnet's /metrics and prints the families of
// metricsShown, each summed over its labels; it returns them by family.
func (d *devnet) printMetrics(title string) (map[string]float64, error) {
	samples, err := metrics.Scrape(d.metricsURL)
	if err != nil {
		return nil, err
	}
	sums := map[string]float64{}
	for series, v := range samples {
		family, _, _ := strings.Cut(series, "{")
		sums[family] += v
	}
	parts := make([]string, len(metricsShown))
	for i, m := range metricsShown {
		parts[i] = fmt.Sprintf("%s %g", m.name, sums[m.family])
	}
	fmt.Fprintf(d.w, "metrics %s: %s\n", title, strings.Join(parts, ", "))
	return sums, nil
}
