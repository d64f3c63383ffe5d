package split

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/types"
)

// ClientConfig configures a client's split generation.
type ClientConfig struct {
	Job uint64
	// Key is the client's account key; it signs stage 0's input.
	Key *ecdsa.PrivateKey
	// Stages is the job's K.
	Stages uint16
	// First lists, per replica chain, the provider of stage 0. Its
	// length is the number of chains r (lockstep compares them when
	// r ≥ 2).
	First []peer.ID
	// Limits: Context (prompt and generated tokens together), MaxRows
	// (the prefill chunk), Vocab.
	Limits Limits
	// MaxTokens is the most tokens generated (≥ 1).
	MaxTokens int
	// End reports whether a token ends generation (it is kept, as the
	// whole-model Generate keeps its end-of-generation token); nil: none
	// does.
	End func(token int32) bool
	// OnToken receives each agreed token as it comes; may be nil.
	OnToken func(token int32)
	// WriteTimeout bounds sending one frame (DefaultFrameTimeout if 0).
	WriteTimeout time.Duration
	// Recover, if set, is asked when replica chain j fails (a stage died:
	// its link broke or timed out). It may replace the dead stage (the
	// chain's order, market.MsgReplaceStage) and return the chain's stage-0
	// peer (new if stage 0 was replaced) once the chain is ready again;
	// the generation then restarts chain j from position 0 with every
	// frame sent so far (bit-identical, so every stage's transcript ends
	// as if nothing had failed and the replacement rebuilds its KV cache),
	// checks that the replayed tokens are the ones already agreed, and
	// goes on in lockstep: the client sees a pause. ok false fails the
	// generation with err. At most MaxRecoveries per generation.
	Recover func(ctx context.Context, chain int, err error) (first peer.ID, ok bool)
	// StepTimeout bounds the wait for one chain's token of a step
	// (DefaultStepTimeout if 0): a chain whose stage died mid-step sends
	// nothing, and only this notices it. Passing it is ErrTimeout for
	// that chain (then Recover).
	StepTimeout time.Duration
}

// DefaultStepTimeout: see ClientConfig.StepTimeout.
const DefaultStepTimeout = 2 * time.Minute

// MaxRecoveries bounds the chain restarts of one generation (the chain
// allows market.MaxSplitReplacements replacements per job).
const MaxRecoveries = 4

// chainError is a failure of one replica chain.
type chainError struct {
	chain int
	err   error
}

func (e *chainError) Error() string { return fmt.Sprintf("chain %d: %v", e.chain, e.err) }
func (e *chainError) Unwrap() error { return e.err }

// Divergence is where replica chains first disagreed: on the token frame
// of Step (the same step as the client's input frame it answers), for
// the token at position Pos. Tokens[j] is chain j's token.
type Divergence struct {
	Step   uint32
	Pos    uint32
	Tokens []int32
}

func (d *Divergence) Error() string {
	return fmt.Sprintf("replica chains disagree at step %d (position %d): tokens %v", d.Step, d.Pos, d.Tokens)
}

// ChainRecord is what the client keeps of one replica chain: what it
// sent to stage 0 (T frames, running hash Hout) and the last stage's
// signature over the tokens it sent back.
type ChainRecord struct {
	SentSteps uint32
	SentRun   types.Hash
	Received  Evidence
}

// Result is a split generation's outcome.
type Result struct {
	// Tokens are the generated tokens all chains agreed on.
	Tokens []int32
	// Divergence is set when the chains disagreed: generation halted
	// there (Tokens holds the agreed prefix).
	Divergence *Divergence
	// Chains holds the client's records, one per replica chain.
	Chains []ChainRecord
}

// Generate runs prompt through every replica chain in lockstep: it sends
// the prompt in chunks of Limits.MaxRows to stage 0 of every chain
// (the first chunk resets the session), takes each chain's token for
// every chunk, and then feeds the agreed token back to every chain until
// MaxTokens or an End token. At the first step on which the chains'
// tokens differ it halts and reports the Divergence. In every case it
// closes the links and waits for every chain's close frame, so that each
// stage's transcript is final. srv is the client's server (its Authorize
// admits the last stage of each chain).
func Generate(ctx context.Context, srv *Server, c ClientConfig, prompt []int32) (*Result, error) {
	if err := c.Limits.Validate(); err != nil {
		return nil, err
	}
	switch {
	case len(c.First) == 0:
		return nil, errors.New("split client: no replica chain (First is empty)")
	case len(c.First) > 1<<16:
		return nil, errors.New("split client: too many replica chains")
	case c.Stages == 0:
		return nil, errors.New("split client: Stages must be ≥ 1")
	case c.MaxTokens < 1:
		return nil, errors.New("split client: MaxTokens must be ≥ 1")
	case len(prompt) == 0:
		return nil, errors.New("split client: empty prompt")
	case uint64(len(prompt))+uint64(c.MaxTokens) > uint64(c.Limits.Context):
		return nil, fmt.Errorf("split client: %d prompt tokens + %d generated exceed the context of %d", len(prompt), c.MaxTokens, c.Limits.Context)
	}
	for i, t := range prompt {
		if t < 0 || uint32(t) >= c.Limits.Vocab {
			return nil, fmt.Errorf("split client: prompt token %d is %d, outside the vocabulary [0, %d)", i, t, c.Limits.Vocab)
		}
	}
	g := &generation{c: c, srv: srv}
	defer g.close()
	g.outs, g.ins = make([]*Outbox, len(c.First)), make([]*Inbox, len(c.First))
	for j, first := range c.First {
		if err := g.open(j, first); err != nil {
			return nil, err
		}
	}
	res, err := g.run(ctx, prompt)
	if err != nil {
		return nil, err
	}
	for j := range g.outs {
		rec := ChainRecord{}
		rec.SentSteps, rec.SentRun = g.outs[j].Sent()
		rec.Received, _ = g.ins[j].Evidence()
		res.Chains = append(res.Chains, rec)
	}
	return res, nil
}

