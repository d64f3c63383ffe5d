package split

import (
	"bytes"
	"crypto/ecdsa"
	"errors"
	"strings"
	"testing"

	ethcrypto "github.com/ethereum/go-ethereum/crypto"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/types"
)

const testChainID = "ogpu-test"

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ethcrypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func addr(k *ecdsa.PrivateKey) types.Address { return ethcrypto.PubkeyToAddress(k.PublicKey) }

// actLink is stage 1 of chain 0 of job 7 sending activations.
var actLink = Link{ChainID: testChainID, Job: 7, Chain: 0, From: 1}

func newPair(t testing.TB, link Link, carries Kind) (*Sender, *Receiver, *ecdsa.PrivateKey) {
	t.Helper()
	k := newKey(t)
	s, err := NewSender(k, link)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReceiver(ReceiverConfig{Link: link, Signer: addr(k), Limits: testLimits, Carries: carries})
	if err != nil {
		t.Fatal(err)
	}
	return s, r, k
}

func act(pos0, n uint32, flags Flags) Frame {
	return Frame{Header: Header{Kind: KindActivations, Pos0: pos0, N: n, NEmbd: testLimits.NEmbd, Flags: flags}, Rows: rowsOf(int(n), int(testLimits.NEmbd), float32(pos0))}
}

func seal(t testing.TB, s *Sender, f Frame) []byte {
	t.Helper()
	b, err := s.Seal(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSenderReceiver(t *testing.T) {
	s, r, k := newPair(t, actLink, KindActivations)
	var sent [][]byte
	for _, f := range []Frame{act(0, 4, FlagReset), act(4, 4, 0), act(8, 1, 0), act(9, 1, 0), {Header: Header{Kind: KindClose}}} {
		b := seal(t, s, f)
		sent = append(sent, b)
		got, err := r.Accept(b)
		if err != nil {
			t.Fatalf("step %d: %v", s.Steps(), err)
		}
		if got.Step != s.Steps() || got.Job != actLink.Job || got.Stage != actLink.From {
			t.Fatalf("frame header %+v", got.Header)
		}
	}
	if r.Steps() != 5 || r.Run() != s.Run() || r.Run() == (types.Hash{}) {
		t.Fatalf("receiver (%d, %x), sender (%d, %x)", r.Steps(), r.Run(), s.Steps(), s.Run())
	}
	// The running hash is the documented formula.
	var h types.Hash
	for _, b := range sent {
		h = NextRun(h, b[:len(b)-SigSize])
	}
	if h != r.Run() {
		t.Fatal("running hash differs from NextRun over the frame bodies")
	}
	// The kept signature proves the transcript to anyone (MsgProveHandoff).
	e, ok := r.Evidence()
	if !ok {
		t.Fatal("no evidence")
	}
	if got, err := market.HandoffSigner(market.HandoffDigest(testChainID, 7, 0, 1, 5, s.Run()), e.Sig); err != nil || got != addr(k) {
		t.Fatalf("evidence recovers %s, %v; want the sender %s", got, err, addr(k))
	}
	// The transcript holds exactly the frames, and verifies to the same
	// evidence.
	var buf bytes.Buffer
	if _, err := r.Transcript().WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), bytes.Join(sent, nil)) || r.Transcript().Len() != 5 {
		t.Fatal("transcript is not the frames received")
	}
	ve, err := VerifyTranscript(bytes.NewReader(buf.Bytes()), r.Config())
	if err != nil || ve.Hrun != e.Hrun || ve.Steps != e.Steps || !bytes.Equal(ve.Sig, e.Sig) {
		t.Fatalf("VerifyTranscript: %v, %+v", err, ve)
	}
	// After close nothing more is taken.
	if _, err := r.Accept(seal(t, s, act(10, 1, 0))); !errors.Is(err, ErrLinkClosed) {
		t.Fatalf("frame after close: %v", err)
	}
}

