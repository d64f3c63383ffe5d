package split

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/types"
)

// RunDomain tags the running hash of a link's frames.
const RunDomain = "ogpu/act/run/v1"

// NextRun is one step of a link's running hash:
//
//	Hrun_0 = zero hash
//	Hrun_t = sha256("ogpu/act/run/v1" | Hrun_{t-1} | sha256(body_t))
//
// where body_t is frame t's bytes without its signature (header and
// payload, as Encode writes them). The sender of frame t signs
// market.HandoffDigest(chainID, job, chain, stage, t, Hrun_t), so one
// signature proves every frame sent on the link so far.
func NextRun(prev types.Hash, body []byte) types.Hash {
	inner := sha256.Sum256(body)
	h := sha256.New()
	h.Write([]byte(RunDomain))
	h.Write(prev[:])
	h.Write(inner[:])
	return types.Hash(h.Sum(nil))
}

// Errors a Receiver returns besides ErrBadFrame; test with errors.Is.
var (
	// ErrWrongLink: the frame names another job or sender stage than the
	// link it arrived on. (A frame of another replica chain fails the
	// signature check: the digest covers the chain, P3.)
	ErrWrongLink = errors.New("frame for another link")
	// ErrBadStep: the step does not follow the last one (replayed,
	// dropped or reordered frame).
	ErrBadStep = errors.New("frame out of order")
	// ErrBadPosition: positions do not continue the session.
	ErrBadPosition = errors.New("positions do not continue the session")
	// ErrBadSignature: the signature is malformed or not by the link's
	// sender. It also wraps market.ErrBadHandoffSig.
	ErrBadSignature = errors.New("frame not signed by the link's sender")
	// ErrLinkClosed: a frame after the link's close or error frame.
	ErrLinkClosed = errors.New("link already closed")
	// ErrTranscriptFull: the link's transcript reached its bound (the
	// job's context size bounds an honest one).
	ErrTranscriptFull = errors.New("transcript bound reached")
)

// Link names one hand-off link: the frames that stage From of replica
// chain Chain of Job sends to the next stage (or, from the last stage, to
// the client). From is market.ClientStage for the client's link to
// stage 0.
type Link struct {
	ChainID string
	Job     uint64
	Chain   uint16
	From    uint16
}

func (l Link) String() string {
	from := fmt.Sprintf("stage %d", l.From)
	if l.From == market.ClientStage {
		from = "the client"
	}
	return fmt.Sprintf("job %d chain %d from %s", l.Job, l.Chain, from)
}

// Sender numbers, hashes and signs the frames of one link. It is not safe
// for concurrent use.
type Sender struct {
	key  *ecdsa.PrivateKey
	link Link
	step uint32
	run  types.Hash
}

// NewSender returns the sender of link, signing with key (the sender's
// account key, which is also its node key).
func NewSender(key *ecdsa.PrivateKey, link Link) (*Sender, error) {
	if key == nil || key.Curve != crypto.S256() {
		return nil, errors.New("split sender: key must be a secp256k1 account key")
	}
	return &Sender{key: key, link: link}, nil
}

// Seal sets f's job, stage and step (the next one), extends the
// running hash with it, signs, and returns the frame's wire bytes. A
// frame that cannot be encoded changes nothing.
func (s *Sender) Seal(f Frame) ([]byte, error) {
	f.Job, f.Stage, f.Step = s.link.Job, s.link.From, s.step+1
	if f.Step == 0 {
		return nil, fmt.Errorf("split sender: %s has sent 2^32-1 frames", s.link)
	}
	body, err := f.appendBody(make([]byte, 0, f.Size()))
	if err != nil {
		return nil, err
	}
	run := NextRun(s.run, body)
	d := market.HandoffDigest(s.link.ChainID, s.link.Job, s.link.Chain, s.link.From, f.Step, run)
	sig, err := crypto.Sign(d[:], s.key)
	if err != nil {
		return nil, fmt.Errorf("split sender: cannot sign: %w", err)
	}
	s.step, s.run = f.Step, run
	return append(body, sig...), nil
}

// Steps is the number of frames sealed (T of the sender's commitment).
func (s *Sender) Steps() uint32 { return s.step }

// Run is the running hash over the frames sealed (Hout).
func (s *Sender) Run() types.Hash { return s.run }

// Link is the link s sends on.
func (s *Sender) Link() Link { return s.link }

// Evidence is a receiver's proof of what it received on a link: the
// sender's signature over the running hash of Steps frames. It is what
// MsgProveHandoff carries (with Steps as T and Hrun as Hin).
type Evidence struct {
	Link  Link
	Steps uint32
	Hrun  types.Hash
	Sig   []byte
}

// Digest is the hand-off digest the signature covers.
func (e Evidence) Digest() types.Hash {
	return market.HandoffDigest(e.Link.ChainID, e.Link.Job, e.Link.Chain, e.Link.From, e.Steps, e.Hrun)
}

