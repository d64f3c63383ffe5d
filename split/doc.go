// Package split carries the hand-offs of split inference (issue 12): one
// LLM run as a pipeline of K layer ranges ("stages") on different
// providers, in r replica chains, with the client feeding every chain in
// lockstep. It knows nothing of llama.cpp: a stage computes through the
// Forwarder interface, which runtime/llm implements.
//
// # Frames
//
// Everything that crosses a stage boundary is a binary frame (frame.go):
// a fixed 36-byte little-endian header (kind, sender stage, job, step,
// pos0, n, n_embd, flags), the payload (n·n_embd f32 residual rows,
// n int32 tokens, or an error message) and the sender's 65-byte
// signature. Decode refuses, before any model sees it, a frame whose size
// disagrees with its header, a width other than the model's, a non-finite
// value, a token outside the vocabulary, a position beyond the context,
// unknown flags or trailing bytes. The header gives the frame's length,
// so a stream reader checks it against the link's limits before it
// allocates anything.
//
// The replica chain is not in the frame: the signature binds it and the
// stream names it once. Equal computations in two chains thus give equal
// frames and equal running hashes, which the chain's divergence rule
// compares.
//
// # Signed running hashes
//
// The frames of one link (job, replica chain, sending stage) form a
// transcript. Its running hash is
//
//	Hrun_0 = zero
//	Hrun_t = sha256("ogpu/act/run/v1" | Hrun_{t-1} | sha256(frame t without its signature))
//
// and frame t is signed over market.HandoffDigest(chainID, job, chain,
// stage, t, Hrun_t). A Sender seals frames; a Receiver checks the step
// (previous + 1: no replay, no gap), the positions (each data frame starts
// where the previous ended; FlagReset restarts a session at 0), the job
// and sending stage named in the header, and that the signature recovers
// to the link's sender; the digest covers the replica chain, so a frame
// of another chain fails (P3: only stage s of the same replica chain
// feeds stage s+1). The
// receiver keeps the running hash, the last signature (Evidence: the
// proof, for MsgProveHandoff, of what it received) and the transcript
// itself, bounded by the job's context, to publish for a dispute or a
// replacement's replay (VerifyTranscript checks one).
//
// The client signs what it feeds stage 0 (stage market.ClientStage), every
// stage signs what it sends on, and the last stage signs the tokens it
// sends straight to the client. A stage sends exactly one frame for each
// frame it receives (rows for rows; at the last stage a token for rows,
// for every prefill chunk too; close for close; an error for an error),
// so its commitment is Commitment{T, Hin, Hout} with one T.
//
// # Transport
//
// Protocol "/ogpu/split/1" (transport.go): the sender opens one
// long-lived libp2p stream per link to the receiver, names the replica
// chain in a 6-byte preamble and writes frames back to back. The
// receiver's Server routes a stream by the link its preamble and first
// frame name, asks the caller's Authorize whether the remote peer
// may send on that link and who must sign it, and then checks every frame
// with a Receiver under a per-frame deadline. A frame that fails is
// refused: the receiver writes one refusal message back (a 2-byte length
// and the reason), closes the stream, and, where the peer was authorized,
// ends the link with that error (a signed bad frame is the sender's
// provable fault).
//
// # Stages and the client
//
// A Stage (stage.go) receives its upstream's frames, calls its Forwarder
// and sends the result downstream. The client's Generate (client.go)
// drives r chains in lockstep: it sends the prompt in chunks to stage 0 of
// every chain, collects every chain's token for every frame, halts at the
// first step on which the chains disagree, and otherwise feeds the agreed
// token to every chain. Under lockstep every chain's stage-0 input is the
// same, so the chain's divergence rule ("the first stage whose outputs
// differ on equal inputs") is well defined.
//
// Split inference is not confidential: every stage, replacement and
// dispute validator can read the prompt and the output.
package split
