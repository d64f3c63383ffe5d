package p2p

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/types"
)

// ProtocolBlob is the blob transfer protocol.
//
// A stream carries any number of request/response pairs, one at a time.
// Every message is a frame: a 4-byte big-endian length, then that many
// bytes. A request is 37 bytes: kind (1 = manifest, 2 = piece), the blob
// hash (32), the piece index (4, big-endian; 0 for a manifest). A response
// is a status byte, a 2-byte message length, the message (why a request
// failed), then the payload: the encoded manifest or the piece bytes.
// The server answers a malformed request with StatusBadRequest and closes
// the stream.
const ProtocolBlob protocol.ID = "/ogpu/blob/1"

// Request kinds.
const (
	kindManifest = 1
	kindPiece    = 2
)

// Response statuses.
const (
	statusOK         = 0
	statusNotFound   = 1
	statusForbidden  = 2
	statusBadRequest = 3
	statusInternal   = 4
	// statusUnavailable: the server cannot decide now (its chain node
	// does not answer): not a refusal, ask again later.
	statusUnavailable = 5
)

// Wire limits and deadlines.
const (
	requestLen      = 1 + 32 + 4
	maxRequestFrame = 64
	maxMessage      = 1024
	responseHeader  = 1 + 2
	// idleTimeout is how long the server waits for the next request.
	idleTimeout = time.Minute
	// requestTimeout bounds one request/response exchange, both sides.
	requestTimeout = 2 * time.Minute
)

// Errors from remote peers, tested with errors.Is.
var (
	// ErrForbidden: the peer's Authorize refused the request.
	ErrForbidden = errors.New("forbidden")
	// ErrNotHeld: the peer does not hold the blob.
	ErrNotHeld = errors.New("peer does not hold the blob")
	// ErrProtocol: the peer broke the blob protocol or reported a failure.
	ErrProtocol = errors.New("blob protocol error")
	// ErrUnavailable: the peer cannot decide whether to serve the blob
	// now (its Authorize could not read the chain): not a refusal, ask
	// again later. An Authorize hook returns an error wrapping it for a
	// failure of its own, and the fetcher sees it.
	ErrUnavailable = errors.New("peer cannot decide now, try again")
)

type request struct {
	kind  byte
	hash  types.Hash
	index uint32
}

func writeFrame(w io.Writer, parts ...[]byte) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(n))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	for _, p := range parts {
		if _, err := w.Write(p); err != nil {
			return err
		}
	}
	return nil
}

// readFrameLen reads a frame's length and checks it against limit.
func readFrameLen(r io.Reader, limit int) (int, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if int64(n) > int64(limit) {
		return 0, fmt.Errorf("%w: frame of %d bytes exceeds the limit %d", ErrProtocol, n, limit)
	}
	return int(n), nil
}

func (q request) encode() []byte {
	b := make([]byte, requestLen)
	b[0] = q.kind
	copy(b[1:33], q.hash[:])
	binary.BigEndian.PutUint32(b[33:], q.index)
	return b
}

// decodeRequest parses a request frame's payload.
func decodeRequest(b []byte) (request, error) {
	if len(b) != requestLen {
		return request{}, fmt.Errorf("%w: request is %d bytes, want %d", ErrProtocol, len(b), requestLen)
	}
	q := request{kind: b[0], hash: types.Hash(b[1:33]), index: binary.BigEndian.Uint32(b[33:])}
	switch q.kind {
	case kindManifest:
		if q.index != 0 {
			return request{}, fmt.Errorf("%w: manifest request with a piece index", ErrProtocol)
		}
	case kindPiece:
	default:
		return request{}, fmt.Errorf("%w: unknown request kind %d", ErrProtocol, q.kind)
	}
	return q, nil
}

