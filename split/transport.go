package split

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/ogpu-network/ogpu/types"
)

// Protocol is the hand-off protocol. The sender of a link opens one
// stream to the receiver, writes a 6-byte preamble ("ogs", the version,
// the replica chain as u16 little-endian) and then the link's frames back
// to back; the preamble and the first frame's header (job, sending
// stage) name the link. The receiver writes nothing unless it
// refuses a frame: then it writes one refusal (a 2-byte little-endian
// length, then that many bytes of UTF-8 saying why) and closes the
// stream. A clean end is a close frame, after which the receiver closes
// the stream.
const Protocol protocol.ID = "/ogpu/split/1"

// Authorize says whether remote may send the frames of the link (job,
// replica chain, sending stage; stage is market.ClientStage for the
// client) and which account must sign them. The caller decides from the
// chain: only the previous stage of the same replica chain of that job
// (or the job's client, for stage 0; or the last stage, for the client)
// is allowed. An error refuses the stream.
type Authorize func(ctx context.Context, remote peer.ID, job uint64, chain, stage uint16) (signer types.Address, err error)

// Transport errors; test with errors.Is.
var (
	// ErrForbidden: the receiver expects no such link, or the peer may
	// not send on it.
	ErrForbidden = errors.New("split link forbidden")
	// ErrRefused: the receiver refused a frame of ours; the error says
	// why.
	ErrRefused = errors.New("refused by the receiver")
	// ErrTimeout: a frame did not arrive whole within the frame
	// deadline.
	ErrTimeout = errors.New("split frame deadline passed")
)

// Transport defaults.
const (
	// DefaultIdleTimeout is how long a receiver waits for the next frame
	// on a link before it drops the stream (the sender may reconnect).
	DefaultIdleTimeout = 10 * time.Minute
	// DefaultFrameTimeout bounds reading one frame once its first byte
	// arrived (and a first header, and Authorize), and writing one frame.
	DefaultFrameTimeout = 30 * time.Second
	// DefaultExpectWait: see ServerConfig.ExpectWait.
	DefaultExpectWait = 10 * time.Second
	// DefaultMaxPending is the most streams a server reads a first
	// header from and authorizes at once.
	DefaultMaxPending = 16
	// maxPendingPerPeer is the most streams of one peer a server reads
	// a first header from and authorizes at once.
	maxPendingPerPeer = 2
	// inboxBuffer is the most accepted frames an inbox holds for its
	// reader; beyond them the stream's flow control holds the sender.
	inboxBuffer = 64
	// preambleSize is the stream preamble's size.
	preambleSize = 6
	// refusalWait is how long a sender whose write failed waits for the
	// receiver's refusal, to report why.
	refusalWait = 2 * time.Second
)

// ServerConfig configures a Server.
type ServerConfig struct {
	// ChainID is the chain the hand-off signatures are bound to.
	ChainID string
	// Authorize decides who may send on a link (required).
	Authorize Authorize
	// IdleTimeout: DefaultIdleTimeout if 0.
	IdleTimeout time.Duration
	// FrameTimeout: DefaultFrameTimeout if 0.
	FrameTimeout time.Duration
	// ExpectWait is how long a stream for a link nobody expects yet waits
	// for its inbox before it is refused (parties learn of an award in
	// the same block; the sender may be first): DefaultExpectWait if 0,
	// no wait if negative.
	ExpectWait time.Duration
	// MaxPending: DefaultMaxPending if 0.
	MaxPending int
	// Logger: slog.Default() if nil.
	Logger *slog.Logger
}

// Server receives the hand-off links a node expects (its stages' inputs,
// a client's token links) on a libp2p host. Use one Server per host: it
// owns the host's Protocol handler.
type Server struct {
	h       host.Host
	c       ServerConfig
	log     *slog.Logger
	pending chan struct{}

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu    sync.Mutex
	links map[Link]*Inbox
	// expected is closed (and replaced) whenever an inbox opens, waking
	// streams that arrived for a link before its receiver expected it.
	expected chan struct{}
	streams  map[network.Stream]struct{} // open streams, reset by Close
	// pendingPeer counts each peer's streams not yet authorized.
	pendingPeer map[peer.ID]int
	closed      bool
	wg          sync.WaitGroup
}