// TestEvidenceConvicts: a sender that commits an output hash other than
// what it signed (P2) is contradicted by the receiver's evidence, and
// two different signed hashes for one step are equivocation (P3).
func TestEvidenceConvicts(t *testing.T) {
	s, r, k := newPair(t, actLink, KindActivations)
	if _, err := r.Accept(seal(t, s, act(0, 2, FlagReset))); err != nil {
		t.Fatal(err)
	}
	e, _ := r.Evidence()
	who, err := e.Signer()
	if err != nil || who != addr(k) {
		t.Fatalf("evidence signer %s, %v", who, err)
	}
	// The liar claims another Hout for the same step: the evidence does
	// not recover it for that claim.
	claimed := e
	claimed.Hrun[0] ^= 1
	if got, err := claimed.Signer(); err == nil && got == addr(k) {
		t.Fatal("the signature also proves a different running hash")
	}
	claimed = e
	claimed.Steps++
	if got, err := claimed.Signer(); err == nil && got == addr(k) {
		t.Fatal("the signature also proves a different step count")
	}
	// The same sender signing a different frame at step 1 for a second
	// receiver: both signatures recover to it, over different hashes.
	s2, err := NewSender(k, actLink)
	if err != nil {
		t.Fatal(err)
	}
	other := act(0, 2, FlagReset)
	other.Rows[0] += 1
	r2, _ := NewReceiver(r.Config())
	if _, err := r2.Accept(seal(t, s2, other)); err != nil {
		t.Fatal(err)
	}
	e2, _ := r2.Evidence()
	who2, err := e2.Signer()
	if err != nil || who2 != who || e2.Steps != e.Steps || e2.Hrun == e.Hrun {
		t.Fatalf("equivocation evidence: %s %v, steps %d/%d", who2, err, e2.Steps, e.Steps)
	}
}

// TestReceiverRefuses: every frame that is not the link's next frame from
// its sender is refused with a clear error, and the receiver is unchanged
// (the right frame is still accepted next).
func TestReceiverRefuses(t *testing.T) {
	stranger := newKey(t)
	type tc struct {
		name string
		make func(t *testing.T, s *Sender, k *ecdsa.PrivateKey) []byte
		is   error
		want string
	}
	cases := []tc{
		{"replayed step", func(t *testing.T, s *Sender, _ *ecdsa.PrivateKey) []byte {
			return nil // the frame already accepted, again
		}, ErrBadStep, "field step is 1, want 2"},
		{"skipped step", func(t *testing.T, s *Sender, _ *ecdsa.PrivateKey) []byte {
			seal(t, s, act(4, 1, 0)) // never delivered
			return seal(t, s, act(4, 1, 0))
		}, ErrBadStep, "field step is 3, want 2"},
		{"position gap", func(t *testing.T, s *Sender, _ *ecdsa.PrivateKey) []byte {
			return seal(t, s, act(5, 1, 0))
		}, ErrBadPosition, "field pos0 is 5, want 4"},
		{"position overlap", func(t *testing.T, s *Sender, _ *ecdsa.PrivateKey) []byte {
			return seal(t, s, act(3, 1, 0))
		}, ErrBadPosition, "field pos0 is 3, want 4"},
		{"reset not at 0", func(t *testing.T, s *Sender, _ *ecdsa.PrivateKey) []byte {
			return seal(t, s, act(4, 1, FlagReset))
		}, ErrBadPosition, "at position 0, not 4"},
		{"signed by another key", func(t *testing.T, _ *Sender, _ *ecdsa.PrivateKey) []byte {
			s, _ := NewSender(stranger, actLink)
			seal(t, s, act(0, 4, FlagReset))
			return seal(t, s, act(4, 1, 0))
		}, ErrBadSignature, "signed by " + addr(stranger).Hex()},
		{"bad signature", func(t *testing.T, s *Sender, _ *ecdsa.PrivateKey) []byte {
			b := seal(t, s, act(4, 1, 0))
			b[HeaderSize] ^= 1 // payload changed after signing
			return b
		}, ErrBadSignature, "signed by"},
		{"malformed signature", func(t *testing.T, s *Sender, _ *ecdsa.PrivateKey) []byte {
			b := seal(t, s, act(4, 1, 0))
			copy(b[len(b)-SigSize+32:], bytes.Repeat([]byte{0xff}, 32)) // S above the order
			return b
		}, market.ErrBadHandoffSig, "out of range"},
		{"other chain (P3)", func(t *testing.T, _ *Sender, k *ecdsa.PrivateKey) []byte {
			l := actLink
			l.Chain = 1
			s, _ := NewSender(k, l)
			seal(t, s, act(0, 4, FlagReset))
			return seal(t, s, act(4, 1, 0))
		}, ErrBadSignature, "step 2 of job 7 chain 0 from stage 1 is signed by"},
		{"other stage", func(t *testing.T, _ *Sender, k *ecdsa.PrivateKey) []byte {
			l := actLink
			l.From = 2
			s, _ := NewSender(k, l)
			seal(t, s, act(0, 4, FlagReset))
			return seal(t, s, act(4, 1, 0))
		}, ErrWrongLink, "from stage 2"},
		{"other job", func(t *testing.T, _ *Sender, k *ecdsa.PrivateKey) []byte {
			l := actLink
			l.Job = 8
			s, _ := NewSender(k, l)
			seal(t, s, act(0, 4, FlagReset))
			return seal(t, s, act(4, 1, 0))
		}, ErrWrongLink, "job 8"},
		{"other chain id", func(t *testing.T, _ *Sender, k *ecdsa.PrivateKey) []byte {
			l := actLink
			l.ChainID = "elsewhere"
			s, _ := NewSender(k, l)
			seal(t, s, act(0, 4, FlagReset))
			return seal(t, s, act(4, 1, 0))
		}, ErrBadSignature, "signed by"},
		{"wrong kind", func(t *testing.T, s *Sender, _ *ecdsa.PrivateKey) []byte {
			return seal(t, s, Frame{Header: Header{Kind: KindTokens, Pos0: 4, N: 1}, Tokens: []int32{1}})
		}, ErrBadFrame, "a tokens frame on a link that carries activations"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, r, k := newPair(t, actLink, KindActivations)
			first := seal(t, s, act(0, 4, FlagReset))
			if _, err := r.Accept(first); err != nil {
				t.Fatal(err)
			}
			bad := c.make(t, s, k)
			if bad == nil {
				bad = first
			}
			steps, run, tlen := r.Steps(), r.Run(), r.Transcript().Len()
			_, err := r.Accept(bad)
			if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %v saying %q", err, c.is, c.want)
			}
			if r.Steps() != steps || r.Run() != run || r.Transcript().Len() != tlen {
				t.Fatal("a refused frame changed the receiver")
			}
			// The honest next frame is still taken.
			h, _ := NewSender(k, actLink)
			seal(t, h, act(0, 4, FlagReset))
			if _, err := r.Accept(seal(t, h, act(4, 1, 0))); err != nil {
				t.Fatalf("honest frame after a refused one: %v", err)
			}
		})
	}
}

