package split

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"unicode/utf8"

	"github.com/ethereum/go-ethereum/crypto"
)

// The hand-off frame, byte by byte (integers little-endian):
//
//	off size field
//	 0   3   magic "ogs"
//	 3   1   version (1)
//	 4   1   kind (Kind)
//	 5   1   reserved, zero
//	 6   2   stage   the sender's stage (market.ClientStage for the client)
//	 8   8   job
//	16   4   step    frame counter on this link, from 1
//	20   4   pos0    global position of the first row or token
//	24   4   n       rows, tokens, or message bytes
//	28   4   n_embd  row width (KindActivations only, else 0)
//	32   4   flags   (Flags)
//	36       payload: n·n_embd f32 (KindActivations), n int32
//	         (KindTokens, KindToken), n bytes of UTF-8 (KindError)
//	 …  65   signature [R || S || V] over market.HandoffDigest of the
//	         running hash that includes this frame (see Sender)
//
// The header alone gives the frame's length, so frames need no length
// prefix on a stream and a transcript is frames back to back.
//
// The replica chain is deliberately not in the frame: it is bound by the
// signature (HandoffDigest covers it) and named once per stream (see
// Protocol). So the frames stage s of chain A sends are byte for byte
// those stage s of chain B sends when both compute the same thing, and
// the running hashes that stages commit on chain compare across chains
// (the divergence rule's "equal inputs"; P7's "four parties hold the
// same bytes").

// Frame layout constants.
const (
	// HeaderSize is the fixed header's size in bytes.
	HeaderSize = 36
	// SigSize is the signature's size in bytes.
	SigSize = crypto.SignatureLength
	// Version is the frame format version.
	Version = 1
	// MaxPayload bounds any frame's payload (256 MiB), whatever the
	// limits say: 8,192 rows of n_embd 8,192.
	MaxPayload = 1 << 28
	// MaxMessage bounds a KindError frame's message in bytes.
	MaxMessage = 1024
)

var magic = [3]byte{'o', 'g', 's'}

// Kind says what a frame carries.
type Kind uint8

// Frame kinds. The numbers are wire values: never renumber or reuse.
const (
	// KindActivations: n rows of n_embd f32 residuals, stage s → s+1.
	KindActivations Kind = 1
	// KindTokens: n prompt or fed-back token ids, client → stage 0.
	KindTokens Kind = 2
	// KindToken: the next token (n = 1), last stage → client. pos0 is the
	// position the token takes when fed back: the input frame's pos0+n.
	KindToken Kind = 3
	// KindClose: the sender's last frame on the link (n = 0): the job is
	// over. A stage passes it on.
	KindClose Kind = 4
	// KindError: the sender stops; the payload says why (n bytes of
	// UTF-8). A stage passes it on, so that the client learns of it.
	KindError Kind = 5
)

