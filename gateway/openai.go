package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/types"
)

// The OpenAI wire types the gateway reads and writes, modelled on ollama
// v0.9.6 openai/openai.go (not imported: it pulls in gin). Sampling
// parameters stay raw JSON: they are accepted and ignored, never parsed
// into floats.

// SystemFingerprint names the decoding every answer used.
const SystemFingerprint = "ogpu-greedy"

// ignoredParams are accepted and ignored: decoding is greedy.
var ignoredParams = []string{"temperature", "top_p", "seed", "presence_penalty", "frequency_penalty"}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// common are the fields chat and text completions share.
type common struct {
	Model               string          `json:"model"`
	Stream              bool            `json:"stream"`
	StreamOptions       *streamOptions  `json:"stream_options"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	Stop                stopList        `json:"stop"`
	N                   *int64          `json:"n"`
	LogitBias           json.RawMessage `json:"logit_bias"`
	User                string          `json:"user"`
	// Accepted, ignored (greedy decoding).
	Temperature      json.RawMessage `json:"temperature"`
	TopP             json.RawMessage `json:"top_p"`
	Seed             json.RawMessage `json:"seed"`
	PresencePenalty  json.RawMessage `json:"presence_penalty"`
	FrequencyPenalty json.RawMessage `json:"frequency_penalty"`
}

type chatRequest struct {
	common
	Messages          []chatMessage   `json:"messages"`
	Tools             json.RawMessage `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	Functions         json.RawMessage `json:"functions"`
	FunctionCall      json.RawMessage `json:"function_call"`
	ParallelToolCalls json.RawMessage `json:"parallel_tool_calls"`
	ResponseFormat    *struct {
		Type string `json:"type"`
	} `json:"response_format"`
	Logprobs    *bool           `json:"logprobs"`
	TopLogprobs json.RawMessage `json:"top_logprobs"`
	Audio       json.RawMessage `json:"audio"`
	Modalities  json.RawMessage `json:"modalities"`
}

type completionRequest struct {
	common
	Prompt   json.RawMessage `json:"prompt"`
	Suffix   *string         `json:"suffix"`
	Echo     bool            `json:"echo"`
	BestOf   *int64          `json:"best_of"`
	Logprobs json.RawMessage `json:"logprobs"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    messageContent  `json:"content"`
	Name       string          `json:"name"`
	ToolCalls  json.RawMessage `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

// messageContent is a string, or an array of parts of which only text
// parts are supported.
type messageContent struct {
	Text string
	// Unsupported names the first part that is not text ("" if none).
	Unsupported string
}

func (c *messageContent) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &c.Text)
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return fmt.Errorf("content: want a string or an array of {\"type\":\"text\",\"text\":...} parts")
	}
	var sb strings.Builder
	for _, p := range parts {
		if p.Type != "text" || p.Text == nil {
			if c.Unsupported == "" {
				c.Unsupported = p.Type
			}
			continue
		}
		sb.WriteString(*p.Text)
	}
	c.Text = sb.String()
	return nil
}

// stopList is a string or an array of strings.
type stopList []string

func (s *stopList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*s = stopList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("stop: want a string or an array of strings")
	}
	*s = many
	return nil
}

// ---- answers ----

type usage struct {
	PromptTokens     uint64 `json:"prompt_tokens"`
	CompletionTokens uint64 `json:"completion_tokens"`
	TotalTokens      uint64 `json:"total_tokens"`
	// Cost is what the request cost in oGPU (OpenRouter's field): the
	// receipt's charged amount, exact in decimal.
	Cost json.Number `json:"cost"`
}

// ogpuInfo is the extension object of every answer: what ran, what it
// cost, whether it is verified.
type ogpuInfo struct {
	Receipt
	// Amounts in oGPU (decimal strings), beside the base units above.
	ChargedOGPU string `json:"charged_ogpu"`
	PriceOGPU   string `json:"unit_price_ogpu"`
	MaxCharge   string `json:"max_charge_ogpu"`
	Verified    bool   `json:"verified"`
	// Overruled: the streamed provider lost (streams only).
	Overruled bool `json:"overruled,omitempty"`
	// Decoding is "greedy"; IgnoredParameters lists the sampling
	// parameters the request set that greedy decoding ignored.
	Decoding          string   `json:"decoding"`
	IgnoredParameters []string `json:"ignored_parameters,omitempty"`
	// Template is how the chat was rendered (chat completions).
	Template string `json:"template,omitempty"`
	// PromptTokensEstimated: the gateway had no tokenizer for the model
	// and declared an upper bound.
	PromptTokensEstimated bool `json:"prompt_tokens_estimated,omitempty"`
}

// choice is a chat choice (Message or Delta set) or a text completion
// choice (Text set).
type choice struct {
	Index        int       `json:"index"`
	Message      *chatOut  `json:"message,omitempty"`
	Delta        *chatOut  `json:"delta,omitempty"`
	Text         *string   `json:"text,omitempty"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type chatOut struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

type completionAnswer struct {
	ID                string    `json:"id"`
	Object            string    `json:"object"`
	Created           int64     `json:"created"`
	Model             string    `json:"model"`
	SystemFingerprint string    `json:"system_fingerprint"`
	Choices           []choice  `json:"choices"`
	Usage             *usage    `json:"usage,omitempty"`
	Ogpu              *ogpuInfo `json:"ogpu,omitempty"`
}

type modelEntry struct {
	ID            string    `json:"id"`
	Object        string    `json:"object"`
	Created       int64     `json:"created"`
	OwnedBy       string    `json:"owned_by"`
	ContextLength uint64    `json:"context_length"`
	Ogpu          modelOgpu `json:"ogpu"`
}

type modelOgpu struct {
	Hash      string   `json:"hash"`
	Names     []string `json:"names,omitempty"`
	Name      string   `json:"general_name,omitempty"`
	Providers int      `json:"providers"`
	Template  string   `json:"template"`
}

type modelList struct {
	Object string       `json:"object"`
	Data   []modelEntry `json:"data"`
}

// ogpuAmount is a in oGPU as a decimal string ("0.25").
func ogpuAmount(a *uint256.Int) string {
	return strings.TrimSuffix(types.FormatAmount(a), types.Denom)
}

func strp(s string) *string { return &s }
