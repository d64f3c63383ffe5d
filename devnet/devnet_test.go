package devnet

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ogpu-network/ogpu/node/agent"
)

// TestDevnet runs the devnet's two LLM rounds end to end: a real in-process
// CometBFT chain, real libp2p hosts on loopback, real llama.cpp on the real
// stories260K model. Round 1 settles on the agreed output; in round 2 the
// lying provider's output differs from the validator's re-generation and it
// is slashed, and the client still gets the verified text.
func TestDevnet(t *testing.T) {
	if _, err := agent.FindModel(); err != nil {
		t.Fatalf("the devnet needs the shared model: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
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
	if r1.Outcome != "agreed" || r2.Outcome != "verdict" {
		t.Errorf("outcomes %q, %q; want agreed, verdict", r1.Outcome, r2.Outcome)
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
	if c := rep.Canary; c == nil || c.Outcome != "agreed" || c.Claimed || c.Result != c.Answer {
		t.Errorf("canary: %+v; want one, agreed on its known answer, not revealed", c)
	}
	if !strings.Contains(out.String(), "-- a client job and a job posted by the validator agent") {
		t.Error("the devnet did not print the canary and the client job side by side")
	}
	// Round 3: the encrypted 3-stage job, decrypted by the client, equals
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
	if strings.Contains(out.String(), "!= the cap") || strings.Count(out.String(), "= the cap") < 5 {
		t.Error("the supply check did not hold at every step")
	}
}