// readRequest reads one request frame. io.EOF means the peer closed the
// stream between requests.
func readRequest(r io.Reader) (request, error) {
	n, err := readFrameLen(r, maxRequestFrame)
	if err != nil {
		return request{}, err
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return request{}, noEOF(err)
	}
	return decodeRequest(b)
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func writeResponse(w io.Writer, status byte, msg string, payload []byte) error {
	if len(msg) > maxMessage {
		msg = msg[:maxMessage]
	}
	hdr := make([]byte, responseHeader+len(msg))
	hdr[0] = status
	binary.BigEndian.PutUint16(hdr[1:3], uint16(len(msg)))
	copy(hdr[3:], msg)
	return writeFrame(w, hdr, payload)
}

// readResponse reads one response frame whose payload may be up to
// maxPayload bytes. A non-OK status is returned as an error wrapping
// ErrNotHeld, ErrForbidden, ErrUnavailable or ErrProtocol.
func readResponse(r io.Reader, maxPayload int) ([]byte, error) {
	n, err := readFrameLen(r, responseHeader+maxMessage+maxPayload)
	if err != nil {
		return nil, noEOF(err)
	}
	if n < responseHeader {
		return nil, fmt.Errorf("%w: response of %d bytes is shorter than its header", ErrProtocol, n)
	}
	var hdr [responseHeader]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, noEOF(err)
	}
	ml := int(binary.BigEndian.Uint16(hdr[1:3]))
	if ml > maxMessage || ml > n-responseHeader {
		return nil, fmt.Errorf("%w: response message of %d bytes does not fit", ErrProtocol, ml)
	}
	body := make([]byte, n-responseHeader)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, noEOF(err)
	}
	msg, payload := string(body[:ml]), body[ml:]
	switch hdr[0] {
	case statusOK:
		return payload, nil
	case statusNotFound:
		return nil, fmt.Errorf("%w: %s", ErrNotHeld, printable(msg))
	case statusForbidden:
		return nil, fmt.Errorf("%w: %s", ErrForbidden, printable(msg))
	case statusUnavailable:
		return nil, fmt.Errorf("%w: %s", ErrUnavailable, printable(msg))
	case statusBadRequest, statusInternal:
		return nil, fmt.Errorf("%w: peer says: %s", ErrProtocol, printable(msg))
	default:
		return nil, fmt.Errorf("%w: unknown status %d", ErrProtocol, hdr[0])
	}
}

// printable quotes a peer's message if it holds anything but plain text.
func printable(s string) string {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '\uFFFD' {
			return fmt.Sprintf("%q", s)
		}
	}
	return s
}

// handleBlob serves blob requests on one stream until the peer closes it,
// sends something malformed, or goes idle.
func (h *Host) handleBlob(s network.Stream) {
	if !h.track() {
		s.Reset()
		return
	}
	defer h.wg.Done()
	defer s.Close()
	remote := s.Conn().RemotePeer()
	log := h.log.With("peer", remote.String(), "protocol", ProtocolBlob)
	for {
		s.SetReadDeadline(time.Now().Add(idleTimeout))
		q, err := readRequest(s)
		if err != nil {
			if errors.Is(err, ErrProtocol) {
				log.Debug("bad blob request, closing stream", "err", err)
				s.SetWriteDeadline(time.Now().Add(requestTimeout))
				writeResponse(s, statusBadRequest, err.Error(), nil)
			}
			return
		}
		// Bound the work done at once, whatever the number of streams: a
		// slot is held from the request (its authorization, which may ask
		// the chain, and reading the manifest or piece) to sending it.
		release, ok := h.acquireSlot(remote)
		if !ok {
			s.Reset()
			return
		}
		status, msg, payload := h.serve(remote, q)
		if status == statusOK && q.kind == kindPiece {
			h.countServed(remote)
		}
		s.SetWriteDeadline(time.Now().Add(requestTimeout))
		err = writeResponse(s, status, msg, payload)
		release()
		if err != nil {
			log.Debug("cannot send blob response", "err", err)
			s.Reset()
			return
		}
		if status == statusOK && q.kind == kindPiece && h.onBytes != nil {
			h.onBytes(true, len(payload))
		}
	}
}