// Signer recovers who signed e (see market.HandoffSigner).
func (e Evidence) Signer() (types.Address, error) {
	return market.HandoffSigner(e.Digest(), e.Sig)
}

// Commitment is what a stage commits on chain for a job: T frames
// received and sent (a stage sends one frame per frame it receives), Hin
// the running hash of its input link, Hout of its output link.
type Commitment struct {
	T    uint32
	Hin  types.Hash
	Hout types.Hash
}

// Transcript holds the frames a receiver accepted, signatures included,
// in order, up to a bound in bytes. Its bytes are the frames back to back
// (each frame's header gives its length): what a stage publishes for a
// dispute or a replay, and what VerifyTranscript checks.
type Transcript struct {
	mu     sync.Mutex
	frames [][]byte
	size   int64
	max    int64
}

// DefaultTranscriptBound bounds an honest input transcript on a link
// with limits lim: every position of the context once (4·max(n_embd,1)
// bytes each), one frame per position plus a close and an error frame.
func DefaultTranscriptBound(lim Limits) int64 {
	perFrame := int64(HeaderSize + SigSize)
	return int64(lim.Context)*4*max(int64(lim.NEmbd), 1) + (int64(lim.Context)+2)*perFrame + MaxMessage
}

func newTranscript(max int64) *Transcript { return &Transcript{max: max} }

// fits reports whether a frame of n bytes fits the bound.
func (t *Transcript) fits(n int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.size+int64(n) <= t.max
}

func (t *Transcript) add(frame []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.frames = append(t.frames, frame)
	t.size += int64(len(frame))
}

// Frames returns the frames accepted so far, in order. The byte slices
// are shared: do not modify them.
func (t *Transcript) Frames() [][]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([][]byte(nil), t.frames...)
}

// Len is the number of frames held.
func (t *Transcript) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.frames)
}

// Size is the bytes held.
func (t *Transcript) Size() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.size
}

