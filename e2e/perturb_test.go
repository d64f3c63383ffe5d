package e2e

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node/agent"
)

// RequireModelEnv makes the process tests fail, not skip, when the shared
// model is missing (make test sets it).
const RequireModelEnv = "OGPU_REQUIRE_MODEL"

func requireModel(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a 4-validator testnet, 3 providers and a job load as processes (minutes): not under -short")
	}
	model, err := agent.FindModel()
	if err != nil {
		if os.Getenv(RequireModelEnv) == "1" {
			t.Fatalf("the perturbation suite needs the shared model (%s=1): %v", RequireModelEnv, err)
		}
		t.Skipf("the perturbation suite needs the shared model: %v (set %s=1 to fail instead)", err, RequireModelEnv)
	}
	return model
}

// TestPerturbationShort applies each perturbation once, every validator
// perturbed, while clients post LLM and encrypted pipeline jobs, and
// checks the invariants after each and at the end: headers (app hashes)
// agree at every height on every node, the supply adds up to the cap, no
// honest provider or validator is slashed, perturbed nodes catch up, spam
// at the minimum fee is all committed, and every job posted ends (settled,
// refunded, or disputed and decided); at least one job of each kind
// settles and every verified pipeline result decrypts to the plaintext
// model's class.
func TestPerturbationShort(t *testing.T) {
	model := requireModel(t)
	begin := time.Now()
	n := Start(t, model, Options{})
	t.Logf("%.0fs: 4 validators and %d providers up", time.Since(begin).Seconds(), len(n.Provs))
	n.Check("start")
	load := n.StartLoad(2, 6)

	n.Spam(600, 2*time.Minute)
	n.Check("spam")
	if p := n.KillProviderMidJob(2 * time.Minute); p != nil {
		n.Advance(2, time.Minute, 0, 1)
		n.RestartProvider(p)
		n.Check("provider kill and restart")
	} else {
		t.Fatal("no job reached a provider within 2 minutes: nothing to kill mid-job")
	}
	// Every validator once, node0 and node1 (the providers' and the
	// clients' nodes) too: kill -9 of node0 exercises the agents' retries
	// while their node is down (docs/benchmarks.md "What the suite
	// found", 1 and 2, fixed).
	n.KillRestartValidator(0)
	n.Check("validator kill -9 and restart")
	n.PauseValidator(1)
	n.Check("SIGSTOP/SIGCONT")
	n.PartitionValidator(2)
	n.Check("partition and heal")
	n.KillRestartValidator(3)
	n.Check("validator kill -9 and restart")

	load.Stop()
	tally := n.WaitJobsEnded(3 * time.Minute)
	n.Check("the end")
	t.Logf("%.0fs: %s", time.Since(begin).Seconds(), n.Summary(load, tally))
	for i, k := range n.AppliedOn() {
		if k == 0 {
			t.Errorf("node%d was never perturbed", i)
		}
	}
	if llm, pl := tally.ByKind[market.KindInference], tally.ByKind[market.KindPipeline]; llm == nil || llm.Settled == 0 || pl == nil || pl.Settled == 0 {
		t.Fatalf("the load did no work: LLM jobs %v, pipeline jobs %v", llm, pl)
	}
	for _, r := range load.Results() {
		if r.Err != "" {
			t.Errorf("%s: ogpu job run failed: %s", r.Client, r.Err)
		}
	}
}

