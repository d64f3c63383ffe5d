package split

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
)

var testLimits = Limits{Context: 256, MaxRows: 16, NEmbd: 8, Vocab: 100}

func rowsOf(n, width int, seed float32) []float32 {
	r := make([]float32, n*width)
	for i := range r {
		r[i] = seed + float32(i)*0.25 - 1
	}
	return r
}

// fakeSig is a well-formed but meaningless signature: Decode does not
// check signatures.
func fakeSig() []byte {
	s := make([]byte, SigSize)
	s[0], s[32] = 1, 1
	return s
}

func encodeT(t testing.TB, f Frame) []byte {
	t.Helper()
	if f.Sig == nil {
		f.Sig = fakeSig()
	}
	b, err := Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func actFrame() Frame {
	return Frame{Header: Header{Kind: KindActivations, Job: 7, Stage: 0, Step: 1, Pos0: 0, N: 3, NEmbd: 8, Flags: FlagReset}, Rows: rowsOf(3, 8, 0.5)}
}

func TestFrameRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		f    Frame
	}{
		{"activations", actFrame()},
		{"tokens", Frame{Header: Header{Kind: KindTokens, Job: 1 << 40, Stage: 0xFFFF, Step: 9, Pos0: 10, N: 4}, Tokens: []int32{0, 1, 98, 99}}},
		{"token", Frame{Header: Header{Kind: KindToken, Job: 2, Stage: 2, Step: 3, Pos0: 256, N: 1}, Tokens: []int32{42}}},
		{"close", Frame{Header: Header{Kind: KindClose, Job: 2, Stage: 1, Step: 5}}},
		{"error", Frame{Header: Header{Kind: KindError, Job: 2, Stage: 1, Step: 5, N: 7}, Message: "boom ü"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := encodeT(t, c.f)
			if len(b) != c.f.Size() {
				t.Fatalf("encoded %d bytes, Size says %d", len(b), c.f.Size())
			}
			g, err := Decode(b, testLimits)
			if err != nil {
				t.Fatal(err)
			}
			b2 := encodeT(t, g)
			if !bytes.Equal(b, b2) {
				t.Fatal("decode and encode again changed the bytes")
			}
			if g.Header != c.f.Header || g.Message != c.f.Message || len(g.Rows) != len(c.f.Rows) || len(g.Tokens) != len(c.f.Tokens) {
				t.Fatalf("decoded %+v, want %+v", g, c.f)
			}
			rb, h, err := ReadFrame(bytes.NewReader(append(bytes.Clone(b), b...)), testLimits)
			if err != nil || h != c.f.Header || !bytes.Equal(rb, b) {
				t.Fatalf("ReadFrame: %v, header %+v", err, h)
			}
		})
	}
}

// Header field offsets.
const (
	offStep  = 16
	offPos0  = 20
	offN     = 24
	offNEmbd = 28
	offFlags = 32
)

// setLE overwrites a little-endian field of an encoded frame.
func setLE(b []byte, off int, v uint32, size int) []byte {
	b = bytes.Clone(b)
	switch size {
	case 1:
		b[off] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(b[off:], uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b[off:], v)
	}
	return b
}

// TestDecodeRefuses: every malformed frame a provider could send to crash
// or slow the next stage (P13) is refused with an error naming what is
// wrong.
func TestDecodeRefuses(t *testing.T) {
	good := encodeT(t, actFrame())
	tok := encodeT(t, Frame{Header: Header{Kind: KindTokens, Stage: 0xFFFF, Step: 1, N: 2}, Tokens: []int32{1, 2}})
	nan := actFrame()
	nanB := encodeT(t, nan)
	binary.LittleEndian.PutUint32(nanB[HeaderSize+4*5:], math.Float32bits(float32(math.NaN())))
	infB := bytes.Clone(good)
	binary.LittleEndian.PutUint32(infB[HeaderSize+4*9:], math.Float32bits(float32(math.Inf(-1))))
	cases := []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "truncated"},
		{"short header", good[:HeaderSize-1], "truncated"},
		{"truncated payload", good[:len(good)-SigSize-3], "truncated"},
		{"truncated signature", good[:len(good)-1], "truncated"},
		{"trailing bytes", append(bytes.Clone(good), 0), "trailing bytes"},
		{"magic", setLE(good, 0, 'x', 1), "field magic"},
		{"version", setLE(good, 3, 2, 1), "field version"},
		{"reserved", setLE(good, 5, 1, 1), "reserved"},
		{"unknown kind", setLE(good, 4, 9, 1), "field kind"},
		{"step zero", setLE(good, offStep, 0, 4), "field step"},
		{"unknown flag", setLE(good, offFlags, 4, 4), "field flags"},
		{"wrong n_embd", setLE(setLE(good, offNEmbd, 6, 4), offN, 4, 4), "field n_embd is 6"},
		{"n_embd with length to match", setLE(good, offNEmbd, 4, 4), "field n_embd is 4"},
		{"n too large", setLE(good, offN, 17, 4), "field n is 17"},
		{"n zero", setLE(good, offN, 0, 4), "field n is 0"},
		{"n wrong for payload", setLE(good, offN, 2, 4), "trailing bytes"},
		{"huge n", setLE(good, offN, math.MaxUint32, 4), "fields n 4294967295 and n_embd 8"},
		{"beyond context", setLE(good, offPos0, 254, 4), "beyond the context"},
		{"NaN", nanB, "is NaN"},
		{"Inf", infB, "is -Inf"},
		{"token out of vocabulary", setLE(tok, HeaderSize, 100, 4), "outside the vocabulary"},
		{"negative token", setLE(tok, HeaderSize+4, math.MaxUint32, 4), "token 1 is -1"},
		{"n_embd in a token frame", setLE(tok, offNEmbd, 8, 4), "field n_embd is 8 in a tokens frame"},
		{"close with n", encodeRaw(Header{Kind: KindClose, Step: 1, N: 1}, []byte{0}), "field n is 1 in a close frame"},
		{"error too long", encodeRaw(Header{Kind: KindError, Step: 1, N: MaxMessage + 1}, make([]byte, MaxMessage+1)), "message limit"},
		{"error not UTF-8", encodeRaw(Header{Kind: KindError, Step: 1, N: 1}, []byte{0xff}), "not UTF-8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(c.b, testLimits)
			if !errors.Is(err, ErrBadFrame) {
				t.Fatalf("err %v, want ErrBadFrame", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %q does not say %q", err, c.want)
			}
		})
	}
	// An activation frame on a token-only link and the reverse.
	if _, err := Decode(good, Limits{Context: 256, MaxRows: 16, Vocab: 100}); err == nil || !strings.Contains(err.Error(), "activation frame on a token link") {
		t.Fatalf("activations on a token link: %v", err)
	}
	if _, err := Decode(tok, Limits{Context: 256, MaxRows: 16, NEmbd: 8}); err == nil || !strings.Contains(err.Error(), "on an activation link") {
		t.Fatalf("tokens on an activation link: %v", err)
	}
}