func TestTokenLinkPositions(t *testing.T) {
	l := Link{ChainID: testChainID, Job: 3, Chain: 1, From: 2}
	s, r, _ := newPair(t, l, KindToken)
	tok := func(pos uint32, flags Flags) Frame {
		return Frame{Header: Header{Kind: KindToken, Pos0: pos, N: 1, Flags: flags}, Tokens: []int32{5}}
	}
	// Prefill chunks of 4 and 3 give tokens at 4 and 7, then decode.
	for _, f := range []Frame{tok(4, FlagReset), tok(7, 0), tok(8, 0)} {
		if _, err := r.Accept(seal(t, s, f)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Accept(seal(t, s, tok(8, 0))); !errors.Is(err, ErrBadPosition) {
		t.Fatalf("token at a repeated position: %v", err)
	}
	// The client link carries tokens only from the client.
	if _, err := NewReceiver(ReceiverConfig{Link: l, Signer: addr(newKey(t)), Limits: testLimits, Carries: KindTokens}); err == nil {
		t.Fatal("a token-input link from a stage")
	}
}

func TestTranscriptBound(t *testing.T) {
	k := newKey(t)
	s, _ := NewSender(k, actLink)
	f1 := seal(t, s, act(0, 4, FlagReset))
	r, err := NewReceiver(ReceiverConfig{Link: actLink, Signer: addr(k), Limits: testLimits, Carries: KindActivations, MaxTranscript: int64(len(f1)) + 10})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Accept(f1); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Accept(seal(t, s, act(4, 1, 0))); !errors.Is(err, ErrTranscriptFull) {
		t.Fatalf("frame beyond the transcript bound: %v", err)
	}
	// The default bound holds a whole honest context.
	r, _ = NewReceiver(ReceiverConfig{Link: actLink, Signer: addr(k), Limits: testLimits, Carries: KindActivations})
	s, _ = NewSender(k, actLink)
	for p := uint32(0); p < testLimits.Context; p++ {
		flags := Flags(0)
		if p == 0 {
			flags = FlagReset
		}
		if _, err := r.Accept(seal(t, s, act(p, 1, flags))); err != nil {
			t.Fatalf("position %d: %v", p, err)
		}
	}
	if _, err := r.Accept(seal(t, s, Frame{Header: Header{Kind: KindError, N: MaxMessage}, Message: strings.Repeat("x", MaxMessage)})); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyTranscriptRefuses(t *testing.T) {
	s, r, _ := newPair(t, actLink, KindActivations)
	a := seal(t, s, act(0, 4, FlagReset))
	b := seal(t, s, act(4, 4, 0))
	for _, f := range [][]byte{a, b} {
		if _, err := r.Accept(f); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range map[string][]byte{
		"reordered": append(bytes.Clone(b), a...),
		"truncated": append(bytes.Clone(a), b[:len(b)-1]...),
		"empty":     nil,
	} {
		if _, err := VerifyTranscript(bytes.NewReader(data), r.Config()); err == nil {
			t.Fatalf("%s transcript verified", name)
		}
	}
	c := r.Config()
	c.Signer = addr(newKey(t))
	if _, err := VerifyTranscript(bytes.NewReader(append(bytes.Clone(a), b...)), c); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("transcript checked against another signer: %v", err)
	}
}