// TestSoak cycles the perturbations for OGPU_SOAK (e.g. 30m; make soak)
// under a continuous job load and prints the summary. Skipped without
// OGPU_SOAK. A violation fails it but the soak goes on (Net.KeepGoing);
// OGPU_E2E_LOGS=DIR keeps the process logs of a failed run, and every
// client run's output (clientN-run-NNN-job-J.log).
func TestSoak(t *testing.T) {
	d := os.Getenv("OGPU_SOAK")
	if d == "" {
		t.Skip("set OGPU_SOAK=30m (make soak) to run the soak")
	}
	dur, err := time.ParseDuration(d)
	if err != nil || dur <= 0 {
		t.Fatalf("OGPU_SOAK=%q: want a duration such as 30m", d)
	}
	model := requireModel(t)
	begin := time.Now()
	n := Start(t, model, Options{})
	n.KeepGoing = true // findings are reported and the soak goes on
	n.Check("start")
	load := n.StartLoad(2, 100_000) // bounded by the duration in practice
	// The validator perturbations take node0, node1, node2, node3 in
	// turn: over 4 cycles of the 5 steps every kind hits every validator.
	v := 0
	val := func() int { v++; return (v - 1) % Validators }
	steps := []func(){
		func() { n.Spam(1000, 3*time.Minute); n.Check("spam") },
		func() { n.KillRestartValidator(val()); n.Check("validator kill -9 and restart") },
		func() {
			if p := n.KillProviderMidJob(2 * time.Minute); p != nil {
				n.Advance(2, time.Minute, 0, 1)
				n.RestartProvider(p)
				n.Check("provider kill and restart")
			}
		},
		func() { n.PartitionValidator(val()); n.Check("partition and heal") },
		func() { n.PauseValidator(val()); n.Check("SIGSTOP/SIGCONT") },
	}
	for k := 0; time.Since(begin) < dur; k++ {
		steps[k%len(steps)]()
		n.Advance(5, time.Minute, 0, 1, 2, 3) // a quiet spell: the load runs unperturbed
	}
	load.Stop()
	tally := n.WaitJobsEnded(5 * time.Minute)
	n.Check("the end")
	summary := n.Summary(load, tally)
	fmt.Printf("soak %s (OGPU_SOAK=%s):\n%s\n", time.Since(begin).Round(time.Second), d, summary)
	if llm, pl := tally.ByKind[market.KindInference], tally.ByKind[market.KindPipeline]; llm == nil || llm.Settled == 0 || pl == nil || pl.Settled == 0 {
		t.Fatalf("the load did no work: LLM jobs %v, pipeline jobs %v", llm, pl)
	}
	for _, r := range load.Results() {
		if r.Err != "" {
			t.Errorf("%s: ogpu job run failed: %s", r.Client, r.Err)
		}
	}
}

// Summary is the run's figures in a few lines.
func (n *Net) Summary(load *Load, t JobTally) string {
	var b strings.Builder
	failed := 0
	for _, r := range load.Results() {
		if r.Err != "" {
			failed++
		}
	}
	runs := map[string]int{}
	for _, r := range load.Results() {
		runs[r.Kind]++
	}
	fmt.Fprintf(&b, "jobs %s (client runs %d: %d LLM, %d pipeline; failed %d; retried unposted, their node down, %d)\n",
		&t.JobCounts, len(load.Results()), runs[market.KindInference], runs[market.KindPipeline], failed, load.Unposted())
	kinds := make([]string, 0, len(t.ByKind))
	for k := range t.ByKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Fprintf(&b, "  %s jobs %s\n", k, t.ByKind[k])
	}
	applied := n.Applied()
	kinds = kinds[:0]
	total := 0
	for k, v := range applied {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, v))
		total += v
	}
	sort.Strings(kinds)
	fmt.Fprintf(&b, "perturbations applied %d: %s\n", total, strings.Join(kinds, ", "))
	var on []string
	for i, k := range n.AppliedOn() {
		on = append(on, fmt.Sprintf("node%d %d", i, k))
	}
	fmt.Fprintf(&b, "validator perturbations by node: %s\n", strings.Join(on, ", "))
	n.mu.Lock()
	checks := n.checks
	n.mu.Unlock()
	s := n.scan
	fmt.Fprintf(&b, "blocks %d, max block time %s (height %d), max txs in a block %d\n", s.blocks, s.maxBlockTime.Round(time.Millisecond), s.maxBlockAt, s.maxTxs)
	fmt.Fprintf(&b, "invariant checks passed %d (app hashes at every height on 4 nodes, supply = cap, no honest slash, catch-up), findings %d; no-shows %d, slashes %d",
		checks, n.Findings(), len(s.noShows), len(s.slashes))
	return b.String()
}
