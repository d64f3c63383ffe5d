// Package agent holds the off-chain actors of the market: the provider
// agent that bids on jobs and runs them, the client that posts a job and
// reads its answer, the session client that buys a session lease and pays
// its requests by vouchers, and the validator agent that re-checks disputed
// work. They meet on chain (jobs, bids, awards, results, redemptions) and
// over libp2p (prompts, token streams, session requests, outputs, models).
package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"

	"github.com/ogpu-network/ogpu/types"
)

// Runtime is the runtime name LLM providers register and jobs require.
const Runtime = "llama.cpp"

// MaxPromptBytes bounds an LLM job's prompt.
const MaxPromptBytes = 64 << 10

// LLMInput is an inference job's input blob; its sha256 is the job's
// Input hash, so the chain binds the prompt without storing it.
type LLMInput struct {
	Version int    `json:"version"`
	Prompt  string `json:"prompt"`
}

// Encode returns the canonical bytes.
func (in *LLMInput) Encode() []byte {
	bz, err := json.Marshal(in)
	if err != nil {
		panic(err) // two plain fields
	}
	return bz
}

// Hash is the content address of the encoding.
func (in *LLMInput) Hash() types.Hash { return sha256.Sum256(in.Encode()) }

// DecodeLLMInput parses an input blob, refusing anything that is not the
// canonical encoding of a version-1 input.
func DecodeLLMInput(bz []byte) (*LLMInput, error) {
	var in LLMInput
	if err := strictJSON(bz, &in); err != nil {
		return nil, fmt.Errorf("job input: %w", err)
	}
	switch {
	case in.Version != 1:
		return nil, fmt.Errorf("job input: version %d, this node reads version 1", in.Version)
	case in.Prompt == "":
		return nil, fmt.Errorf("job input: the prompt is empty")
	case len(in.Prompt) > MaxPromptBytes:
		return nil, fmt.Errorf("job input: prompt of %d bytes, at most %d", len(in.Prompt), MaxPromptBytes)
	case !bytes.Equal(in.Encode(), bz):
		return nil, fmt.Errorf("job input: not in canonical form")
	}
	return &in, nil
}

// LLMOutput is a provider's result blob for an inference job. Its sha256
// is the result hash committed on chain, so honest replicas (same tokens)
// commit the same hash and a validator can fetch the blob by that hash.
//
// It names the job's input (the prompt blob's hash), not the job id:
// whoever posts a job knows its input before the chain picks its id, so a
// validator can seal a canary's known answer at posting time without
// guessing the id it will get (version 1 named the id).
type LLMOutput struct {
	Version int        `json:"version"`
	Input   types.Hash `json:"input"`
	// Tokens are the generated token ids; the last is the end-of-generation
	// token if generation stopped on one.
	Tokens []int `json:"tokens"`
	// Text is the detokenized output (end-of-generation piece excluded).
	Text string `json:"text"`
}

// LLMOutputVersion is the output format this node writes and reads.
const LLMOutputVersion = 2

// Encode returns the canonical bytes.
func (o *LLMOutput) Encode() []byte {
	if o.Tokens == nil {
		o.Tokens = []int{}
	}
	bz, err := json.Marshal(o)
	if err != nil {
		panic(err)
	}
	return bz
}

// Hash is the result hash.
func (o *LLMOutput) Hash() types.Hash { return sha256.Sum256(o.Encode()) }

// DecodeLLMOutput parses a result blob in canonical form.
func DecodeLLMOutput(bz []byte) (*LLMOutput, error) {
	var o LLMOutput
	if err := strictJSON(bz, &o); err != nil {
		return nil, fmt.Errorf("job output: %w", err)
	}
	if o.Version != LLMOutputVersion {
		return nil, fmt.Errorf("job output: version %d, this node reads version %d", o.Version, LLMOutputVersion)
	}
	if !bytes.Equal(o.Encode(), bz) {
		return nil, fmt.Errorf("job output: not in canonical form")
	}
	return &o, nil
}

func strictJSON(bz []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(bz))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data")
	}
	return nil
}
