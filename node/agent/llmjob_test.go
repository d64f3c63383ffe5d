package agent

import (
	"strings"
	"testing"

	"github.com/ogpu-network/ogpu/types"
)

func TestLLMInputCodec(t *testing.T) {
	in := &LLMInput{Version: 1, Prompt: "Once upon a time"}
	got, err := DecodeLLMInput(in.Encode())
	if err != nil || got.Prompt != in.Prompt {
		t.Fatalf("round trip: %v %+v", err, got)
	}
	for _, c := range []struct{ bz, want string }{
		{``, "EOF"},
		{`{"version":1,"prompt":"x"} {}`, "trailing data"},
		{`{"version":2,"prompt":"x"}`, "version 2"},
		{`{"version":1,"prompt":""}`, "prompt is empty"},
		{`{"version":1,"prompt":"x","extra":1}`, "unknown field"},
		{`{"prompt":"x","version":1}`, "not in canonical form"},
		{`{"version":1,"prompt":"` + strings.Repeat("a", MaxPromptBytes+1) + `"}`, "at most"},
		{"{\"version\":1,\"prompt\":\"\xff\"}", "canonical form"}, // the decoder turns \xff into U+FFFD
	} {
		if _, err := DecodeLLMInput([]byte(c.bz)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.40q: %v, want %q", c.bz, err, c.want)
		}
	}
}

func TestLLMOutputCodec(t *testing.T) {
	in := types.Hash{7}
	o := &LLMOutput{Version: LLMOutputVersion, Input: in, Tokens: []int{1, 2, 3}, Text: "a b"}
	got, err := DecodeLLMOutput(o.Encode())
	if err != nil || got.Input != in || len(got.Tokens) != 3 {
		t.Fatalf("round trip: %v %+v", err, got)
	}
	if o.Hash() != (&LLMOutput{Version: LLMOutputVersion, Input: in, Tokens: []int{1, 2, 3}, Text: "a b"}).Hash() {
		t.Fatal("equal outputs hash differently")
	}
	if o.Hash() == (&LLMOutput{Version: LLMOutputVersion, Input: in, Tokens: []int{1, 2, 4}, Text: "a b"}).Hash() {
		t.Fatal("a changed token keeps the hash")
	}
	for _, bz := range []string{`{"version":1,"job":7,"tokens":[1],"text":"a"}`, `{"version":2,"input":"0x0700000000000000000000000000000000000000000000000000000000000000","tokens":[1],"text":"a","x":1}`, `{"version":3}`, `[]`} {
		if _, err := DecodeLLMOutput([]byte(bz)); err == nil {
			t.Errorf("%s decoded", bz)
		}
	}
}

// TestFeed: a listener that joins late sees every message from the start,
// and nothing is accepted after the end.
func TestFeed(t *testing.T) {
	f := newFeed()
	one, two := 1, 2
	f.push(streamMsg{Token: &one, Piece: "a"})
	msgs, done, changed := f.from(0)
	if len(msgs) != 1 || done {
		t.Fatalf("%v %v", msgs, done)
	}
	f.push(streamMsg{Token: &two, Piece: "b"})
	select {
	case <-changed:
	default:
		t.Fatal("no change signalled")
	}
	f.push(streamMsg{Done: true})
	f.push(streamMsg{Piece: "late"})
	msgs, done, _ = f.from(1)
	if len(msgs) != 2 || !done || msgs[0].Piece != "b" {
		t.Fatalf("%+v %v", msgs, done)
	}
}