// NewServer installs the Protocol handler on h.
func NewServer(h host.Host, c ServerConfig) (*Server, error) {
	if c.Authorize == nil {
		return nil, errors.New("split server: Authorize is required (who may send on a link)")
	}
	if c.ChainID == "" {
		return nil, errors.New("split server: ChainID is required (hand-off signatures are bound to it)")
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.FrameTimeout == 0 {
		c.FrameTimeout = DefaultFrameTimeout
	}
	if c.MaxPending == 0 {
		c.MaxPending = DefaultMaxPending
	}
	if c.ExpectWait == 0 {
		c.ExpectWait = DefaultExpectWait
	}
	if c.IdleTimeout < 0 || c.FrameTimeout < 0 || c.MaxPending < 0 {
		return nil, errors.New("split server: timeouts and MaxPending must not be negative")
	}
	log := c.Logger
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		h:       h,
		c:       c,
		log:     log.With("proto", string(Protocol)),
		pending: make(chan struct{}, c.MaxPending),
		ctx:     ctx,
		cancel:  cancel,
		links:   map[Link]*Inbox{},
		streams: map[network.Stream]struct{}{},

		pendingPeer: map[peer.ID]int{},
	}
	h.SetStreamHandler(Protocol, s.handle)
	return s, nil
}

// Host is the libp2p host the server runs on.
func (s *Server) Host() host.Host { return s.h }

// ChainID is the chain the server's links are bound to.
func (s *Server) ChainID() string { return s.c.ChainID }

// Close removes the handler, ends every inbox and resets its stream, and
// returns when every stream goroutine has returned.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.h.RemoveStreamHandler(Protocol)
	s.cancel()
	ins := make([]*Inbox, 0, len(s.links))
	for _, in := range s.links {
		ins = append(ins, in)
	}
	sts := make([]network.Stream, 0, len(s.streams))
	for st := range s.streams {
		sts = append(sts, st)
	}
	s.mu.Unlock()
	for _, in := range ins {
		in.Close()
	}
	for _, st := range sts {
		_ = st.Reset()
	}
	s.wg.Wait()
}

// InboxConfig says which link an Inbox receives.
type InboxConfig struct {
	Job   uint64
	Chain uint16
	// From is the sending stage (market.ClientStage for the client).
	From uint16
	// Carries is the link's data kind (see ReceiverConfig).
	Carries Kind
	Limits  Limits
	// MaxTranscript: see ReceiverConfig.
	MaxTranscript int64
}

// Expect opens an inbox for a link: from now on, a stream whose first
// frame names that link is authorized and read into it. A link has one
// inbox at a time.
func (s *Server) Expect(c InboxConfig) (*Inbox, error) {
	link := Link{ChainID: s.c.ChainID, Job: c.Job, Chain: c.Chain, From: c.From}
	// Check the config now (the receiver is made when the sender's
	// signer is known).
	if _, err := NewReceiver(ReceiverConfig{Link: link, Signer: types.Address{1}, Limits: c.Limits, Carries: c.Carries, MaxTranscript: c.MaxTranscript}); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("split server closed")
	}
	if _, ok := s.links[link]; ok {
		return nil, fmt.Errorf("split server: an inbox for %s is already open", link)
	}
	in := &Inbox{
		srv:    s,
		link:   link,
		c:      c,
		frames: make(chan Frame, inboxBuffer),
		quit:   make(chan struct{}),
	}
	s.links[link] = in
	if s.expected != nil {
		close(s.expected)
		s.expected = nil
	}
	return in, nil
}

func (s *Server) lookup(l Link) *Inbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.links[l]
}

