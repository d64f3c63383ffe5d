package split

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/market"
)

// Forwarder runs one stage's layers for one session (one job on one
// replica chain): runtime/llm implements it with llama.cpp.
type Forwarder interface {
	// NEmbd is the model's width: the length of a residual row.
	NEmbd() int
	// Reset clears the session's KV cache: the next Forward starts at
	// position 0.
	Reset() error
	// Forward runs positions pos0 … pos0+n-1 of the session, after the
	// ones already run. Stage 0 gets n tokens (rows nil), later stages
	// n·NEmbd() rows (tokens nil). A non-final stage returns n·NEmbd()
	// rows out; the final stage returns the next token (the argmax at
	// the last position).
	Forward(pos0 int, tokens []int32, rows []float32) (out []float32, next int32, err error)
}

// StageConfig configures one stage of one replica chain of a job.
type StageConfig struct {
	Job   uint64
	Chain uint16
	// Stage is this stage's index, Stages the job's K.
	Stage, Stages uint16
	// Key is the provider's account (and node) key; it signs what the
	// stage sends.
	Key *ecdsa.PrivateKey
	// Limits bound the stage's input and output: Context, MaxRows, NEmbd
	// (the model's width), Vocab.
	Limits Limits
	// Forwarder computes the stage.
	Forwarder Forwarder
	// Downstream is stage Stage+1 of the same chain, or the client after
	// the last stage.
	Downstream peer.ID
	// MaxTranscript bounds the input transcript kept (see
	// ReceiverConfig).
	MaxTranscript int64
	// WriteTimeout bounds sending one frame (DefaultFrameTimeout if 0).
	WriteTimeout time.Duration
}

// Stage serves one stage: it takes its upstream's frames (through the
// server's Authorize and a Receiver), runs its Forwarder on them, and
// sends one frame downstream per frame received.
type Stage struct {
	c    StageConfig
	in   *Inbox
	out  *Outbox
	stop context.CancelFunc
	done chan struct{}

	mu       sync.Mutex
	err      error
	forwards int
}

// ErrStage is an error a stage (this one or one upstream) reported in
// an error frame.
var ErrStage = errors.New("split stage failed")

// StartStage opens the stage's inbox on srv and serves it until its
// upstream closes the link, a frame is refused, the Forwarder fails, or
// Close.
func StartStage(srv *Server, c StageConfig) (*Stage, error) {
	switch {
	case c.Stages == 0 || c.Stage >= c.Stages:
		return nil, fmt.Errorf("split stage: stage %d of %d", c.Stage, c.Stages)
	case c.Forwarder == nil:
		return nil, errors.New("split stage: Forwarder is required")
	case c.Limits.NEmbd == 0 || c.Forwarder.NEmbd() != int(c.Limits.NEmbd):
		return nil, fmt.Errorf("split stage: the forwarder's n_embd %d differs from Limits.NEmbd %d", c.Forwarder.NEmbd(), c.Limits.NEmbd)
	case (c.Stage == 0 || c.Stage == c.Stages-1) && c.Limits.Vocab == 0:
		return nil, errors.New("split stage: the first and last stages need Limits.Vocab")
	}
	from, carries := c.Stage-1, KindActivations
	if c.Stage == 0 {
		from, carries = market.ClientStage, KindTokens
	}
	sender, err := NewSender(c.Key, Link{ChainID: srv.ChainID(), Job: c.Job, Chain: c.Chain, From: c.Stage})
	if err != nil {
		return nil, err
	}
	out, err := NewOutbox(srv.Host(), sender, OutboxConfig{To: c.Downstream, WriteTimeout: c.WriteTimeout})
	if err != nil {
		return nil, err
	}
	in, err := srv.Expect(InboxConfig{Job: c.Job, Chain: c.Chain, From: from, Carries: carries, Limits: c.Limits, MaxTranscript: c.MaxTranscript})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	st := &Stage{c: c, in: in, out: out, stop: cancel, done: make(chan struct{})}
	go st.run(ctx)
	return st, nil
}

func (st *Stage) last() bool { return st.c.Stage == st.c.Stages-1 }

func (st *Stage) run(ctx context.Context) {
	defer close(st.done)
	err := st.loop(ctx)
	if cerr := st.out.Close(); err == nil && cerr != nil {
		err = cerr
	}
	st.in.Close()
	st.mu.Lock()
	st.err = err
	st.mu.Unlock()
}

