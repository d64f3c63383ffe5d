package split

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/types"
)

// rawStream opens a hand-off stream from one node to another, for
// attacks that write bytes no honest Outbox writes.
func rawStream(t *testing.T, from, to node) network.Stream {
	t.Helper()
	connect(t, from, to)
	st, err := from.h.Host().NewStream(testCtx(t), to.id(), Protocol)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Reset() })
	return st
}

func write(t *testing.T, st network.Stream, parts ...[]byte) {
	t.Helper()
	for _, b := range parts {
		if _, err := st.Write(b); err != nil {
			t.Fatal(err)
		}
	}
}

// readRefusal reads the receiver's refusal message ("" if the stream
// ended without one).
func readRefusal(t *testing.T, st network.Stream) string {
	t.Helper()
	_ = st.SetReadDeadline(time.Now().Add(time.Minute))
	var lb [2]byte
	if _, err := io.ReadFull(st, lb[:]); err != nil {
		return ""
	}
	msg := make([]byte, binary.LittleEndian.Uint16(lb[:]))
	if _, err := io.ReadFull(st, msg); err != nil {
		t.Fatalf("refusal cut short: %v", err)
	}
	return string(msg)
}

func preamble(chain uint16) []byte { return appendPreamble(nil, chain) }

func splitAct(pos0, n uint32, flags Flags) Frame {
	w := uint32(model.nEmbd)
	return Frame{Header: Header{Kind: KindActivations, Pos0: pos0, N: n, NEmbd: w, Flags: flags}, Rows: rowsOf(int(n), int(w), 0.1*float32(pos0))}
}

