package agent

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/p2p"
)

// TranscriptProtocol serves a split slot's input transcript (the frames
// its upstream sent, signatures included) to the validators of a dispute
// on that stage: request job u64 | stage u16 | chain u16 (big-endian);
// answer status u8 (0 ok) | length u32 | the transcript, or the reason.
// Dispute data goes to active validators only, and only while the stage
// is disputed (cross-cutting rule 3).
const TranscriptProtocol = "/ogpu/split/transcript/1"

// maxTranscriptAnswer bounds what a validator reads: split.MaxPayload.
const maxTranscriptAnswer = 1 << 28

// serveTranscripts installs the transcript handler; get returns the
// stored transcript of a slot.
func serveTranscripts(h *p2p.Host, c *node.Client, get func(job uint64, stage, chain uint16) ([]byte, bool)) {
	access := NewAccess(c)
	h.Host().SetStreamHandler(TranscriptProtocol, func(s network.Stream) {
		defer s.Close()
		_ = s.SetDeadline(time.Now().Add(time.Minute))
		var req [12]byte
		if _, err := io.ReadFull(s, req[:]); err != nil {
			_ = s.Reset()
			return
		}
		job, stage, chainIdx := binary.BigEndian.Uint64(req[:]), binary.BigEndian.Uint16(req[8:]), binary.BigEndian.Uint16(req[10:])
		answer := func(status byte, body []byte) {
			hdr := []byte{status, 0, 0, 0, 0}
			binary.BigEndian.PutUint32(hdr[1:], uint32(len(body)))
			_, _ = s.Write(append(hdr, body...))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := transcriptAllowed(ctx, c, access, s.Conn().RemotePeer(), job, stage); err != nil {
			answer(1, []byte(err.Error()))
			return
		}
		tr, ok := get(job, stage, chainIdx)
		if !ok {
			answer(1, fmt.Appendf(nil, "no transcript of job %d stage %d chain %d here", job, stage, chainIdx))
			return
		}
		answer(0, tr)
	})
}

// transcriptAllowed: remote must be an active validator and the stage
// disputed.
func transcriptAllowed(ctx context.Context, c *node.Client, a *Access, remote peer.ID, job uint64, stage uint16) error {
	addr, err := p2p.AddressOf(remote)
	if err != nil {
		return err
	}
	j, err := c.Job(ctx, job)
	if err != nil {
		return err
	}
	if !disputed(j, int(stage)) {
		return fmt.Errorf("stage %d of job %d is not disputed: its transcript goes to nobody", stage, job)
	}
	if err := a.activeValidator(ctx, addr); err != nil {
		return fmt.Errorf("peer %s is not an active validator: %w", remote, err)
	}
	return nil
}

// FetchTranscript asks provider peer p for the input transcript of slot
// chain of stage of job.
func FetchTranscript(ctx context.Context, h *p2p.Host, p peer.ID, job uint64, stage, chainIdx uint16) ([]byte, error) {
	s, err := h.Host().NewStream(ctx, p, TranscriptProtocol)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
	}
	req := binary.BigEndian.AppendUint64(nil, job)
	req = binary.BigEndian.AppendUint16(req, stage)
	req = binary.BigEndian.AppendUint16(req, chainIdx)
	if _, err := s.Write(req); err != nil {
		return nil, err
	}
	var hdr [5]byte
	if _, err := io.ReadFull(s, hdr[:]); err != nil {
		return nil, fmt.Errorf("transcript of job %d stage %d chain %d: %w", job, stage, chainIdx, err)
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxTranscriptAnswer {
		return nil, fmt.Errorf("transcript of %d bytes exceeds %d", n, maxTranscriptAnswer)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(s, body); err != nil {
		return nil, err
	}
	if hdr[0] != 0 {
		return nil, errors.New(string(body))
	}
	return body, nil
}