func (k Kind) String() string {
	switch k {
	case KindActivations:
		return "activations"
	case KindTokens:
		return "tokens"
	case KindToken:
		return "token"
	case KindClose:
		return "close"
	case KindError:
		return "error"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// data reports whether frames of kind k carry a session's positions.
func (k Kind) data() bool { return k == KindActivations || k == KindTokens || k == KindToken }

// Flags modify a data frame.
type Flags uint32

// Flag bits; every other bit must be zero.
const (
	// FlagReset starts a new session: the receiver clears its KV cache
	// before this frame, whose pos0 is 0 (for KindToken: the first token
	// of the new session, at any position).
	FlagReset Flags = 1 << 0

	knownFlags = FlagReset
)

// ErrBadFrame is a frame that does not parse or breaks the link's limits.
// It is the sender's fault, and signed frames prove it.
var ErrBadFrame = errors.New("bad split frame")

// Header is a frame's fixed part.
type Header struct {
	Kind  Kind
	Stage uint16
	Job   uint64
	Step  uint32
	Pos0  uint32
	N     uint32
	NEmbd uint32
	Flags Flags
}

// Frame is one hand-off message. Exactly one of Rows, Tokens or Message
// is used, as Kind says; Sig is the sender's signature (empty until
// sealed).
type Frame struct {
	Header
	Rows    []float32 // KindActivations: N·NEmbd values, row after row
	Tokens  []int32   // KindTokens, KindToken: N token ids
	Message string    // KindError
	Sig     []byte
}

// Limits are what one link accepts. Build them from the job: Context is
// its context size, MaxRows the prefill batch, NEmbd the model's width,
// Vocab its vocabulary size.
type Limits struct {
	// Context bounds positions: pos0+n ≤ Context (for KindToken,
	// pos0 ≤ Context).
	Context uint32
	// MaxRows bounds n, the rows or tokens of one frame.
	MaxRows uint32
	// NEmbd is the width activation rows must have (0: the link carries
	// no activations).
	NEmbd uint32
	// Vocab bounds token ids to [0, Vocab) (0: the link carries no
	// tokens).
	Vocab uint32
}

// Validate checks that the limits are usable and bound a frame by
// MaxPayload.
func (l Limits) Validate() error {
	switch {
	case l.Context == 0:
		return errors.New("split limits: Context must be the job's context size (> 0)")
	case l.MaxRows == 0:
		return errors.New("split limits: MaxRows must be > 0 (the most rows or tokens one frame may carry)")
	case l.MaxRows > l.Context:
		return fmt.Errorf("split limits: MaxRows %d exceeds Context %d", l.MaxRows, l.Context)
	case l.NEmbd == 0 && l.Vocab == 0:
		return errors.New("split limits: set NEmbd (activation links) or Vocab (token links)")
	case uint64(l.MaxRows)*uint64(l.NEmbd)*4 > MaxPayload:
		return fmt.Errorf("split limits: MaxRows %d × NEmbd %d × 4 bytes exceeds the frame bound of %d bytes", l.MaxRows, l.NEmbd, MaxPayload)
	case l.Vocab > math.MaxInt32:
		return fmt.Errorf("split limits: Vocab %d does not fit a token id (int32)", l.Vocab)
	}
	return nil
}

// MaxFrameSize is the largest frame these limits accept, in bytes.
func (l Limits) MaxFrameSize() int {
	p := uint64(l.MaxRows) * 4 * max(uint64(l.NEmbd), 1)
	return HeaderSize + int(max(p, MaxMessage)) + SigSize
}

// payloadLen is the payload size h announces, or an error if it exceeds
// MaxPayload. It trusts nothing in h.
func (h Header) payloadLen() (int, error) {
	var p uint64
	switch h.Kind {
	case KindActivations:
		p = uint64(h.N) * uint64(h.NEmbd) * 4
	case KindTokens, KindToken:
		p = uint64(h.N) * 4
	case KindClose:
		p = 0
	case KindError:
		p = uint64(h.N)
	default:
		return 0, fmt.Errorf("%w: field kind is %d, not a known frame kind (1–5)", ErrBadFrame, uint8(h.Kind))
	}
	if p > MaxPayload {
		return 0, fmt.Errorf("%w: fields n %d and n_embd %d make a payload of %d bytes, above the bound %d", ErrBadFrame, h.N, h.NEmbd, p, MaxPayload)
	}
	return int(p), nil
}

// Size is the whole frame's size in bytes (header, payload, signature),
// for a header that passed parseHeader.
func (h Header) Size() int {
	p, _ := h.payloadLen()
	return HeaderSize + p + SigSize
}

// parseHeader reads the fixed header and checks what needs no limits:
// magic, version, kind, reserved bytes, flags, step and the shape each
// kind requires.
func parseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: truncated: %d bytes, the header alone is %d", ErrBadFrame, len(b), HeaderSize)
	}
	if [3]byte(b[0:3]) != magic {
		return Header{}, fmt.Errorf("%w: field magic is %q, want %q (not a split frame)", ErrBadFrame, b[0:3], magic[:])
	}
	if b[3] != Version {
		return Header{}, fmt.Errorf("%w: field version is %d, this node speaks version %d", ErrBadFrame, b[3], Version)
	}
	if b[5] != 0 {
		return Header{}, fmt.Errorf("%w: reserved header byte is not zero", ErrBadFrame)
	}
	le := binary.LittleEndian
	h := Header{
		Kind:  Kind(b[4]),
		Stage: le.Uint16(b[6:]),
		Job:   le.Uint64(b[8:]),
		Step:  le.Uint32(b[16:]),
		Pos0:  le.Uint32(b[20:]),
		N:     le.Uint32(b[24:]),
		NEmbd: le.Uint32(b[28:]),
		Flags: Flags(le.Uint32(b[32:])),
	}
	if err := h.checkShape(); err != nil {
		return Header{}, err
	}
	return h, nil
}

