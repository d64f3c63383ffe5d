package cli

import (
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ogpu-network/ogpu/metrics"
	"github.com/ogpu-network/ogpu/node"
)

// scrapeMetrics GETs url and returns every sample by its series.
func scrapeMetrics(t *testing.T, url string) map[string]float64 {
	t.Helper()
	out, err := metrics.Scrape(url)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func hasPrefix(m map[string]float64, prefix string) bool {
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// TestMetricsOgpudStart runs `ogpud start --metrics.laddr` as an operator
// would and scrapes it: CometBFT's cometbft_* and the app's ogpu_* series
// on one loopback endpoint, ogpu_app_height following the chain. A chosen
// metrics address that is taken stops the node with a clear error instead
// of running without metrics unnoticed. The state series and the
// FinalizeBlock timer are on.
func TestMetricsOgpudStart(t *testing.T) {
	home := filepath.Join(t.TempDir(), "node")
	runOgpud(t, "init", "--home", home, "--chain-id", "ogpu-metrics", "--moniker", "solo")
	rpcPort, _ := node.FreePort()
	p2pPort, _ := node.FreePort()
	metricsPort, _ := node.FreePort()
	flags := []string{"--rpc.laddr", fmt.Sprintf("tcp://127.0.0.1:%d", rpcPort), "--p2p.laddr", fmt.Sprintf("tcp://127.0.0.1:%d", p2pPort),
		"--consensus.timeout_commit", "100ms", "--validator-agent=false"}

	// Taken: refused, with the flag to change in the message.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(ogpud(t), append([]string{"start", "--home", home, "--log_level", "error", "--metrics.laddr", busy.Addr().String()}, flags...)...).CombinedOutput()
	busy.Close()
	if err == nil || !strings.Contains(string(out), "cannot serve metrics on") || !strings.Contains(string(out), "--metrics.laddr") {
		t.Fatalf("ogpud start on a taken metrics address: %v\n%s", err, out)
	}

	laddr := fmt.Sprintf("127.0.0.1:%d", metricsPort)
	startProc(t, home, append(flags, "--metrics.laddr", laddr)...)
	c := rpcClient(t, fmt.Sprintf("127.0.0.1:%d", rpcPort))
	waitHeight(t, c, 3, 60*time.Second)
	url := "http://" + laddr + "/metrics"
	var first map[string]float64
	deadline := time.Now().Add(30 * time.Second)
	for first = scrapeMetrics(t, url); first["ogpu_app_height"] < 1 && time.Now().Before(deadline); first = scrapeMetrics(t, url) {
		time.Sleep(100 * time.Millisecond)
	}
	if first["ogpu_app_height"] < 1 {
		t.Fatalf("ogpu_app_height is %v", first["ogpu_app_height"])
	}
	if !hasPrefix(first, "cometbft_consensus_height{") || !hasPrefix(first, "ogpu_build_info{") {
		t.Fatal("cometbft_consensus_height or ogpu_build_info missing from /metrics")
	}
	h := first["ogpu_app_height"]
	waitHeight(t, c, int64(h)+3, 60*time.Second)
	deadline = time.Now().Add(30 * time.Second)
	var later map[string]float64
	for later = scrapeMetrics(t, url); later["ogpu_app_height"] < h+2 && time.Now().Before(deadline); later = scrapeMetrics(t, url) {
		time.Sleep(100 * time.Millisecond)
	}
	if later["ogpu_app_height"] < h+2 {
		t.Fatalf("ogpu_app_height stayed at %v (was %v)", later["ogpu_app_height"], h)
	}
	// The state series and the block timer are wired: every block the
	// node executed was timed (it closed no auction), the chain has no
	// job, and the validator's stake is bonded.
	if got := later[`ogpu_app_finalize_block_seconds_count{auctions="0"}`]; got < later["ogpu_app_height"] {
		t.Errorf("%v blocks timed, the follower saw %v", got, later["ogpu_app_height"])
	}
	for _, state := range []string{"bidding", "revealing", "running"} {
		if v, ok := later[`ogpu_app_jobs{state="`+state+`"}`]; !ok || v != 0 {
			t.Errorf("ogpu_app_jobs{state=%q} = %v (served %v) on a chain without jobs", state, v, ok)
		}
	}
	if later["ogpu_app_bonded_ogpu"] <= 0 || later["ogpu_app_state_query_errors_total"] != 0 {
		t.Errorf("ogpu_app_bonded_ogpu = %v, %v /stats queries failed", later["ogpu_app_bonded_ogpu"], later["ogpu_app_state_query_errors_total"])
	}
}
