package e2e

import "testing"

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