// checkShape checks the header rules that hold on every link.
func (h Header) checkShape() error {
	if _, err := h.payloadLen(); err != nil {
		return err
	}
	if h.Step == 0 {
		return fmt.Errorf("%w: field step is 0; steps count from 1", ErrBadFrame)
	}
	if h.Flags&^knownFlags != 0 {
		return fmt.Errorf("%w: field flags is %#x, unknown bits %#x", ErrBadFrame, uint32(h.Flags), uint32(h.Flags&^knownFlags))
	}
	if h.Kind != KindActivations && h.NEmbd != 0 {
		return fmt.Errorf("%w: field n_embd is %d in a %s frame, want 0", ErrBadFrame, h.NEmbd, h.Kind)
	}
	switch h.Kind {
	case KindActivations, KindTokens:
		if h.N == 0 {
			return fmt.Errorf("%w: field n is 0 in a %s frame, want at least 1", ErrBadFrame, h.Kind)
		}
	case KindToken:
		if h.N != 1 {
			return fmt.Errorf("%w: field n is %d in a token frame, want 1", ErrBadFrame, h.N)
		}
	case KindClose, KindError:
		if h.Pos0 != 0 || h.Flags != 0 {
			return fmt.Errorf("%w: fields pos0 %d and flags %#x in a %s frame, want 0", ErrBadFrame, h.Pos0, uint32(h.Flags), h.Kind)
		}
		if h.Kind == KindClose && h.N != 0 {
			return fmt.Errorf("%w: field n is %d in a close frame, want 0", ErrBadFrame, h.N)
		}
		if h.Kind == KindError && h.N > MaxMessage {
			return fmt.Errorf("%w: field n is %d in an error frame, the message limit is %d bytes", ErrBadFrame, h.N, MaxMessage)
		}
	}
	return nil
}

// check checks h against a link's limits.
func (l Limits) check(h Header) error {
	if h.Kind.data() && h.N > l.MaxRows {
		return fmt.Errorf("%w: field n is %d, this link takes at most %d rows or tokens per frame", ErrBadFrame, h.N, l.MaxRows)
	}
	switch h.Kind {
	case KindActivations:
		if l.NEmbd == 0 {
			return fmt.Errorf("%w: an activation frame on a token link", ErrBadFrame)
		}
		if h.NEmbd != l.NEmbd {
			return fmt.Errorf("%w: field n_embd is %d, this link carries rows of %d", ErrBadFrame, h.NEmbd, l.NEmbd)
		}
	case KindTokens, KindToken:
		if l.Vocab == 0 {
			return fmt.Errorf("%w: a %s frame on an activation link", ErrBadFrame, h.Kind)
		}
	}
	if !h.Kind.data() {
		return nil
	}
	end := uint64(h.Pos0) + uint64(h.N)
	if h.Kind == KindToken {
		end = uint64(h.Pos0)
	}
	if end > uint64(l.Context) {
		return fmt.Errorf("%w: fields pos0 %d and n %d reach position %d, beyond the context of %d", ErrBadFrame, h.Pos0, h.N, end, l.Context)
	}
	return nil
}

// DecodeHeader parses a frame's header and checks it against lim: after
// it, Size says how many bytes the frame has, and that size is within
// lim.
func DecodeHeader(b []byte, lim Limits) (Header, error) {
	h, err := parseHeader(b)
	if err != nil {
		return Header{}, err
	}
	if err := lim.check(h); err != nil {
		return Header{}, err
	}
	return h, nil
}

// Decode parses one whole frame, signature included, and checks it
// against lim: exact length (no truncation, no trailing bytes), sizes and
// width, positions within the context, every f32 finite, every token in
// [0, Vocab), messages UTF-8. It does not check the signature or the
// link (see Receiver).
func Decode(b []byte, lim Limits) (Frame, error) {
	h, err := DecodeHeader(b, lim)
	if err != nil {
		return Frame{}, err
	}
	size := h.Size()
	switch {
	case len(b) < size:
		return Frame{}, fmt.Errorf("%w: truncated: %d bytes, header says %d (payload and signature)", ErrBadFrame, len(b), size)
	case len(b) > size:
		return Frame{}, fmt.Errorf("%w: %d trailing bytes after the %d the header announces", ErrBadFrame, len(b)-size, size)
	}
	f := Frame{Header: h}
	p := b[HeaderSize : size-SigSize]
	le := binary.LittleEndian
	switch h.Kind {
	case KindActivations:
		f.Rows = make([]float32, len(p)/4)
		for i := range f.Rows {
			v := math.Float32frombits(le.Uint32(p[4*i:]))
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return Frame{}, fmt.Errorf("%w: row %d column %d is %v; activations must be finite", ErrBadFrame, i/int(h.NEmbd), i%int(h.NEmbd), v)
			}
			f.Rows[i] = v
		}
	case KindTokens, KindToken:
		f.Tokens = make([]int32, len(p)/4)
		for i := range f.Tokens {
			t := int32(le.Uint32(p[4*i:]))
			if t < 0 || uint32(t) >= lim.Vocab {
				return Frame{}, fmt.Errorf("%w: token %d is %d, outside the vocabulary [0, %d)", ErrBadFrame, i, t, lim.Vocab)
			}
			f.Tokens[i] = t
		}
	case KindError:
		if !utf8.Valid(p) {
			return Frame{}, fmt.Errorf("%w: error message is not UTF-8", ErrBadFrame)
		}
		f.Message = string(p)
	}
	f.Sig = append([]byte(nil), b[size-SigSize:]...)
	return f, nil
}