// WriteTo writes the frames back to back.
func (t *Transcript) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for _, f := range t.Frames() {
		m, err := w.Write(f)
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// ReceiverConfig configures a Receiver.
type ReceiverConfig struct {
	Link Link
	// Signer is the account that must sign every frame: the link's
	// sender.
	Signer types.Address
	// Limits bound every frame.
	Limits Limits
	// Carries is the kind of data frame the link carries: KindTokens
	// from the client, KindToken to the client, KindActivations between
	// stages. Close and error frames come on every link.
	Carries Kind
	// MaxTranscript bounds the transcript kept, in bytes: 0 means
	// DefaultTranscriptBound(Limits), a negative value keeps none (and
	// bounds nothing).
	MaxTranscript int64
}

// Receiver checks the frames of one link in order and keeps its running
// hash, the last signature and the transcript. It is not safe for
// concurrent use.
type Receiver struct {
	c      ReceiverConfig
	step   uint32
	run    types.Hash
	sig    []byte
	next   uint32 // next position expected
	closed Kind   // KindClose or KindError once the link ended
	t      *Transcript
}

// NewReceiver returns a receiver for c.
func NewReceiver(c ReceiverConfig) (*Receiver, error) {
	if err := c.Limits.Validate(); err != nil {
		return nil, err
	}
	switch c.Carries {
	case KindTokens, KindToken:
		if c.Limits.Vocab == 0 {
			return nil, fmt.Errorf("split receiver: a %s link needs Limits.Vocab", c.Carries)
		}
	case KindActivations:
		if c.Limits.NEmbd == 0 {
			return nil, errors.New("split receiver: an activation link needs Limits.NEmbd")
		}
	default:
		return nil, fmt.Errorf("split receiver: Carries must be a data kind (activations, tokens, token), not %s", c.Carries)
	}
	if (c.Carries == KindTokens) != (c.Link.From == market.ClientStage) {
		return nil, fmt.Errorf("split receiver: token input comes from the client (stage %d) only; %s carries %s", market.ClientStage, c.Link, c.Carries)
	}
	if c.Signer == (types.Address{}) {
		return nil, errors.New("split receiver: Signer (the link's sender) is required")
	}
	r := &Receiver{c: c}
	switch {
	case c.MaxTranscript == 0:
		r.t = newTranscript(DefaultTranscriptBound(c.Limits))
	case c.MaxTranscript > 0:
		r.t = newTranscript(c.MaxTranscript)
	}
	return r, nil
}

// Accept checks one frame (wire bytes, signature included) and, if it is
// the next valid frame of the link signed by the link's sender, takes it:
// the running hash, the last signature and the transcript advance. Any
// error leaves the receiver as it was. Checks, cheapest first: format and
// limits, link (job, chain, sender stage), kind, step, positions,
// transcript bound, signature (which binds the chain id and the replica
// chain: a frame signed for another chain is refused, P3).
func (r *Receiver) Accept(wire []byte) (Frame, error) {
	if r.closed != 0 {
		return Frame{}, fmt.Errorf("%w: %s ended with a %s frame at step %d", ErrLinkClosed, r.c.Link, r.closed, r.step)
	}
	f, err := Decode(wire, r.c.Limits)
	if err != nil {
		return Frame{}, err
	}
	l := r.c.Link
	if f.Job != l.Job || f.Stage != l.From {
		got := Link{Job: f.Job, Chain: l.Chain, From: f.Stage}
		return Frame{}, fmt.Errorf("%w: a frame of %s arrived on the link of %s", ErrWrongLink, got, l)
	}
	if f.Kind.data() && f.Kind != r.c.Carries {
		return Frame{}, fmt.Errorf("%w: a %s frame on a link that carries %s", ErrBadFrame, f.Kind, r.c.Carries)
	}
	if f.Step != r.step+1 {
		return Frame{}, fmt.Errorf("%w: field step is %d, want %d (replayed, dropped or reordered frame)", ErrBadStep, f.Step, r.step+1)
	}
	next := r.next
	if f.Kind.data() {
		reset := f.Flags&FlagReset != 0
		switch {
		case f.Kind == KindToken && !reset && f.Pos0 < r.next:
			return Frame{}, fmt.Errorf("%w: token at position %d, the last was at %d", ErrBadPosition, f.Pos0, r.next-1)
		case f.Kind == KindToken:
			next = f.Pos0 + 1
		case reset && f.Pos0 != 0:
			return Frame{}, fmt.Errorf("%w: a reset frame starts a new session at position 0, not %d", ErrBadPosition, f.Pos0)
		case !reset && f.Pos0 != r.next:
			return Frame{}, fmt.Errorf("%w: field pos0 is %d, want %d (the end of the previous frame)", ErrBadPosition, f.Pos0, r.next)
		default:
			next = f.Pos0 + f.N
		}
	}
	if r.t != nil && !r.t.fits(len(wire)) {
		return Frame{}, fmt.Errorf("%w: %s has %d bytes of frames, the bound is %d", ErrTranscriptFull, l, r.t.Size(), r.t.max)
	}
	body := wire[:len(wire)-SigSize]
	run := NextRun(r.run, body)
	d := market.HandoffDigest(l.ChainID, l.Job, l.Chain, l.From, f.Step, run)
	signer, err := market.HandoffSigner(d, f.Sig)
	if err != nil {
		return Frame{}, fmt.Errorf("%w: step %d of %s: %w", ErrBadSignature, f.Step, l, err)
	}
	if signer != r.c.Signer {
		return Frame{}, fmt.Errorf("%w: step %d of %s is signed by %s, want %s", ErrBadSignature, f.Step, l, signer, r.c.Signer)
	}
	r.step, r.run, r.sig, r.next = f.Step, run, f.Sig, next
	if !f.Kind.data() {
		r.closed = f.Kind
	}
	if r.t != nil {
		r.t.add(bytes.Clone(wire))
	}
	return f, nil
}

// Steps is the number of frames accepted (T).
func (r *Receiver) Steps() uint32 { return r.step }

// Run is the running hash over the frames accepted (Hin).
func (r *Receiver) Run() types.Hash { return r.run }

// Evidence returns the sender's signature over the frames accepted so
// far; false before the first frame.
func (r *Receiver) Evidence() (Evidence, bool) {
	if r.step == 0 {
		return Evidence{}, false
	}
	return Evidence{Link: r.c.Link, Steps: r.step, Hrun: r.run, Sig: bytes.Clone(r.sig)}, true
}

// Transcript is the frames accepted (nil if the config keeps none).
func (r *Receiver) Transcript() *Transcript { return r.t }

// Closed reports whether the link ended with a close or error frame.
func (r *Receiver) Closed() bool { return r.closed != 0 }

// Config is the receiver's configuration.
func (r *Receiver) Config() ReceiverConfig { return r.c }

// VerifyTranscript checks a published transcript (frames back to back)
// as the link's receiver would, and returns the evidence its last frame
// carries: anyone (a validator, a replacement stage) can check it against
// the Hin a stage committed before replaying it. The transcript is not
// kept.
func VerifyTranscript(r io.Reader, c ReceiverConfig) (Evidence, error) {
	c.MaxTranscript = -1
	rc, err := NewReceiver(c)
	if err != nil {
		return Evidence{}, err
	}
	for {
		wire, _, err := ReadFrame(r, c.Limits)
		if err == io.EOF {
			break
		}
		if err != nil {
			return Evidence{}, fmt.Errorf("transcript frame %d: %w", rc.Steps()+1, err)
		}
		if _, err := rc.Accept(wire); err != nil {
			return Evidence{}, fmt.Errorf("transcript frame %d: %w", rc.Steps()+1, err)
		}
	}
	e, ok := rc.Evidence()
	if !ok {
		return Evidence{}, errors.New("empty transcript")
	}
	return e, nil
}