// TestUpstreamBadFramesRefused: the authorized upstream of a stage (its
// own key, its own host) sends one good frame and then a bad one. Each
// bad frame is refused with a clear error that the sender reads back,
// the stage's runtime never sees it, and the stage stops and tells its
// downstream why (P13: a signed malformed frame is the sender's fault).
func TestUpstreamBadFramesRefused(t *testing.T) {
	link := Link{ChainID: testChainID, Job: testJob, Chain: 0, From: 0}
	cases := []struct {
		name string
		// bad returns the bytes written after the good first frame.
		bad  func(t *testing.T, s *Sender, up node) [][]byte
		is   error
		want string
	}{
		{"wrong n_embd", func(t *testing.T, s *Sender, _ node) [][]byte {
			f := splitAct(2, 1, 0)
			f.NEmbd, f.Rows = 8, f.Rows[:8]
			return [][]byte{seal(t, s, f)}
		}, ErrBadFrame, "field n_embd is 8, this link carries rows of 16"},
		{"too many rows", func(t *testing.T, s *Sender, _ node) [][]byte {
			return [][]byte{seal(t, s, splitAct(2, 5, 0))}
		}, ErrBadFrame, "field n is 5, this link takes at most 4"},
		{"NaN", func(t *testing.T, s *Sender, _ node) [][]byte {
			b := seal(t, s, splitAct(2, 1, 0))
			binary.LittleEndian.PutUint32(b[HeaderSize+4*3:], math.Float32bits(float32(math.NaN())))
			return [][]byte{b}
		}, ErrBadFrame, "row 0 column 3 is NaN"},
		{"truncated frame", func(t *testing.T, s *Sender, _ node) [][]byte {
			b := seal(t, s, splitAct(2, 1, 0))
			return [][]byte{b[:len(b)-20]}
		}, ErrBadFrame, "truncated"},
		{"truncated header", func(t *testing.T, s *Sender, _ node) [][]byte {
			b := seal(t, s, splitAct(2, 1, 0))
			return [][]byte{b[:10]}
		}, ErrBadFrame, "truncated"},
		{"trailing bytes", func(t *testing.T, s *Sender, _ node) [][]byte {
			return [][]byte{make([]byte, HeaderSize)} // after the good frame
		}, ErrBadFrame, "field magic"},
		{"replayed step", func(t *testing.T, s *Sender, up node) [][]byte {
			s2, _ := NewSender(up.key, link)
			return [][]byte{seal(t, s2, splitAct(0, 2, FlagReset))}
		}, ErrBadStep, "field step is 1, want 2"},
		{"skipped step", func(t *testing.T, s *Sender, _ node) [][]byte {
			seal(t, s, splitAct(2, 1, 0))
			return [][]byte{seal(t, s, splitAct(2, 1, 0))}
		}, ErrBadStep, "field step is 3, want 2"},
		{"position gap", func(t *testing.T, s *Sender, _ node) [][]byte {
			return [][]byte{seal(t, s, splitAct(3, 1, 0))}
		}, ErrBadPosition, "field pos0 is 3, want 2"},
		{"bad signature", func(t *testing.T, s *Sender, _ node) [][]byte {
			b := seal(t, s, splitAct(2, 1, 0))
			b[HeaderSize+1] ^= 0x40
			return [][]byte{b}
		}, ErrBadSignature, "is signed by"},
		{"signed by another key", func(t *testing.T, s *Sender, _ node) [][]byte {
			other, _ := NewSender(newKey(t), link)
			seal(t, other, splitAct(0, 2, FlagReset))
			return [][]byte{seal(t, other, splitAct(2, 1, 0))}
		}, ErrBadSignature, "is signed by"},
		{"another sending stage", func(t *testing.T, s *Sender, up node) [][]byte {
			l := link
			l.From = 1
			other, _ := NewSender(up.key, l)
			seal(t, other, splitAct(0, 2, FlagReset))
			return [][]byte{seal(t, other, splitAct(2, 1, 0))}
		}, ErrWrongLink, "from stage 1 arrived on the link of job 7 chain 0 from stage 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPipeline(t, 2, 1)
			// The client's inbox for the stage's output.
			out, err := p.csrv.Expect(InboxConfig{Job: testJob, Chain: 0, From: 1, Carries: KindToken, Limits: splitLimits})
			if err != nil {
				t.Fatal(err)
			}
			up := p.nodes[0][0]
			s, err := NewSender(up.key, link)
			if err != nil {
				t.Fatal(err)
			}
			st := rawStream(t, up, p.nodes[0][1])
			write(t, st, preamble(0), seal(t, s, splitAct(0, 2, FlagReset)))
			write(t, st, c.bad(t, s, up)...)
			if strings.Contains(c.name, "truncated") {
				_ = st.CloseWrite()
			}
			msg := readRefusal(t, st)
			if !strings.Contains(msg, c.want) {
				t.Fatalf("refusal %q does not say %q", msg, c.want)
			}
			stage := p.stages[0][1]
			if err := stage.Wait(testCtx(t)); !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("stage stopped with %v, want %v saying %q", err, c.is, c.want)
			}
			if n := p.fakes[0][1].Calls(); n != 1 {
				t.Fatalf("the runtime ran %d times, want 1 (the good frame only)", n)
			}
			// Downstream: the good frame's token, then why the stage
			// stopped.
			if f, err := out.Recv(testCtx(t)); err != nil || f.Kind != KindToken {
				t.Fatalf("first frame downstream: %v %v", f.Kind, err)
			}
			f, err := out.Recv(testCtx(t))
			if err != nil || f.Kind != KindError || !strings.Contains(f.Message, "stage 1 refused a frame from its upstream") || !strings.Contains(f.Message, c.want) {
				t.Fatalf("second frame downstream: %v %q %v", f.Kind, f.Message, err)
			}
			if _, err := out.Recv(testCtx(t)); err != io.EOF {
				t.Fatalf("after the error frame: %v, want io.EOF", err)
			}
		})
	}
}

