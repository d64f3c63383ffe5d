package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestUnposted: the load retries a run only when it posted nothing
// because its node was down or catching up. A run that posted its job and
// then failed (its node unreachable when it fetched the result, say) is a
// failure the suite reports, never retried away: the attack is a harness
// that hides a client losing a paid result behind a retry.
func TestUnposted(t *testing.T) {
	for _, c := range []struct {
		name, stderr string
		want         bool
	}{
		{"node down before the post", `Error: post job: cannot reach node at http://127.0.0.1:22131 (is ` + "`ogpud start`" + ` running there? set --node or OGPU_NODE): post failed: connect: connection refused`, true},
		{"node catching up", "Error: post job: cannot broadcast: error in json rpc client: RPC error -32603 - Internal error: endpoint is closed while node is catching up", true},
		{"posted, then the node went down", "posted job 7 at height 40: 10.2ogpu locked, sealed bids until 44, reveals until 47\nError: fetch result a5cb5678 of job 7 stage 0: job 7: cannot reach node at tcp://127.0.0.1:22131", false},
		{"posted pipeline job, then the node went down", "posted pipeline job 8 at height 41: 3 stages × 2 replicas\nError: cannot reach node at http://127.0.0.1:22131", false},
		{"posted pool job, then catching up", "posted pool job 9 at height 42\nError: endpoint is closed while node is catching up", false},
		{"expired, no bids", "Error: job 93 expired: no bids: see ogpu query why-no-bids; 10.2ogpu refunded", false},
		{"another error before the post", "Error: --input has 3 values, model example takes 8", false},
	} {
		if got := unposted(c.stderr); got != c.want {
			t.Errorf("%s: unposted = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestLastLines: a failed run's error keeps its last lines, all of them when
// there are fewer.
func TestLastLines(t *testing.T) {
	trace := "panic: send on closed channel\n\ngoroutine 90 [running]:\nreadRoutine()\n\tws_client.go:541\ncreated by startReadWriteRoutines\n\tws_client.go:340 +0x9f\n"
	for _, c := range []struct {
		n    int
		want string
	}{
		{1, "\tws_client.go:340 +0x9f"},
		{2, "created by startReadWriteRoutines\n\tws_client.go:340 +0x9f"},
		{20, strings.TrimSpace(trace)},
	} {
		if got := lastLines(trace, c.n); got != c.want {
			t.Errorf("last %d lines: got %q, want %q", c.n, got, c.want)
		}
	}
	if got := lastLines("", 3); got != "" {
		t.Errorf("no output: got %q", got)
	}
}

// TestKeepRun: with OGPU_E2E_LOGS=DIR each client run's whole stderr and
// stdout go to a file of its own in DIR, named by client, run and (once
// posted) job; without it nothing is written. The attack is a soak whose
// crashed client leaves only its trace's last line ("created by ...").
func TestKeepRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	l := &Load{n: &Net{T: t}}
	start := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	crash := "posted pipeline job 39 at height 436: 3 stages × 2 replicas\npanic: send on closed channel\n\ngoroutine 90 [running]:\ncreated by startReadWriteRoutines\n\tws_client.go:340 +0x9f"
	runs := []clientRun{
		{Node: 1, Args: []string{"job", "run", "--from", "client2"}, Start: start, End: start.Add(2 * time.Second),
			Err: errors.New("exit status 1"), Stderr: "Error: post job: cannot reach node at http://127.0.0.1:1\n"},
		{Node: 3, Args: []string{"job", "run", "--from", "client2"}, Start: start, End: start.Add(90 * time.Second),
			Err: errors.New("exit status 2"), Stderr: crash},
		{Node: 3, Start: start, End: start.Add(time.Minute), Stderr: "posted job 40 at height 500\n", Stdout: []byte(`{"Job":40,"Outcome":"verified"}`)},
	}
	l.keepRun(1, runs[0]) // OGPU_E2E_LOGS unset
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("wrote logs without %s: %v", LogsEnv, err)
	}
	t.Setenv(LogsEnv, dir)
	for _, r := range runs {
		l.keepRun(1, r)
	}
	for name, want := range map[string][]string{
		"client2-run-001.log": {"# client2 run 1 through node1: ogpu job run --from client2\n", "ran 2s: exit status 1\n", runs[0].Stderr},
		"client2-run-002-job-39.log": {"# client2 run 2 through node3", "ran 1m30s: exit status 2\n",
			"# --- stderr (" + fmt.Sprint(len(crash)) + " bytes)\n" + crash + "\n# --- stdout (0 bytes)\n"},
		"client2-run-003-job-40.log": {"exit status 0", `{"Job":40,"Outcome":"verified"}`},
	} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s lacks %q:\n%s", name, w, b)
			}
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 3 {
		t.Errorf("%d files in %s, want 3", len(ents), dir)
	}
}