// await returns the inbox of l, waiting up to the frame deadline for it:
// every party of a job learns of the award from the same block, and an
// upstream may be faster to send than its downstream to expect.
func (s *Server) await(l Link) *Inbox {
	if s.c.ExpectWait < 0 {
		return s.lookup(l)
	}
	deadline := time.NewTimer(s.c.ExpectWait)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		in := s.links[l]
		if in == nil && s.expected == nil {
			s.expected = make(chan struct{})
		}
		wake := s.expected
		s.mu.Unlock()
		if in != nil {
			return in
		}
		select {
		case <-wake:
		case <-deadline.C:
			return nil
		case <-s.ctx.Done():
			return nil
		}
	}
}

// track counts a stream and its goroutine; false once the server is
// closed.
func (s *Server) track(st network.Stream) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	s.streams[st] = struct{}{}
	return true
}

// enterPending counts a not yet authorized stream of p; false if p has
// maxPendingPerPeer already.
func (s *Server) enterPending(p peer.ID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pendingPeer[p] >= maxPendingPerPeer {
		return false
	}
	s.pendingPeer[p]++
	return true
}

func (s *Server) leavePending(p peer.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pendingPeer[p]--; s.pendingPeer[p] <= 0 {
		delete(s.pendingPeer, p)
	}
}

func (s *Server) untrack(st network.Stream) {
	s.mu.Lock()
	delete(s.streams, st)
	s.mu.Unlock()
	s.wg.Done()
}

func appendPreamble(dst []byte, chain uint16) []byte {
	dst = append(dst, magic[0], magic[1], magic[2], Version)
	return binary.LittleEndian.AppendUint16(dst, chain)
}

func parsePreamble(b []byte) (uint16, error) {
	if [3]byte(b[0:3]) != magic || b[3] != Version {
		return 0, fmt.Errorf("%w: stream preamble %q is not \"ogs\", version %d, chain", ErrBadFrame, b[:4], Version)
	}
	return binary.LittleEndian.Uint16(b[4:6]), nil
}

// refuse tells the sender why and closes the stream.
func refuse(st network.Stream, timeout time.Duration, err error) {
	msg := err.Error()
	if len(msg) > MaxMessage {
		msg = msg[:MaxMessage]
	}
	b := binary.LittleEndian.AppendUint16(make([]byte, 0, 2+len(msg)), uint16(len(msg)))
	_ = st.SetWriteDeadline(time.Now().Add(timeout))
	if _, werr := st.Write(append(b, msg...)); werr != nil {
		_ = st.Reset()
		return
	}
	_ = st.Close()
}

func (s *Server) handle(st network.Stream) {
	if !s.track(st) {
		_ = st.Reset()
		return
	}
	defer s.untrack(st)
	// Streams not yet authorized are bounded per peer and in all; a
	// stream waits for a slot up to the frame deadline, so that peers
	// that open streams and stay silent delay real links, not refuse them.
	remote := st.Conn().RemotePeer()
	if !s.enterPending(remote) {
		refuse(st, s.c.FrameTimeout, fmt.Errorf("%w: peer %s has %d streams being opened already", ErrForbidden, remote, maxPendingPerPeer))
		return
	}
	wait := time.NewTimer(s.c.FrameTimeout)
	select {
	case s.pending <- struct{}{}:
		wait.Stop()
	case <-wait.C:
		s.leavePending(remote)
		refuse(st, s.c.FrameTimeout, fmt.Errorf("%w: too many streams being opened at once; retry", ErrForbidden))
		return
	case <-s.ctx.Done():
		s.leavePending(remote)
		_ = st.Reset()
		return
	}
	held := true
	release := func() {
		if held {
			<-s.pending
			s.leavePending(remote)
			held = false
		}
	}
	defer release()
	_ = st.SetReadDeadline(time.Now().Add(s.c.FrameTimeout))
	pre := make([]byte, preambleSize+HeaderSize)
	if _, err := io.ReadFull(st, pre); err != nil {
		_ = st.Reset()
		return
	}
	chain, err := parsePreamble(pre[:preambleSize])
	if err != nil {
		refuse(st, s.c.FrameTimeout, err)
		return
	}
	hb := pre[preambleSize:]
	h, err := parseHeader(hb)
	if err != nil {
		refuse(st, s.c.FrameTimeout, err)
		return
	}
	link := Link{ChainID: s.c.ChainID, Job: h.Job, Chain: chain, From: h.Stage}
	in := s.await(link)
	if in == nil {
		refuse(st, s.c.FrameTimeout, fmt.Errorf("%w: this node expects no frames of %s", ErrForbidden, link))
		return
	}
	actx, cancel := context.WithTimeout(s.ctx, s.c.FrameTimeout)
	signer, err := s.c.Authorize(actx, remote, h.Job, chain, h.Stage)
	cancel()
	if err != nil {
		s.log.Info("split stream refused", "peer", remote, "link", link.String(), "err", err)
		refuse(st, s.c.FrameTimeout, fmt.Errorf("%w: peer %s may not send %s: %v", ErrForbidden, remote, link, err))
		return
	}
	if err := in.attach(st, signer); err != nil {
		refuse(st, s.c.FrameTimeout, err)
		return
	}
	release()
	defer in.detach(st)
	in.serve(st, hb)
}