type generation struct {
	c    ClientConfig
	srv  *Server
	outs []*Outbox
	ins  []*Inbox
	step uint32 // frames sent to each chain
	// sent is every frame sent to every chain, in order; tokens[i] the
	// token all chains agreed on for frame i+1 (kept for recovery).
	sent       []Frame
	tokens     []int32
	recoveries int
}

// open opens chain j's links: to its stage 0 (first) and from its last
// stage.
func (g *generation) open(j int, first peer.ID) error {
	c := g.c
	s, err := NewSender(c.Key, Link{ChainID: g.srv.ChainID(), Job: c.Job, Chain: uint16(j), From: market.ClientStage})
	if err != nil {
		return err
	}
	out, err := NewOutbox(g.srv.Host(), s, OutboxConfig{To: first, WriteTimeout: c.WriteTimeout})
	if err != nil {
		return err
	}
	in, err := g.srv.Expect(InboxConfig{Job: c.Job, Chain: uint16(j), From: c.Stages - 1, Carries: KindToken, Limits: c.Limits, MaxTranscript: -1})
	if err != nil {
		_ = out.Close()
		return err
	}
	g.outs[j], g.ins[j] = out, in
	return nil
}

// recover restarts chain j after its failure err (ClientConfig.Recover):
// new links, every frame sent so far replayed, and the tokens of the
// steps already agreed taken back and checked. It returns err where the
// chain cannot be recovered.
func (g *generation) recover(ctx context.Context, j int, err error) error {
	// A refused frame is a protocol fault, not a dead stage: no restart.
	if g.c.Recover == nil || g.recoveries >= MaxRecoveries || ctx.Err() != nil || errors.Is(err, ErrRefused) {
		return &chainError{j, err}
	}
	g.recoveries++
	_ = g.outs[j].Close()
	g.ins[j].Close()
	first, ok := g.c.Recover(ctx, j, err)
	if !ok {
		return &chainError{j, err}
	}
	if oerr := g.open(j, first); oerr != nil {
		return &chainError{j, fmt.Errorf("%v; reopening after recovery: %w", err, oerr)}
	}
	for _, f := range g.sent {
		if serr := g.outs[j].Send(ctx, f); serr != nil {
			return &chainError{j, fmt.Errorf("%v; replaying after recovery: %w", err, serr)}
		}
	}
	for i, want := range g.tokens {
		f, rerr := g.recvStep(ctx, j)
		switch {
		case rerr != nil:
			return &chainError{j, fmt.Errorf("%v; replaying after recovery, step %d: %w", err, i+1, rerr)}
		case f.Kind != KindToken || f.Step != uint32(i+1):
			return &chainError{j, fmt.Errorf("%v; replaying after recovery: a %s frame at step %d, want the token of step %d", err, f.Kind, f.Step, i+1)}
		case f.Tokens[0] != want:
			return &chainError{j, fmt.Errorf("replayed step %d gave token %d, the chains had agreed on %d", i+1, f.Tokens[0], want)}
		}
	}
	return nil
}

func (g *generation) close() {
	for _, o := range g.outs {
		_ = o.Close()
	}
	for _, in := range g.ins {
		in.Close()
	}
}

// send sends f to stage 0 of every chain, recovering a chain whose
// stage 0 is gone (the replay includes f).
func (g *generation) send(ctx context.Context, f Frame) error {
	g.sent = append(g.sent, f)
	for j := range g.outs {
		if err := g.outs[j].Send(ctx, f); err != nil {
			if rerr := g.recover(ctx, j, err); rerr != nil {
				return rerr
			}
		}
	}
	g.step++
	return nil
}

