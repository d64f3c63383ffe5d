package devnet

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/session"
	"github.com/ogpu-network/ogpu/types"
)

// TestDevnet runs the devnet's rounds end to end: a real in-process
// CometBFT chain, real libp2p hosts on loopback, real llama.cpp on the real
// stories260K model. Round 1 settles on the agreed output, upheld by the
// audit every agreed task gets here; in round 2 the lying provider's
// output differs from the validator's re-generation and it is slashed,
// and the client still gets the verified text; in round 3 a cartel
// holding both slots reveals the same lie, a random audit drawn from the
// beacon catches it and both are slashed; in round 4 a lone bidder's
// result is audited before it is paid; round 5's encrypted pipeline
// decrypts to the plaintext model's output; in round 6 a split job prints
// the whole model's text while its lying stage-0 provider is caught,
// slashed and tombstoned; round 7 takes oGPU through the Ethereum bridge
// and back; round 8 posts through the web console, round 9 serves the
// gateway over a session with a liar, round 10 fine-tunes.
func TestDevnet(t *testing.T) {
	if _, err := agent.FindModel(); err != nil {
		t.Fatalf("the devnet needs the shared model: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var out bytes.Buffer
	rep, err := Run(ctx, &out, Options{Threads: 1})
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rounds) != 2 {
		t.Fatalf("%d rounds, want 2", len(rep.Rounds))
	}
	r1, r2 := rep.Rounds[0], rep.Rounds[1]
	// The devnet audits every agreed task (audit_rate_bps 10000): round
	// 1's two agreeing results are upheld by the audit.
	if r1.Outcome != market.OutcomeAudited || r2.Outcome != "verdict" {
		t.Errorf("outcomes %q, %q; want audited (agreed, then audited), verdict", r1.Outcome, r2.Outcome)
	}
	if !strings.Contains(out.String(), "audit_rate_bps 10000: the validators audit EVERY agreed task here, so that you can watch one (a network audits 1 in 20: 500)") {
		t.Error("the devnet did not say that it audits every agreed task, and what a network audits")
	}
	if !strings.Contains(r1.Text, "Lily") {
		t.Errorf("round 1 text %q is not the model's greedy TinyStories answer", r1.Text)
	}
	if r2.Text != r1.Text {
		t.Errorf("round 2 settled on %q, want round 1's text", r2.Text)
	}
	if !rep.LiarSlashed || r2.Compensated.IsZero() {
		t.Errorf("liar slashed %v, client compensated %s", rep.LiarSlashed, r2.Compensated)
	}
	// The canary the validator agent posted during round 1 looked like
	// alice's job and settled on its known answer without being revealed.
	if c := rep.Canary; c == nil || c.Outcome != market.OutcomeAudited || c.Claimed || c.Result != c.Answer {
		t.Errorf("canary: %+v; want one, audited on its known answer, not revealed", c)
	}
	// Round 3: prov10 and prov11, a cartel, held both slots and revealed
	// the same wrong result; the random audit drawn from the beacon
	// re-executed the task, and both were slashed at least the deterrence
	// floor and tombstoned while alice was compensated and paid nobody.
	ct := rep.Cartel
	if ct == nil || ct.Result == nil || len(ct.Members) != 2 || len(ct.Slashed) != 2 {
		t.Fatalf("cartel round: %+v", ct)
	}
	if ct.Result.Outcome != "verdict" || ct.Audit != "random" || ct.DrawAt == 0 || ct.Draw >= 10_000 ||
		ct.Verdict == ct.Revealed || ct.Verdict != r1.Result {
		t.Errorf("cartel job settled %q (audit %q, drawn at beacon height %d: %d), verdict %x, the cartel's %x, round 1's %x; want a verdict on round 1's result by a random audit",
			ct.Result.Outcome, ct.Audit, ct.DrawAt, ct.Draw, ct.Verdict[:6], ct.Revealed[:6], r1.Result[:6])
	}
	for i, s := range ct.Slashed {
		// The fraud slash: 50% of the 200ogpu stake, at least 20 × the price.
		if !s.Eq(types.OGPU(100)) || !ct.Tombstoned[i] {
			t.Errorf("cartel member %d slashed %s, tombstoned %v; want 100ogpu (50%% of its stake) and tombstoned", i, types.FormatAmount(s), ct.Tombstoned[i])
		}
	}
	if ct.Compensated == nil || !ct.Compensated.Eq(types.OGPU(100)) || (ct.Result.Paid != nil && !ct.Result.Paid.IsZero()) {
		t.Errorf("alice compensated %v, providers paid %v; want 100ogpu (half of each slash) and nobody paid", ct.Compensated, ct.Result.Paid)
	}
	for _, want := range []string{"awarded to the cartel: prov10 and prov11 hold both slots", "both revealed the same result", "drawn for an audit from the beacon value of height",
		"the validator re-executed it and voted", "prov10 slashed 100ogpu", "prov11 slashed 100ogpu", "compensated 100ogpu"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the cartel round did not print %q", want)
		}
	}
	// Round 4: a job only prov12 could take ran on its one slot and was
	// audited before it was paid, never agreed.
	lb := rep.Lone
	if lb == nil || lb.Result == nil || lb.Result.Outcome != market.OutcomeAudited || lb.Audit != "short" || lb.Short != market.ShortAudit || lb.Slots != 1 ||
		lb.Result.Text != r1.Text || lb.Result.Paid == nil || lb.Result.Paid.IsZero() {
		t.Fatalf("lone-bidder round: %+v (result %+v); want one slot, short, audited, paid, round 1's text", lb, lb.Result)
	}
	if !strings.Contains(out.String(), "fewer than r providers: audited, not agreed") {
		t.Error("the lone-bidder round did not say it was audited, not agreed")
	}
	if !strings.Contains(out.String(), "-- a client job and a job posted by the validator agent") {
		t.Error("the devnet did not print the canary and the client job side by side")
	}
	// Round 5: the encrypted 3-stage job, decrypted by the client, equals
	// the plaintext model's output.
	p := rep.Pipeline
	if p == nil || p.Outcome != "verified" || len(p.Stages) != 3 {
		t.Fatalf("pipeline round: %+v", p)
	}
	for i := range rep.Plaintext {
		if d := math.Abs(p.Output[i] - rep.Plaintext[i]); d > 1e-3 {
			t.Errorf("output %d: decrypted %v, plaintext %v", i, p.Output[i], rep.Plaintext[i])
		}
	}
	if !strings.Contains(out.String(), "decrypted by alice") || !strings.Contains(out.String(), "plaintext model:") {
		t.Error("the devnet did not print the decrypted and plaintext results")
	}
	// Round 6: the split job printed the whole model's text; stage 0, where
	// prov5 nudged its residuals, settled by the validator's re-execution;
	// prov5 is tombstoned; the honest stage 1 of its chain was paid.
	sp := rep.Split
	if sp == nil || sp.Result == nil {
		t.Fatalf("split round: %+v", sp)
	}
	if sp.Result.Text != sp.Whole || !strings.Contains(sp.Whole, "Lily") {
		t.Errorf("split text %q, whole model's %q", sp.Result.Text, sp.Whole)
	}
	if len(sp.Result.Outcomes) != 2 || sp.Result.Outcomes[0] != "verdict" || sp.Result.Outcomes[1] != "audited" {
		t.Errorf("split stages settled %v, want stage 0 verdict, stage 1 audited (its honest chain's slot, alone)", sp.Result.Outcomes)
	}
	if !sp.LiarTombstoned {
		t.Error("the lying stage-0 provider is not tombstoned")
	}
	if sp.Downstream == sp.Liar || sp.DownstreamOutcome != "downstream_of_loser" || (sp.DownstreamPaid != nil && !sp.DownstreamPaid.IsZero()) {
		t.Errorf("the liar's downstream %s: settled %q, paid %v; want downstream_of_loser, unpaid (review 2's M-L2)",
			sp.Downstream.Hex(), sp.DownstreamOutcome, sp.DownstreamPaid)
	}
	if !strings.Contains(out.String(), "split inference is NOT confidential") || !strings.Contains(out.String(), "split_diverged: stage 0") {
		t.Error("the split round did not say it is not confidential, or did not print the divergence")
	}
	// Round 7: the bridge. carol, with nothing on the app-chain, was
	// credited exactly the deposit, paid a job with it, and her withdrawal
	// was paid on Ethereum; the two chains' books agree.
	br := rep.Bridge
	if br == nil || br.Credited == nil || !br.Credited.Eq(types.OGPU(50)) {
		t.Fatalf("bridge round: %+v", br)
	}
	if br.Job == nil || br.Job.Paid == nil || br.Job.Paid.IsZero() {
		t.Errorf("the job paid with bridged oGPU: %+v", br.Job)
	}
	if !br.PaidOnEthereum.Eq(types.OGPU(20)) || !br.Locked.Eq(br.OnEthereum) {
		t.Errorf("paid on Ethereum %s; locked %s, the app-chain says %s", br.PaidOnEthereum, br.Locked, br.OnEthereum)
	}
	// Round 8: a job posted through the web console's form (token
	// exchanged for its cookie first; refused without it) settled and is
	// listed on alice's page.
	if c := rep.Console; c == nil || c.State != "completed" || c.Paid == nil || c.Paid.IsZero() || !c.Listed || c.Prov1Earned == "" || c.Prov1Earned == "0ogpu" {
		t.Fatalf("console round: %+v", c)
	}
	if !strings.Contains(out.String(), "a post without the console token: 401") || !strings.Contains(out.String(), "console: open http://127.0.0.1:") {
		t.Error("the devnet did not print the console's URL or the refused post")
	}
	// Round 9: the gateway answered over one session with no transaction
	// between answers, and the liar in it was slashed by the dispute.
	gw := rep.Gateway
	if gw == nil || len(gw.Answers) != 3 || gw.Txs != 0 || gw.Dispute == nil {
		t.Fatalf("gateway round: %+v", gw)
	}
	if gw.Dispute.Status != session.DisputeDecided || gw.Dispute.Slashed.IsZero() {
		t.Errorf("the session dispute: %s, slashed %s", gw.Dispute.Status, gw.Dispute.Slashed)
	}
	for i, r := range gw.Dispute.Receipts {
		if wrong := gw.Dispute.Verdict&(1<<i) != 0; wrong != (r.Receipt.Provider == gw.Liar) {
			t.Errorf("receipt %d of %s judged wrong=%v (the liar is %s)", i, r.Receipt.Provider, wrong, gw.Liar)
		}
	}
	// Round 10: two providers agreed on alice's fine-tune, and the model
	// learned her phrase; a provider that perturbed one step was located
	// at that step by bisection and slashed.
	ft := rep.Finetune
	if ft == nil || ft.Agreed == nil || ft.Agreed.Outcome != "agreed" || !strings.Contains(ft.After, "Ziggy") || strings.Contains(ft.Before, "Ziggy") {
		t.Fatalf("fine-tune round: %+v", ft)
	}
	if ft.Liar == nil || ft.Liar.Outcome != "game" || ft.Game == nil || ft.Game.Hi != ft.LieAt || !ft.LiarSlashed || ft.Liar.Final == (types.Hash{}) {
		t.Fatalf("fine-tune liar: %+v, game %+v", ft.Liar, ft.Game)
	}
	// The devnet's /metrics moved with the rounds: jobs, bids and awards
	// grow, the liars' slashes and the session are counted.
	if len(rep.Metrics) != 10 {
		t.Fatalf("metrics after %d rounds, want 10", len(rep.Metrics))
	}
	first, last := rep.Metrics[0], rep.Metrics[9]
	for _, f := range []string{"ogpu_app_jobs_posted_total", "ogpu_app_bids_total", "ogpu_app_awards_total", "ogpu_app_height"} {
		if first[f] <= 0 || last[f] <= first[f] {
			t.Errorf("%s: %g after round 1, %g after round 10: want it positive and growing", f, first[f], last[f])
		}
	}
	// Blocks are timed and auctions closed; the agents moved blobs; the
	// state series read the chain at every block.
	for _, f := range []string{"ogpu_app_finalize_block_seconds_count", "ogpu_app_auctions_closed_total"} {
		if first[f] <= 0 || last[f] <= first[f] {
			t.Errorf("%s: %g after round 1, %g after round 10: want it positive and growing", f, first[f], last[f])
		}
	}
	if last["ogpu_blob_bytes_total"] <= 0 || last["ogpu_app_bonded_ogpu"] <= 0 || last["ogpu_app_state_query_errors_total"] != 0 {
		t.Errorf("blob bytes %g, bonded %g oGPU, %g failed /stats queries", last["ogpu_blob_bytes_total"], last["ogpu_app_bonded_ogpu"], last["ogpu_app_state_query_errors_total"])
	}
	if last["ogpu_app_slashes_total"] < 5 || last["ogpu_app_sessions_opened_total"] < 1 {
		t.Errorf("slashes %g (five liars), sessions %g", last["ogpu_app_slashes_total"], last["ogpu_app_sessions_opened_total"])
	}
	if strings.Contains(out.String(), "!= the cap") || strings.Count(out.String(), "= the cap") < 11 {
		t.Error("the supply check did not hold at every step")
	}
}