// Inbox receives one link's frames, checked by a Receiver, in order.
type Inbox struct {
	srv    *Server
	link   Link
	c      InboxConfig
	frames chan Frame // closed by the attached stream's goroutine when the link ends
	quit   chan struct{}

	mu        sync.Mutex
	r         *Receiver // made at the first stream
	signer    types.Address
	st        network.Stream // the attached stream, if any
	ended     bool           // frames closed
	err       error          // why the link ended (nil: close frame)
	closeOnce sync.Once
}

// attach makes st the inbox's stream. The signer must not change between
// streams of one link.
func (in *Inbox) attach(st network.Stream, signer types.Address) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	select {
	case <-in.quit:
		return fmt.Errorf("%w: the inbox of %s is closed", ErrForbidden, in.link)
	default:
	}
	switch {
	case in.ended:
		return fmt.Errorf("%w: %s has ended", ErrLinkClosed, in.link)
	case in.st != nil:
		return fmt.Errorf("%w: %s already has a stream", ErrForbidden, in.link)
	case in.r != nil && signer != in.signer:
		return fmt.Errorf("%w: %s is signed by %s, not %s", ErrForbidden, in.link, in.signer, signer)
	}
	if in.r == nil {
		r, err := NewReceiver(ReceiverConfig{Link: in.link, Signer: signer, Limits: in.c.Limits, Carries: in.c.Carries, MaxTranscript: in.c.MaxTranscript})
		if err != nil {
			return err
		}
		in.r, in.signer = r, signer
	}
	in.st = st
	return nil
}

func (in *Inbox) detach(st network.Stream) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.st == st {
		in.st = nil
	}
}

// serve reads frames from the attached stream st, whose first header is
// hb, until the link ends, the stream ends or the inbox closes.
func (in *Inbox) serve(st network.Stream, hb []byte) {
	c := in.srv.c
	for first := true; ; first = false {
		if !first {
			_ = st.SetReadDeadline(time.Now().Add(c.IdleTimeout))
			if _, err := io.ReadFull(st, hb); err != nil {
				if err == io.ErrUnexpectedEOF {
					in.fail(st, fmt.Errorf("%w: truncated: the stream ended inside frame %d's header", ErrBadFrame, in.steps()+1))
					return
				}
				// The sender dropped the stream between frames (or
				// stayed idle too long): it may reconnect.
				_ = st.Reset()
				return
			}
			_ = st.SetReadDeadline(time.Now().Add(c.FrameTimeout))
		}
		wire, _, err := readRest(st, hb, in.c.Limits)
		if err != nil {
			if errors.Is(err, network.ErrReset) || errors.Is(err, context.Canceled) {
				_ = st.Reset()
				return
			}
			if !errors.Is(err, ErrBadFrame) {
				err = fmt.Errorf("%w: frame %d of %s not received whole within %s: %v", ErrTimeout, in.steps()+1, in.link, c.FrameTimeout, err)
			}
			in.fail(st, err)
			return
		}
		f, err := in.accept(wire)
		if err != nil {
			in.fail(st, err)
			return
		}
		select {
		case in.frames <- f:
		case <-in.quit:
			_ = st.Reset()
			return
		}
		if !f.Kind.data() {
			in.end(nil)
			_ = st.Close()
			return
		}
	}
}