// TestStrangerRefused: a peer that is no party of the job cannot feed a
// stage, even with well-formed frames it signs itself, and trying does
// not disturb the real link.
func TestStrangerRefused(t *testing.T) {
	p := newPipeline(t, 2, 2)
	stranger := newNode(t)
	s, _ := NewSender(stranger.key, Link{ChainID: testChainID, Job: testJob, Chain: 0, From: 0})
	st := rawStream(t, stranger, p.nodes[0][1])
	write(t, st, preamble(0), seal(t, s, splitAct(0, 2, FlagReset)))
	msg := readRefusal(t, st)
	if !strings.Contains(msg, ErrForbidden.Error()) || !strings.Contains(msg, "peer "+stranger.id().String()+" may not send job 7 chain 0 from stage 0") {
		t.Fatalf("stranger's refusal: %q", msg)
	}
	// A link the node does not expect at all.
	s2, _ := NewSender(stranger.key, Link{ChainID: testChainID, Job: 99, Chain: 0, From: 0})
	st2 := rawStream(t, stranger, p.nodes[0][1])
	write(t, st2, preamble(0), seal(t, s2, splitAct(0, 2, FlagReset)))
	if msg := readRefusal(t, st2); !strings.Contains(msg, "this node expects no frames of job 99 chain 0 from stage 0") {
		t.Fatalf("unknown link's refusal: %q", msg)
	}
	// Not a split stream at all.
	st3 := rawStream(t, stranger, p.nodes[0][1])
	write(t, st3, []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n0123456789012345678901234567890123456789"))
	if msg := readRefusal(t, st3); !strings.Contains(msg, "preamble") {
		t.Fatalf("garbage stream's refusal: %q", msg)
	}
	if n := p.fakes[0][1].Calls(); n != 0 {
		t.Fatalf("the stranger's frames ran the stage %d times", n)
	}
	res, err := Generate(testCtx(t), p.csrv, p.clientConfig(6), testPrompt)
	if err != nil || !slices.Equal(res.Tokens, wholeModel(2, testPrompt, 6, nil)) {
		t.Fatalf("the real job after the stranger: %v, %v", res, err)
	}
	waitStages(t, p)
}

// TestCrossChainRefused (P3): stage s of chain B cannot feed stage s+1 of
// chain A, whatever chain it names; and even where a careless Authorize
// lets it in, the signature (bound to the replica chain) refuses its
// frames.
func TestCrossChainRefused(t *testing.T) {
	p := newPipeline(t, 2, 2)
	b0 := p.nodes[1][0] // stage 0 of chain 1
	sB, _ := NewSender(b0.key, Link{ChainID: testChainID, Job: testJob, Chain: 1, From: 0})
	frame := seal(t, sB, splitAct(0, 2, FlagReset))

	st := rawStream(t, b0, p.nodes[0][1])
	write(t, st, preamble(1), frame)
	if msg := readRefusal(t, st); !strings.Contains(msg, "this node expects no frames of job 7 chain 1 from stage 0") {
		t.Fatalf("naming its own chain: %q", msg)
	}
	st = rawStream(t, b0, p.nodes[0][1])
	write(t, st, preamble(0), frame)
	if msg := readRefusal(t, st); !strings.Contains(msg, "may not send job 7 chain 0 from stage 0") {
		t.Fatalf("naming the other chain: %q", msg)
	}
	if n := p.fakes[0][1].Calls(); n != 0 {
		t.Fatalf("chain 1's frames ran chain 0's stage %d times", n)
	}
	res, err := Generate(testCtx(t), p.csrv, p.clientConfig(6), testPrompt)
	if err != nil || res.Divergence != nil || len(res.Tokens) != 6 {
		t.Fatalf("the real job after the attempts: %+v, %v", res, err)
	}
	waitStages(t, p)

	// A careless Authorize that admits any stage-0 provider of the job.
	a, b := newNode(t), newNode(t)
	srv := newServer(t, b, func(_ context.Context, remote peer.ID, _ uint64, _, _ uint16) (types.Address, error) {
		return p2p.AddressOf(remote)
	})
	in, err := srv.Expect(InboxConfig{Job: testJob, Chain: 0, From: 0, Carries: KindActivations, Limits: splitLimits})
	if err != nil {
		t.Fatal(err)
	}
	sA, _ := NewSender(a.key, Link{ChainID: testChainID, Job: testJob, Chain: 1, From: 0})
	st = rawStream(t, a, b)
	write(t, st, preamble(0), seal(t, sA, splitAct(0, 2, FlagReset)))
	if _, err := in.Recv(testCtx(t)); !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), "is signed by") {
		t.Fatalf("a frame signed for chain 1 on chain 0's link: %v", err)
	}
	if msg := readRefusal(t, st); !strings.Contains(msg, "is signed by") {
		t.Fatalf("refusal: %q", msg)
	}
}