// recv takes every chain's token frame for step, for the token at
// position pos; a Divergence if they differ.
func (g *generation) recv(ctx context.Context, step, pos uint32) (int32, *Divergence, error) {
	toks := make([]int32, len(g.ins))
	for j := 0; j < len(g.ins); j++ {
		f, err := g.recvStep(ctx, j)
		var fail error
		switch {
		case err == io.EOF:
			fail = fmt.Errorf("the last stage closed the link before the token of step %d", step)
		case err != nil:
			fail = err
		case f.Kind == KindError:
			fail = fmt.Errorf("%w: %s", ErrStage, f.Message)
		}
		if fail != nil {
			if rerr := g.recover(ctx, j, fail); rerr != nil {
				return 0, nil, rerr
			}
			j-- // take this step's token from the recovered chain
			continue
		}
		switch {
		case f.Kind != KindToken:
			return 0, nil, fmt.Errorf("chain %d: a %s frame at step %d, want a token", j, f.Kind, f.Step)
		case f.Step != step || f.Pos0 != pos:
			// The receiver already checked the step; positions it can
			// only check to be increasing.
			return 0, nil, fmt.Errorf("chain %d: token of step %d at position %d, want step %d at %d", j, f.Step, f.Pos0, step, pos)
		}
		toks[j] = f.Tokens[0]
	}
	for _, t := range toks[1:] {
		if t != toks[0] {
			return 0, &Divergence{Step: step, Pos: pos, Tokens: toks}, nil
		}
	}
	g.tokens = append(g.tokens, toks[0])
	return toks[0], nil, nil
}

func (g *generation) run(ctx context.Context, prompt []int32) (*Result, error) {
	res := &Result{}
	// Prefill: every chunk goes out before the first token comes back.
	var ends []uint32
	for pos := 0; pos < len(prompt); pos += int(g.c.Limits.MaxRows) {
		chunk := prompt[pos:min(pos+int(g.c.Limits.MaxRows), len(prompt))]
		f := Frame{Header: Header{Kind: KindTokens, Pos0: uint32(pos), N: uint32(len(chunk))}, Tokens: chunk}
		if pos == 0 {
			f.Flags = FlagReset
		}
		if err := g.send(ctx, f); err != nil {
			return nil, err
		}
		ends = append(ends, uint32(pos+len(chunk)))
	}
	var tok int32
	for i, end := range ends {
		t, div, err := g.recv(ctx, uint32(i+1), end)
		if err != nil {
			return nil, err
		}
		if div != nil {
			res.Divergence = div
			return res, g.finish(ctx, g.step-uint32(len(ends)-i-1))
		}
		tok = t
	}
	pos := uint32(len(prompt))
	for {
		res.Tokens = append(res.Tokens, tok)
		if g.c.OnToken != nil {
			g.c.OnToken(tok)
		}
		if len(res.Tokens) == g.c.MaxTokens || g.c.End != nil && g.c.End(tok) {
			break
		}
		if err := g.send(ctx, Frame{Header: Header{Kind: KindTokens, Pos0: pos, N: 1}, Tokens: []int32{tok}}); err != nil {
			return nil, err
		}
		pos++
		t, div, err := g.recv(ctx, g.step, pos)
		if err != nil {
			return nil, err
		}
		if div != nil {
			res.Divergence = div
			return res, g.finish(ctx, g.step)
		}
		tok = t
	}
	return res, g.finish(ctx, g.step)
}

// recvStep takes chain j's next frame within the step timeout.
func (g *generation) recvStep(ctx context.Context, j int) (Frame, error) {
	d := g.c.StepTimeout
	if d == 0 {
		d = DefaultStepTimeout
	}
	sctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	f, err := recvWatching(sctx, g.ins[j], g.outs[j])
	if err != nil && ctx.Err() == nil && sctx.Err() != nil {
		err = fmt.Errorf("%w: no token from the last stage within %v", ErrTimeout, d)
	}
	return f, err
}

// recvWatching is in.Recv, cut short if stage 0 refuses or ends the
// stream o feeds: then no token will come.
func recvWatching(ctx context.Context, in *Inbox, o *Outbox) (Frame, error) {
	done, why := o.watch()
	if done == nil {
		return in.Recv(ctx)
	}
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-done:
			cancel(why())
		case <-rctx.Done():
		}
	}()
	f, err := in.Recv(rctx)
	if err != nil && ctx.Err() == nil && context.Cause(rctx) != nil {
		err = fmt.Errorf("stage 0: %w", context.Cause(rctx))
	}
	return f, err
}

// finish sends every chain a close frame and waits for each chain's
// close frame, dropping the tokens of the steps after received (those
// still in flight after a divergence during prefill).
func (g *generation) finish(ctx context.Context, received uint32) error {
	if err := g.send(ctx, Frame{Header: Header{Kind: KindClose}}); err != nil {
		return err
	}
	for j, in := range g.ins {
		for {
			f, err := in.Recv(ctx)
			if err != nil {
				return fmt.Errorf("chain %d: waiting for the close frame: %w", j, err)
			}
			if f.Kind == KindClose {
				break
			}
			if f.Kind == KindError {
				return fmt.Errorf("chain %d: %w: %s", j, ErrStage, f.Message)
			}
			if f.Step <= received {
				return fmt.Errorf("chain %d: frame %d after its token was taken", j, f.Step)
			}
		}
	}
	return nil
}

// Agreed reports whether every chain's record is equal (what the client
// sent is identical under lockstep; the tokens received are identical
// unless the chains diverged).
func (r *Result) Agreed() bool {
	for _, c := range r.Chains[1:] {
		if c.SentRun != r.Chains[0].SentRun || c.Received.Hrun != r.Chains[0].Received.Hrun {
			return false
		}
	}
	return r.Divergence == nil
}