// countServed counts a piece about to be sent to p (for tests).
func (h *Host) countServed(p peer.ID) {
	h.servedMu.Lock()
	h.served[p]++
	h.servedMu.Unlock()
}

// servedTo returns the number of pieces sent to p.
func (h *Host) servedTo(p peer.ID) int {
	h.servedMu.Lock()
	defer h.servedMu.Unlock()
	return h.served[p]
}

// servedTotal returns the number of pieces sent to all peers.
func (h *Host) servedTotal() int {
	h.servedMu.Lock()
	defer h.servedMu.Unlock()
	n := 0
	for _, c := range h.served {
		n += c
	}
	return n
}

// peerSlots is one peer's share of the piece slots.
type peerSlots struct {
	ch    chan struct{}
	users int // goroutines holding or waiting for ch
}

// acquireSlot waits for one of the peer's maxServingPerPeer slots, then for
// one of the host's maxServing slots, so that a peer that reads slowly
// stalls only itself. ok is false when the host closes meanwhile.
func (h *Host) acquireSlot(p peer.ID) (release func(), ok bool) {
	h.servingMu.Lock()
	ps := h.servingPeer[p]
	if ps == nil {
		ps = &peerSlots{ch: make(chan struct{}, maxServingPerPeer)}
		h.servingPeer[p] = ps
	}
	ps.users++
	h.servingMu.Unlock()
	unuse := func() {
		h.servingMu.Lock()
		if ps.users--; ps.users == 0 {
			delete(h.servingPeer, p)
		}
		h.servingMu.Unlock()
	}
	select {
	case ps.ch <- struct{}{}:
	case <-h.ctx.Done():
		unuse()
		return nil, false
	}
	select {
	case h.serveSlots <- struct{}{}:
	case <-h.ctx.Done():
		<-ps.ch
		unuse()
		return nil, false
	}
	return func() {
		<-h.serveSlots
		<-ps.ch
		unuse()
	}, true
}

// DefaultAuthorizeTimeout bounds one access check: a holder whose chain
// node hangs answers "unavailable, try again" after it, not "forbidden",
// and a requester does not wait out requestTimeout for it.
const DefaultAuthorizeTimeout = 10 * time.Second

// serve answers one request.
func (h *Host) serve(remote peer.ID, q request) (status byte, msg string, payload []byte) {
	if h.store == nil {
		return statusNotFound, "this peer keeps no blobs", nil
	}
	if authorize := h.authorizer(); authorize != nil {
		wait := h.authWait
		if wait <= 0 {
			wait = DefaultAuthorizeTimeout
		}
		ctx, cancel := context.WithTimeout(h.ctx, wait)
		err := authorize(ctx, remote, q.hash)
		timedOut := ctx.Err() != nil && h.ctx.Err() == nil
		cancel()
		if errors.Is(err, ErrUnavailable) {
			return statusUnavailable, fmt.Sprintf("blob %x: %v", q.hash, err), nil
		}
		if err != nil && timedOut {
			// The check (its chain query) hangs: the requester asks
			// again, instead of waiting out its whole request.
			return statusUnavailable, fmt.Sprintf("blob %x: the access check took longer than %s (%v); try again", q.hash, wait, err), nil
		}
		if err != nil {
			return statusForbidden, fmt.Sprintf("blob %x: %v", q.hash, err), nil
		}
	}
	if q.kind == kindManifest {
		m, err := h.store.Manifest(q.hash)
		if err != nil {
			return h.storeError(q, err)
		}
		return statusOK, "", m.Encode()
	}
	b, err := h.store.ReadPiece(q.hash, int(q.index))
	if err != nil {
		return h.storeError(q, err)
	}
	return statusOK, "", b
}