// TestOutboxReportsRefusal: an honest sender whose frames are refused
// learns why from its Send, not just that the stream broke.
func TestOutboxReportsRefusal(t *testing.T) {
	a, b := newNode(t), newNode(t)
	srv := newServer(t, b, func(context.Context, peer.ID, uint64, uint16, uint16) (types.Address, error) {
		return types.Address{}, errors.New("job 7 is not awarded to you")
	})
	if _, err := srv.Expect(InboxConfig{Job: testJob, Chain: 0, From: market.ClientStage, Carries: KindTokens, Limits: splitLimits}); err != nil {
		t.Fatal(err)
	}
	connect(t, a, b)
	s, _ := NewSender(a.key, Link{ChainID: testChainID, Job: testJob, Chain: 0, From: market.ClientStage})
	o, err := NewOutbox(a.h.Host(), s, OutboxConfig{To: b.id()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	f := Frame{Header: Header{Kind: KindTokens, N: 1, Flags: FlagReset}, Tokens: []int32{1}}
	err = o.Send(ctx, f)
	for i := 0; err == nil && i < 100; i++ {
		time.Sleep(10 * time.Millisecond) // the refusal is on its way back
		f.Flags, f.Pos0 = 0, uint32(i+1)
		err = o.Send(ctx, f)
	}
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "job 7 is not awarded to you") {
		t.Fatalf("send after refusal: %v", err)
	}
	if err := o.Close(); !errors.Is(err, ErrRefused) {
		t.Fatalf("close: %v", err)
	}
}

// TestServerCloseEndsStreams: Close returns although a peer holds a
// stream open mid-header, and no stream goroutine outlives it.
func TestServerCloseEndsStreams(t *testing.T) {
	a, b := newNode(t), newNode(t)
	srv, err := NewServer(b.h.Host(), ServerConfig{ChainID: testChainID, FrameTimeout: time.Hour, Logger: quiet,
		Authorize: func(context.Context, peer.ID, uint64, uint16, uint16) (types.Address, error) {
			return types.Address{}, errors.New("no")
		}})
	if err != nil {
		t.Fatal(err)
	}
	st := rawStream(t, a, b)
	write(t, st, []byte("ogs"))
	// Wait until the server holds the stream.
	for i := 0; ; i++ {
		srv.mu.Lock()
		n := len(srv.streams)
		srv.mu.Unlock()
		if n == 1 {
			break
		}
		if i == 1000 {
			t.Fatal("the server never took the stream")
		}
		time.Sleep(5 * time.Millisecond)
	}
	done := make(chan struct{})
	go func() { srv.Close(); close(done) }()
	select {
	case <-done:
	case <-testCtx(t).Done():
		t.Fatal("Close hangs on a stream stuck mid-header")
	}
}

// TestSilentStreamsDoNotBlock: a peer that opens streams and says
// nothing holds at most maxPendingPerPeer of them, and the job's real
// links still open.
func TestSilentStreamsDoNotBlock(t *testing.T) {
	p := newPipeline(t, 2, 1)
	stranger := newNode(t)
	var sts []network.Stream
	for range maxPendingPerPeer {
		st := rawStream(t, stranger, p.nodes[0][1])
		write(t, st, []byte("og")) // opens the stream on the far side
		sts = append(sts, st)
	}
	for i := 0; ; i++ { // until the server holds them
		srv := p.srvs[0][1]
		srv.mu.Lock()
		n := srv.pendingPeer[stranger.id()]
		srv.mu.Unlock()
		if n == maxPendingPerPeer {
			break
		}
		if i == 1000 {
			t.Fatalf("the server holds %d of the stranger's streams", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	extra := rawStream(t, stranger, p.nodes[0][1])
	write(t, extra, []byte("og"))
	if msg := readRefusal(t, extra); !strings.Contains(msg, "streams being opened already") {
		t.Fatalf("a stream beyond the per-peer bound: %q", msg)
	}
	res, err := Generate(testCtx(t), p.csrv, p.clientConfig(6), testPrompt)
	if err != nil || !slices.Equal(res.Tokens, wholeModel(2, testPrompt, 6, nil)) {
		t.Fatalf("the real job beside silent streams: %+v, %v", res, err)
	}
	waitStages(t, p)
	_ = sts
}

// TestStreamBeforeExpect: a sender that is faster than its receiver (both
// learn of the award in the same block) waits for the inbox instead of
// being refused; a link that stays unexpected is refused after ExpectWait.
func TestStreamBeforeExpect(t *testing.T) {
	a, b := newNode(t), newNode(t)
	connect(t, a, b)
	srv := newServer(t, b, func(_ context.Context, remote peer.ID, _ uint64, _, _ uint16) (types.Address, error) {
		return p2p.AddressOf(remote)
	})
	link := Link{ChainID: testChainID, Job: testJob, Chain: 0, From: 0}
	s, err := NewSender(a.key, link)
	if err != nil {
		t.Fatal(err)
	}
	out, err := NewOutbox(a.h.Host(), s, OutboxConfig{To: b.id()})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	sent := make(chan error, 1)
	go func() { sent <- out.Send(testCtx(t), splitAct(0, 2, FlagReset)) }()
	time.Sleep(100 * time.Millisecond) // the stream is open and waiting
	in, err := srv.Expect(InboxConfig{Job: testJob, Chain: 0, From: 0, Carries: KindActivations, Limits: Limits{Context: 256, MaxRows: 16, NEmbd: uint32(model.nEmbd)}})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if err := <-sent; err != nil {
		t.Fatalf("send before the receiver expected the link: %v", err)
	}
	f, err := in.Recv(testCtx(t))
	if err != nil || f.Kind != KindActivations || f.N != 2 {
		t.Fatalf("received %+v, %v", f.Header, err)
	}
}
