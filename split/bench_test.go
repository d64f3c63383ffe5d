package split

import (
	"context"
	"fmt"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/types"
)

var benchWidths = []int{64, 4096}

func benchLimits(w int) Limits {
	return Limits{Context: 1 << 30, MaxRows: 1, NEmbd: uint32(w), Vocab: 32000}
}

func decodeRow(pos uint32, w int) Frame {
	return Frame{Header: Header{Kind: KindActivations, Pos0: pos, N: 1, NEmbd: uint32(w)}, Rows: rowsOf(1, w, 0.5)}
}

// reportHop reports the bytes one decode step puts on a hop.
func reportHop(b *testing.B, w int) {
	size := HeaderSize + 4*w + SigSize
	b.SetBytes(int64(size))
	b.ReportMetric(float64(size), "B/hop/token")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
}

// BenchmarkSealAccept: the CPU cost of one decode-step hand-off without
// the network: encode, hash, sign (sender); decode, hash, recover the
// signer (receiver).
func BenchmarkSealAccept(b *testing.B) {
	for _, w := range benchWidths {
		b.Run(fmt.Sprintf("n_embd=%d", w), func(b *testing.B) {
			k := newKey(b)
			s, _ := NewSender(k, actLink)
			r, err := NewReceiver(ReceiverConfig{Link: actLink, Signer: addr(k), Limits: benchLimits(w), Carries: KindActivations, MaxTranscript: -1})
			if err != nil {
				b.Fatal(err)
			}
			f := decodeRow(0, w)
			b.ResetTimer()
			for i := range b.N {
				f.Pos0 = uint32(i)
				wire, err := s.Seal(f)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := r.Accept(wire); err != nil {
					b.Fatal(err)
				}
			}
			reportHop(b, w)
		})
	}
}

// BenchmarkHopStream: frames per second one link carries between two
// real hosts on loopback when the sender does not wait (the pipelined
// prefill case), signature and checks included.
func BenchmarkHopStream(b *testing.B) {
	for _, w := range benchWidths {
		b.Run(fmt.Sprintf("n_embd=%d", w), func(b *testing.B) {
			a, c := newNode(b), newNode(b)
			srv := newServer(b, c, func(_ context.Context, remote peer.ID, _ uint64, _, _ uint16) (types.Address, error) {
				return p2p.AddressOf(remote)
			})
			in, err := srv.Expect(InboxConfig{Job: actLink.Job, Chain: actLink.Chain, From: actLink.From, Carries: KindActivations, Limits: benchLimits(w), MaxTranscript: -1})
			if err != nil {
				b.Fatal(err)
			}
			connect(b, a, c)
			s, _ := NewSender(a.key, Link{ChainID: testChainID, Job: actLink.Job, Chain: actLink.Chain, From: actLink.From})
			o, _ := NewOutbox(a.h.Host(), s, OutboxConfig{To: c.id()})
			ctx := testCtx(b)
			got := make(chan error, 1)
			b.ResetTimer()
			go func() {
				for range b.N {
					if _, err := in.Recv(ctx); err != nil {
						got <- err
						return
					}
				}
				got <- nil
			}()
			f := decodeRow(0, w)
			for i := range b.N {
				f.Pos0 = uint32(i)
				if err := o.Send(ctx, f); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-got; err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			reportHop(b, w)
			_ = o.Close()
		})
	}
}

// constLast is a last stage that costs nothing: the benchmark measures
// the hand-offs.
type constLast struct{ w int }

func (c constLast) NEmbd() int   { return c.w }
func (c constLast) Reset() error { return nil }
func (c constLast) Forward(int, []int32, []float32) ([]float32, int32, error) {
	return nil, 1, nil
}

// BenchmarkHopLockstep: one decode step at a time, as lockstep runs: a
// row of activations to a real Stage on another host, which answers with
// a signed token frame; the sender waits for it before the next step.
// ns/op is two hops (activations there, the token back) with their
// signatures and checks; ns/hop is half of it.
func BenchmarkHopLockstep(b *testing.B) {
	for _, w := range benchWidths {
		b.Run(fmt.Sprintf("n_embd=%d", w), func(b *testing.B) {
			up, last := newNode(b), newNode(b)
			lim := benchLimits(w)
			upSrv := newServer(b, up, func(_ context.Context, remote peer.ID, _ uint64, _, _ uint16) (types.Address, error) {
				return p2p.AddressOf(remote)
			})
			lastSrv := newServer(b, last, func(_ context.Context, remote peer.ID, _ uint64, _, _ uint16) (types.Address, error) {
				return p2p.AddressOf(remote)
			})
			connect(b, up, last)
			st, err := StartStage(lastSrv, StageConfig{Job: testJob, Chain: 0, Stage: 1, Stages: 2, Key: last.key, Limits: lim,
				Forwarder: constLast{w}, Downstream: up.id(), MaxTranscript: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			tokens, err := upSrv.Expect(InboxConfig{Job: testJob, Chain: 0, From: 1, Carries: KindToken, Limits: lim, MaxTranscript: -1})
			if err != nil {
				b.Fatal(err)
			}
			s, _ := NewSender(up.key, Link{ChainID: testChainID, Job: testJob, Chain: 0, From: 0})
			o, _ := NewOutbox(up.h.Host(), s, OutboxConfig{To: last.id()})
			ctx := testCtx(b)
			f := decodeRow(0, w)
			b.ResetTimer()
			for i := range b.N {
				f.Pos0 = uint32(i)
				if err := o.Send(ctx, f); err != nil {
					b.Fatal(err)
				}
				if _, err := tokens.Recv(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			reportHop(b, w)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/hop")
			_ = o.Close()
		})
	}
}
