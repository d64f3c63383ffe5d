// Package gateway serves the oGPU market as an OpenAI-compatible HTTP API,
// so that existing OpenAI clients (the official SDKs, LiteLLM, chat UIs,
// curl) run verified inference on the network from one wallet account.
//
// Routes: GET /v1/models (the models at least one unjailed registered
// provider serves), POST /v1/chat/completions and POST /v1/completions
// (streaming as server-sent events, or not), GET /v1/ogpu/jobs/{id} (a
// job's state and verified text after the fact), GET /health.
//
// A request becomes work on the network through a Backend. SessionBackend
// (session mode, the default of ogpu gateway) keeps a warm session lease
// per model, bought by one auction and renewed ahead of time: requests go
// straight to the session's r providers over libp2p, paid by vouchers
// computed from the gateway's own token counts, with no transaction per
// request; the lanes' outputs are compared. JobBackend (job mode, and the
// session backend's fallback when no session can be opened) posts one
// on-chain LLM job per request through the client agent: it streams the
// first winner's tokens as they come and returns the text the chain
// verified.
//
// What the gateway does itself, whatever the backend:
//
//   - Chats are rendered into the raw prompt here (the model's GGUF
//     tokenizer.chat_template through llama.cpp, else plain concatenation),
//     so providers and validators see an ordinary prompt.
//   - Decoding is greedy: temperature, top_p, seed and the penalties are
//     accepted and ignored, and every answer says so (system_fingerprint
//     "ogpu-greedy", ogpu.ignored_parameters).
//   - A non-streaming answer holds only text the chain settled on. A
//     stream's tokens are provisional; if the streamed replica turns out
//     wrong the stream ends with an error event (result_overruled), since
//     an OpenAI stream cannot take text back.
//   - Every answer says what it cost: usage.cost (oGPU) and an ogpu object
//     (job, providers, price, charged, verified).
//
// What it must never do:
//
//   - Listen beyond loopback unless told to; answer a request without the
//     Bearer key, with a Host header not on the allow-list (DNS
//     rebinding), or with a body that is not JSON (a browser form would
//     skip the CORS preflight); send CORS headers nobody configured.
//   - Spend beyond its caps: a request whose worst case exceeds the
//     per-request cap or what is left of the day's budget is refused
//     before anything is posted; reservations are persisted before the
//     money moves, so a crash never forgets spending.
//   - Pay twice for one request: once a job is posted or a voucher signed
//     every error carries x-should-retry: false, and a retry of the same
//     request (the SDK's x-stainless-retry-count header, or the same
//     Idempotency-Key) joins the first attempt instead of paying again: one
//     job, or one seq on each session lane.
package gateway