// loop forwards frames until the link ends. Every way out but Close
// sends downstream a close frame or an error frame, so that the client
// learns why.
func (st *Stage) loop(ctx context.Context) error {
	for {
		f, err := st.in.Recv(ctx)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err == io.EOF:
			return fmt.Errorf("%w: stage %d: the input link ended without a close frame", ErrStage, st.c.Stage)
		case err != nil:
			return st.fail(ctx, fmt.Errorf("stage %d refused a frame from its upstream: %w", st.c.Stage, err))
		}
		switch f.Kind {
		case KindClose:
			return st.out.Send(ctx, Frame{Header: Header{Kind: KindClose}})
		case KindError:
			return st.fail(ctx, fmt.Errorf("%w: %s", ErrStage, f.Message))
		}
		out, err := st.forward(f)
		if err != nil {
			return st.fail(ctx, err)
		}
		if err := st.out.Send(ctx, out); err != nil {
			return err
		}
	}
}

// forward runs the Forwarder on data frame f and returns the frame to
// send on.
func (st *Stage) forward(f Frame) (Frame, error) {
	fw := st.c.Forwarder
	if f.Flags&FlagReset != 0 {
		if err := fw.Reset(); err != nil {
			return Frame{}, fmt.Errorf("stage %d cannot reset its session: %w", st.c.Stage, err)
		}
	}
	rows, next, err := fw.Forward(int(f.Pos0), f.Tokens, f.Rows)
	st.mu.Lock()
	st.forwards++
	st.mu.Unlock()
	if err != nil {
		return Frame{}, fmt.Errorf("stage %d cannot run positions %d–%d: %w", st.c.Stage, f.Pos0, f.Pos0+f.N-1, err)
	}
	if st.last() {
		if next < 0 || uint32(next) >= st.c.Limits.Vocab {
			return Frame{}, fmt.Errorf("stage %d produced token %d, outside the vocabulary [0, %d)", st.c.Stage, next, st.c.Limits.Vocab)
		}
		return Frame{Header: Header{Kind: KindToken, Pos0: f.Pos0 + f.N, N: 1, Flags: f.Flags & FlagReset}, Tokens: []int32{next}}, nil
	}
	out := Frame{Header: Header{Kind: KindActivations, Pos0: f.Pos0, N: f.N, NEmbd: st.c.Limits.NEmbd, Flags: f.Flags}, Rows: rows}
	if uint64(len(rows)) != uint64(f.N)*uint64(st.c.Limits.NEmbd) {
		return Frame{}, fmt.Errorf("stage %d produced %d values for %d rows of %d", st.c.Stage, len(rows), f.N, st.c.Limits.NEmbd)
	}
	return out, nil
}

// fail sends err downstream as an error frame and returns it.
func (st *Stage) fail(ctx context.Context, err error) error {
	if serr := st.out.Send(ctx, errorFrame(err)); serr != nil {
		return errors.Join(err, serr)
	}
	return err
}

// Wait returns when the stage has stopped: nil after a clean close, else
// why it stopped.
func (st *Stage) Wait(ctx context.Context) error {
	select {
	case <-st.done:
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the stage and waits for it.
func (st *Stage) Close() {
	st.stop()
	st.in.Close()
	<-st.done
}

// Commitment is what the stage commits on chain: T frames, Hin over its
// input link, Hout over its output link. T counts the frames received;
// the stage sent as many unless it stopped on a refused frame.
func (st *Stage) Commitment() Commitment {
	t, hin := st.in.Received()
	_, hout := st.out.Sent()
	return Commitment{T: t, Hin: hin, Hout: hout}
}

// Sent is the number of frames the stage sent.
func (st *Stage) Sent() uint32 {
	n, _ := st.out.Sent()
	return n
}

// Evidence is the upstream's signature over what the stage received.
func (st *Stage) Evidence() (Evidence, bool) { return st.in.Evidence() }

// Transcript is the stage's input transcript (frames and signatures).
func (st *Stage) Transcript() *Transcript { return st.in.Transcript() }

// Forwards is how many times the stage called its Forwarder.
func (st *Stage) Forwards() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.forwards
}