// appendBody appends f's header and payload (the signed bytes, without
// the signature) to dst. It refuses what Decode would refuse on any link:
// payload lengths that disagree with N and NEmbd, non-finite rows,
// negative tokens, long or non-UTF-8 messages.
func (f *Frame) appendBody(dst []byte) ([]byte, error) {
	h := f.Header
	switch h.Kind {
	case KindActivations:
		if h.NEmbd == 0 || uint64(len(f.Rows)) != uint64(h.N)*uint64(h.NEmbd) {
			return nil, fmt.Errorf("%w: %d values for n %d rows of n_embd %d", ErrBadFrame, len(f.Rows), h.N, h.NEmbd)
		}
	case KindTokens, KindToken:
		if uint64(len(f.Tokens)) != uint64(h.N) {
			return nil, fmt.Errorf("%w: %d tokens for n %d", ErrBadFrame, len(f.Tokens), h.N)
		}
	case KindError:
		if uint64(len(f.Message)) != uint64(h.N) {
			return nil, fmt.Errorf("%w: message of %d bytes for n %d", ErrBadFrame, len(f.Message), h.N)
		}
		if !utf8.ValidString(f.Message) {
			return nil, fmt.Errorf("%w: error message is not UTF-8", ErrBadFrame)
		}
	}
	if err := h.checkShape(); err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	dst = append(dst, magic[0], magic[1], magic[2], Version, byte(h.Kind), 0)
	dst = le.AppendUint16(dst, h.Stage)
	dst = le.AppendUint64(dst, h.Job)
	dst = le.AppendUint32(dst, h.Step)
	dst = le.AppendUint32(dst, h.Pos0)
	dst = le.AppendUint32(dst, h.N)
	dst = le.AppendUint32(dst, h.NEmbd)
	dst = le.AppendUint32(dst, uint32(h.Flags))
	switch h.Kind {
	case KindActivations:
		for i, v := range f.Rows {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return nil, fmt.Errorf("%w: row %d column %d is %v; activations must be finite", ErrBadFrame, i/int(h.NEmbd), i%int(h.NEmbd), v)
			}
			dst = le.AppendUint32(dst, math.Float32bits(v))
		}
	case KindTokens, KindToken:
		for i, t := range f.Tokens {
			if t < 0 {
				return nil, fmt.Errorf("%w: token %d is %d; token ids are not negative", ErrBadFrame, i, t)
			}
			dst = le.AppendUint32(dst, uint32(t))
		}
	case KindError:
		dst = append(dst, f.Message...)
	}
	return dst, nil
}

// Encode returns f's wire bytes. f must be sealed (65-byte Sig); use
// Sender.Seal to number, hash and sign a frame.
func Encode(f Frame) ([]byte, error) {
	if len(f.Sig) != SigSize {
		return nil, fmt.Errorf("%w: signature of %d bytes, want %d (seal the frame first)", ErrBadFrame, len(f.Sig), SigSize)
	}
	b, err := f.appendBody(make([]byte, 0, f.Size()))
	if err != nil {
		return nil, err
	}
	return append(b, f.Sig...), nil
}

// ReadFrame reads one frame from r: the header first, checked against
// lim, then exactly the bytes it announces, so that nothing is allocated
// from an unchecked length. io.EOF means r ended cleanly before a frame.
func ReadFrame(r io.Reader, lim Limits) ([]byte, Header, error) {
	var hb [HeaderSize]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			err = fmt.Errorf("%w: truncated header", ErrBadFrame)
		}
		return nil, Header{}, err
	}
	return readRest(r, hb[:], lim)
}

// readRest reads the rest of the frame whose header is hb.
func readRest(r io.Reader, hb []byte, lim Limits) ([]byte, Header, error) {
	h, err := DecodeHeader(hb, lim)
	if err != nil {
		return nil, Header{}, err
	}
	b := make([]byte, h.Size())
	copy(b, hb)
	if _, err := io.ReadFull(r, b[HeaderSize:]); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			err = fmt.Errorf("%w: truncated: the stream ended inside a %d-byte %s frame", ErrBadFrame, len(b), h.Kind)
		}
		return nil, Header{}, err
	}
	return b, h, nil
}
