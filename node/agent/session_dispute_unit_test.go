package agent

import (
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/session"
)

// An accuser that serves data other than what the signed objects bind
// (another prompt, another output, an output for a receipt that has none,
// an oversized one) gets a no-data vote, never a conviction: the
// validator checks every hash before it judges.
func TestDisputeDataMustMatchTheSignedObjects(t *testing.T) {
	prompt, out := "Once upon a time", " there was a cat"
	d := &chain.DisputeView{Dispute: &session.Dispute{
		Requests: []session.SignedRequest{{Request: session.Request{Seq: 1, Prompt: sha256.Sum256([]byte(prompt)), MaxTokens: 4}}},
		Receipts: []session.SignedReceipt{{Receipt: session.Receipt{Seq: 1, Output: sha256.Sum256([]byte(out))}}},
	}}
	good := &DisputeData{Prompt: prompt, Outputs: []DisputeOutput{{Tokens: []int{1, 2, 3}, Text: out}}}
	if err := checkDisputeData(d, good); err != nil {
		t.Fatalf("matching data refused: %v", err)
	}
	for name, c := range map[string]struct {
		data *DisputeData
		want string
	}{
		"another prompt":   {&DisputeData{Prompt: "Once upon a dog", Outputs: good.Outputs}, "prompt"},
		"another output":   {&DisputeData{Prompt: prompt, Outputs: []DisputeOutput{{Tokens: []int{1}, Text: " a dog"}}}, "output 0"},
		"too many outputs": {&DisputeData{Prompt: prompt, Outputs: append(good.Outputs, good.Outputs...)}, "2 outputs for 1 receipts"},
		"no prompt":        {&DisputeData{Outputs: good.Outputs}, "prompt is 0 bytes"},
		"past max_tokens":  {&DisputeData{Prompt: prompt, Outputs: []DisputeOutput{{Tokens: []int{1, 2, 3, 4, 5}, Text: out}}}, "larger than its request"},
	} {
		if err := checkDisputeData(d, c.data); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", name, err, c.want)
		}
	}
}