func (in *Inbox) accept(wire []byte) (Frame, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.r.Accept(wire)
}

func (in *Inbox) steps() uint32 {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.r.Steps()
}

// end closes frames with err (nil: the link closed cleanly). Only the
// attached stream's goroutine calls it.
func (in *Inbox) end(err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.ended {
		return
	}
	in.ended, in.err = true, err
	close(in.frames)
}

// fail ends the link with err and refuses the stream: the authorized
// sender sent a frame this link does not take.
func (in *Inbox) fail(st network.Stream, err error) {
	in.srv.log.Warn("split frame refused", "link", in.link.String(), "err", err)
	in.end(err)
	refuse(st, in.srv.c.FrameTimeout, err)
}

// Recv returns the link's next frame. After a close or error frame it
// returns io.EOF; after a refused frame, the refusal (ErrBadFrame,
// ErrBadSignature, ErrBadStep …): no later frame is taken.
func (in *Inbox) Recv(ctx context.Context) (Frame, error) {
	select {
	case f, ok := <-in.frames:
		if ok {
			return f, nil
		}
		in.mu.Lock()
		defer in.mu.Unlock()
		if in.err != nil {
			return Frame{}, in.err
		}
		return Frame{}, io.EOF
	case <-in.quit:
		return Frame{}, fmt.Errorf("the inbox of %s is closed", in.link)
	case <-ctx.Done():
		return Frame{}, ctx.Err()
	}
}

// Link is the link the inbox receives.
func (in *Inbox) Link() Link { return in.link }

// Evidence is the sender's signature over the frames accepted so far
// (see Receiver.Evidence).
func (in *Inbox) Evidence() (Evidence, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.r == nil {
		return Evidence{}, false
	}
	return in.r.Evidence()
}

// Received is the number of frames accepted and their running hash (T,
// Hin).
func (in *Inbox) Received() (uint32, types.Hash) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.r == nil {
		return 0, types.Hash{}
	}
	return in.r.Steps(), in.r.Run()
}

// Transcript is the frames accepted (nil before the first stream, or if
// the config keeps none).
func (in *Inbox) Transcript() *Transcript {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.r == nil {
		return nil
	}
	return in.r.Transcript()
}

// Close stops receiving: the link is forgotten by the server and its
// stream reset. What was received stays readable (Evidence, Transcript).
func (in *Inbox) Close() {
	in.closeOnce.Do(func() {
		s := in.srv
		s.mu.Lock()
		if s.links[in.link] == in {
			delete(s.links, in.link)
		}
		s.mu.Unlock()
		in.mu.Lock()
		close(in.quit)
		st := in.st
		in.mu.Unlock()
		if st != nil {
			_ = st.Reset()
		}
	})
}

// OutboxConfig configures an Outbox.
type OutboxConfig struct {
	// To is the receiving peer.
	To peer.ID
	// WriteTimeout bounds writing one frame (DefaultFrameTimeout if 0).
	WriteTimeout time.Duration
}

// Outbox sends one link's frames to the downstream peer over one stream,
// opened at the first frame. A failed write ends the outbox (the frame
// is sealed and counted in the running hash, so it cannot be sent again
// on a new stream).
type Outbox struct {
	h host.Host
	c OutboxConfig
	s *Sender

	mu       sync.Mutex
	st       network.Stream
	refusal  error         // set by the reader before it closes readDone
	readDone chan struct{} // closed when the reader returns
	err      error
	closed   bool
}

// NewOutbox returns an outbox sending s's frames to c.To through h.
func NewOutbox(h host.Host, s *Sender, c OutboxConfig) (*Outbox, error) {
	if c.To == "" {
		return nil, errors.New("split outbox: the receiving peer is required")
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultFrameTimeout
	}
	return &Outbox{h: h, c: c, s: s}, nil
}

// Sent is the number of frames sealed and their running hash (T and
// Hout of the sending side). A frame whose write failed is counted: it
// was signed.
func (o *Outbox) Sent() (uint32, types.Hash) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.s.Steps(), o.s.Run()
}