// storeError turns a store error into a response.
func (h *Host) storeError(q request, err error) (status byte, msg string, payload []byte) {
	switch {
	case errors.Is(err, blobstore.ErrNotFound):
		return statusNotFound, fmt.Sprintf("blob %x not held", q.hash), nil
	case errors.Is(err, blobstore.ErrNoPiece):
		return statusBadRequest, err.Error(), nil
	}
	h.log.Warn("cannot serve blob", "hash", q.hash, "kind", q.kind, "piece", q.index, "err", err)
	return statusInternal, fmt.Sprintf("blob %x unavailable", q.hash), nil
}

// blobClient is one stream to a peer, used for one request at a time.
type blobClient struct {
	peer peer.ID
	s    network.Stream
	// abandoned: a request on s failed (its context ended, the holder
	// did not answer): the stream's protocol negotiation may never have
	// finished (see close).
	abandoned bool
}

func (h *Host) dialBlob(ctx context.Context, p peer.ID) (*blobClient, error) {
	if h.h.Network().Connectedness(p) != network.Connected && len(h.h.Peerstore().Addrs(p)) == 0 {
		// Not connected and no address known: ask the DHT.
		err := h.waitRouting(ctx)
		if err == nil {
			var ai peer.AddrInfo
			if ai, err = h.dht.FindPeer(ctx, p); err == nil {
				h.addAddrs(ai)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("no address known for peer %s and the DHT cannot find it: %w", p, err)
		}
	}
	s, err := h.h.NewStream(ctx, p, ProtocolBlob)
	if err != nil {
		return nil, fmt.Errorf("cannot open blob stream to %s: %w", p, err)
	}
	return &blobClient{peer: p, s: s}, nil
}

// do sends one request and reads the response, bounded by ctx and
// requestTimeout. After an error other than a refusal the stream is
// unusable: close it.
func (c *blobClient) do(ctx context.Context, q request, maxPayload int) ([]byte, error) {
	deadline := time.Now().Add(requestTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c.s.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { c.s.Reset() })
	defer stop()
	if err := writeFrame(c.s, q.encode()); err != nil {
		c.abandoned = true
		return nil, c.fail(ctx, err)
	}
	b, err := readResponse(c.s, maxPayload)
	if err != nil {
		c.abandoned = true
		return nil, c.fail(ctx, err)
	}
	return b, nil
}

func (c *blobClient) fail(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("peer %s: %w", c.peer, err)
}

// close closes the stream. One whose request failed is closed in the
// background: closing a stream whose lazy protocol negotiation has not
// finished waits for the holder's answer, even after a reset (the soak's
// job 262: a provider's fetch outlived its report deadline by the
// holder's 10-s access check, and the report came after the commit
// deadline). A background close ends within libp2p's negotiation
// timeout (basichost.DefaultNegotiationTimeout, 10 s: the host's stream
// wrapper sets that read deadline before it waits), so a holder that
// never answers costs one goroutine for at most that long per failed
// request.
func (c *blobClient) close() {
	if c.abandoned {
		go c.s.Close()
		return
	}
	c.s.Close()
}

// fetchManifest asks p for the manifest of hash and validates it.
func (h *Host) fetchManifest(ctx context.Context, p peer.ID, hash types.Hash) (*blobstore.Manifest, error) {
	c, err := h.dialBlob(ctx, p)
	if err != nil {
		return nil, err
	}
	defer c.close()
	b, err := c.do(ctx, request{kind: kindManifest, hash: hash}, blobstore.MaxManifestBytes)
	if err != nil {
		return nil, err
	}
	m, err := blobstore.DecodeManifest(b)
	if err != nil {
		return nil, fmt.Errorf("peer %s: %w: bad manifest: %v", p, ErrProtocol, err)
	}
	if m.Hash != hash {
		return nil, fmt.Errorf("peer %s: %w: sent the manifest of %x for %x", p, ErrProtocol, m.Hash, hash)
	}
	return m, nil
}