// encodeRaw writes a header and payload without Encode's checks, plus a
// signature.
func encodeRaw(h Header, payload []byte) []byte {
	le := binary.LittleEndian
	b := append([]byte{}, magic[0], magic[1], magic[2], Version, byte(h.Kind), 0)
	b = le.AppendUint16(b, h.Stage)
	b = le.AppendUint64(b, h.Job)
	for _, v := range []uint32{h.Step, h.Pos0, h.N, h.NEmbd, uint32(h.Flags)} {
		b = le.AppendUint32(b, v)
	}
	b = append(b, payload...)
	return append(b, fakeSig()...)
}

func TestEncodeRefuses(t *testing.T) {
	nan := actFrame()
	nan.Rows[3] = float32(math.Inf(1))
	short := actFrame()
	short.Rows = short.Rows[:5]
	neg := Frame{Header: Header{Kind: KindToken, Step: 1, N: 1}, Tokens: []int32{-3}}
	for _, f := range []Frame{nan, short, neg} {
		f.Sig = fakeSig()
		if _, err := Encode(f); !errors.Is(err, ErrBadFrame) {
			t.Fatalf("Encode(%v): err %v, want ErrBadFrame", f.Header, err)
		}
	}
	f := actFrame()
	if _, err := Encode(f); err == nil || !strings.Contains(err.Error(), "seal") {
		t.Fatalf("unsigned frame: %v", err)
	}
}

func TestLimitsValidate(t *testing.T) {
	for _, l := range []Limits{
		{},
		{Context: 10, Vocab: 5},
		{Context: 10, MaxRows: 11, Vocab: 5},
		{Context: 10, MaxRows: 5},
		{Context: 1 << 20, MaxRows: 1 << 16, NEmbd: 8192},
	} {
		if err := l.Validate(); err == nil {
			t.Fatalf("%+v validated", l)
		}
	}
	if err := testLimits.Validate(); err != nil {
		t.Fatal(err)
	}
}

// FuzzDecode: Decode never panics, and whatever it accepts encodes back
// to the same bytes (one encoding per frame, so running hashes of equal
// frames are equal).
func FuzzDecode(f *testing.F) {
	f.Add(encodeT(f, actFrame()))
	f.Add(encodeT(f, Frame{Header: Header{Kind: KindTokens, Stage: 0xFFFF, Step: 1, N: 2}, Tokens: []int32{1, 2}}))
	f.Add(encodeT(f, Frame{Header: Header{Kind: KindToken, Stage: 3, Step: 2, Pos0: 9, N: 1}, Tokens: []int32{7}}))
	f.Add(encodeT(f, Frame{Header: Header{Kind: KindClose, Step: 4}}))
	f.Add(encodeT(f, Frame{Header: Header{Kind: KindError, Step: 4, N: 3}, Message: "bad"}))
	f.Add([]byte("ogs\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := Decode(b, testLimits)
		if err != nil {
			if !errors.Is(err, ErrBadFrame) {
				t.Fatalf("error %v does not wrap ErrBadFrame", err)
			}
			return
		}
		b2, err := Encode(fr)
		if err != nil {
			t.Fatalf("accepted frame does not encode: %v", err)
		}
		if !bytes.Equal(b, b2) {
			t.Fatalf("re-encoding changed the bytes")
		}
		if _, _, err := ReadFrame(bytes.NewReader(b), testLimits); err != nil {
			t.Fatalf("ReadFrame refuses what Decode accepts: %v", err)
		}
	})
}