// Send seals f and writes it. A frame that cannot be sealed returns an
// error and changes nothing; a failed write (or a refusal the receiver
// sent) ends the outbox.
func (o *Outbox) Send(ctx context.Context, f Frame) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return fmt.Errorf("outbox of %s is closed", o.s.link)
	}
	if o.err != nil {
		return o.err
	}
	if err := o.refused(); err != nil {
		o.err = err
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if o.st == nil {
		st, err := o.h.NewStream(ctx, o.c.To, Protocol)
		if err != nil {
			return fmt.Errorf("cannot open a split stream to %s: %w", o.c.To, err)
		}
		o.st, o.readDone = st, make(chan struct{})
		go o.readRefusal(st)
	}
	wire, err := o.s.Seal(f)
	if err != nil {
		return err
	}
	if o.s.Steps() == 1 {
		wire = append(appendPreamble(nil, o.s.link.Chain), wire...)
	}
	deadline := time.Now().Add(o.c.WriteTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = o.st.SetWriteDeadline(deadline)
	st := o.st
	stop := context.AfterFunc(ctx, func() { _ = st.Reset() })
	_, err = st.Write(wire)
	stop()
	if err != nil {
		o.err = o.explain(fmt.Errorf("cannot send frame %d of %s to %s: %w", o.s.Steps(), o.s.link, o.c.To, err))
		_ = o.st.Reset()
		return o.err
	}
	return nil
}

// readRefusal reads the receiver's refusal, if it sends one.
func (o *Outbox) readRefusal(st network.Stream) {
	defer close(o.readDone)
	var lb [2]byte
	if _, err := io.ReadFull(st, lb[:]); err != nil {
		return
	}
	n := int(binary.LittleEndian.Uint16(lb[:]))
	if n > MaxMessage {
		o.refusal = fmt.Errorf("%w: %s sent a refusal of %d bytes (the limit is %d)", ErrRefused, o.c.To, n, MaxMessage)
		return
	}
	msg := make([]byte, n)
	if _, err := io.ReadFull(st, msg); err != nil {
		return
	}
	o.refusal = fmt.Errorf("%w %s: %s", ErrRefused, o.c.To, printable(string(msg)))
}

// watch returns a channel closed when the receiver ends the stream
// (nil before the first frame), and a func saying why: its refusal, or
// that it closed the stream.
func (o *Outbox) watch() (<-chan struct{}, func() error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.readDone, func() error {
		if o.refusal != nil {
			return o.refusal
		}
		return fmt.Errorf("%s ended the stream of %s", o.c.To, o.s.link)
	}
}

// refused returns the receiver's refusal if the reader has seen one.
func (o *Outbox) refused() error {
	if o.readDone == nil {
		return nil
	}
	select {
	case <-o.readDone:
		return o.refusal
	default:
		return nil
	}
}

// explain returns the receiver's refusal if one arrives shortly, else
// err.
func (o *Outbox) explain(err error) error {
	t := time.NewTimer(refusalWait)
	defer t.Stop()
	select {
	case <-o.readDone:
		if o.refusal != nil {
			return o.refusal
		}
	case <-t.C:
	}
	return err
}

// Close ends the stream: after a close frame it waits (up to the write
// timeout) for the receiver to close its side. It returns the receiver's
// refusal, if any. The reader goroutine has returned when Close returns.
func (o *Outbox) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return o.err
	}
	o.closed = true
	if o.st == nil {
		return o.err
	}
	_ = o.st.CloseWrite()
	t := time.NewTimer(o.c.WriteTimeout)
	defer t.Stop()
	select {
	case <-o.readDone:
	case <-t.C:
	}
	_ = o.st.Reset()
	<-o.readDone
	if o.err == nil && o.refusal != nil {
		o.err = o.refusal
	}
	return o.err
}

// printable keeps a remote message printable.
func printable(s string) string {
	b := []rune{}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			r = '?'
		}
		b = append(b, r)
	}
	return string(b)
}
