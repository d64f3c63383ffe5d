package types

import (
	"bytes"
	"crypto/ecdsa"
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rlp"
	"github.com/holiman/uint256"
)

// key derives a fixed secp256k1 key from a name.
func key(t testing.TB, name string) *ecdsa.PrivateKey {
	t.Helper()
	k, err := crypto.ToECDSA(crypto.Keccak256([]byte("ogpu types test key " + name)))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// sampleTx is a signed transaction with every field set.
func sampleTx(t testing.TB) *Tx {
	t.Helper()
	tx := &Tx{Body: TxBody{
		ChainID: "ogpu-test-1",
		Nonce:   7,
		Fee:     OGPU(1),
		Msgs: []RawMsg{
			{Type: MsgTypeSend, Data: []byte{0xc2, 0x01, 0x02}},
			{Type: 300, Data: nil},
		},
		Memo: "hello",
	}}
	if err := tx.Sign(key(t, "alice")); err != nil {
		t.Fatal(err)
	}
	return tx
}

func encode(t testing.TB, tx *Tx) []byte {
	t.Helper()
	bz, err := tx.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return bz
}

func TestSignVerifyRoundTrip(t *testing.T) {
	tx := sampleTx(t)
	if want := crypto.PubkeyToAddress(key(t, "alice").PublicKey); tx.Body.From != want {
		t.Fatalf("Sign set From = %s, want %s", tx.Body.From, want)
	}
	if len(tx.Sig) != crypto.SignatureLength {
		t.Fatalf("signature is %d bytes", len(tx.Sig))
	}
	if err := tx.VerifySignature(); err != nil {
		t.Fatalf("VerifySignature: %v", err)
	}
	// Through the wire and back, the signature still verifies.
	dec, err := DecodeTx(encode(t, tx))
	if err != nil {
		t.Fatalf("DecodeTx: %v", err)
	}
	if err := dec.VerifySignature(); err != nil {
		t.Fatalf("VerifySignature after decoding: %v", err)
	}
	// The sign hash commits to the domain: it is not keccak(rlp(body)).
	h, err := tx.Body.SignHash()
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := rlp.EncodeToBytes(&tx.Body)
	if h == crypto.Keccak256Hash(plain) {
		t.Fatal("SignHash does not include the signing domain")
	}
}

// highS returns sig with s replaced by N - s and the recovery id flipped: the
// same signature by the same key, in its malleable form.
func highS(sig []byte) []byte {
	n := crypto.S256().Params().N
	s := new(big.Int).SetBytes(sig[32:64])
	out := bytes.Clone(sig)
	new(big.Int).Sub(n, s).FillBytes(out[32:64])
	out[64] ^= 1
	return out
}

func TestVerifySignatureRefusals(t *testing.T) {
	n := crypto.S256().Params().N
	cases := []struct {
		name   string
		mutate func(tx *Tx)
		log    string
	}{
		{"tampered nonce", func(tx *Tx) { tx.Body.Nonce++ }, "not by sender"},
		{"tampered fee", func(tx *Tx) { tx.Body.Fee = OGPU(2) }, "not by sender"},
		{"tampered chain id", func(tx *Tx) { tx.Body.ChainID = "other" }, "not by sender"},
		{"tampered message", func(tx *Tx) { tx.Body.Msgs[0].Data = []byte{0xc2, 0x01, 0x03} }, "not by sender"},
		{"dropped message", func(tx *Tx) { tx.Body.Msgs = tx.Body.Msgs[:1] }, "not by sender"},
		{"tampered memo", func(tx *Tx) { tx.Body.Memo = "hellO" }, "not by sender"},
		{"wrong sender", func(tx *Tx) { tx.Body.From = crypto.PubkeyToAddress(key(t, "bob").PublicKey) }, "not by sender"},
		{"signed by another key", func(tx *Tx) {
			from := tx.Body.From
			if err := tx.Sign(key(t, "bob")); err != nil {
				t.Fatal(err)
			}
			tx.Body.From = from
		}, "not by sender"},
		{"high S", func(tx *Tx) { tx.Sig = highS(tx.Sig) }, "high S"},
		{"ethereum style V", func(tx *Tx) { tx.Sig[64] += 27 }, "out of range"},
		{"zero R", func(tx *Tx) { clear(tx.Sig[:32]) }, "out of range"},
		{"zero S", func(tx *Tx) { clear(tx.Sig[32:64]) }, "out of range"},
		{"R equal to N", func(tx *Tx) { n.FillBytes(tx.Sig[:32]) }, "out of range"},
		{"short signature", func(tx *Tx) { tx.Sig = tx.Sig[:64] }, "64 bytes"},
		{"long signature", func(tx *Tx) { tx.Sig = append(tx.Sig, 0) }, "66 bytes"},
		{"no signature", func(tx *Tx) { tx.Sig = nil }, "0 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tx := sampleTx(t)
			tc.mutate(tx)
			err := tx.VerifySignature()
			if !errors.Is(err, ErrBadSignature) {
				t.Fatalf("VerifySignature = %v, want ErrBadSignature", err)
			}
			if CodeOf(err) != ErrBadSignature.Code {
				t.Fatalf("CodeOf = %d, want %d", CodeOf(err), ErrBadSignature.Code)
			}
			if !strings.Contains(err.Error(), tc.log) {
				t.Fatalf("error %q does not mention %q", err, tc.log)
			}
		})
	}
}

// The high-S form really is a valid signature by the same key: only the
// canonicality rule refuses it.
func TestHighSRecoversSameSigner(t *testing.T) {
	tx := sampleTx(t)
	h, err := tx.Body.SignHash()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := crypto.SigToPub(h[:], highS(tx.Sig))
	if err != nil {
		t.Fatalf("SigToPub(high S): %v", err)
	}
	if got := crypto.PubkeyToAddress(*pub); got != tx.Body.From {
		t.Fatalf("high-S signature recovers %s, want %s", got, tx.Body.From)
	}
}

// rawList encodes items (each already RLP) as an RLP list.
func rawList(t testing.TB, items ...[]byte) []byte {
	t.Helper()
	raws := make([]rlp.RawValue, len(items))
	for i, it := range items {
		raws[i] = it
	}
	bz, err := rlp.EncodeToBytes(raws)
	if err != nil {
		t.Fatal(err)
	}
	return bz
}

func enc(t testing.TB, v any) []byte {
	t.Helper()
	bz, err := rlp.EncodeToBytes(v)
	if err != nil {
		t.Fatal(err)
	}
	return bz
}

func TestDecodeTxRoundTrip(t *testing.T) {
	minimal := &Tx{Body: TxBody{Fee: new(uint256.Int)}}
	noMsgs := &Tx{Body: TxBody{ChainID: "c", Fee: uint256.NewInt(1), Memo: strings.Repeat("m", 100)}}
	if err := noMsgs.Sign(key(t, "carol")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		tx   *Tx
	}{
		{"signed", sampleTx(t)},
		{"minimal unsigned", minimal},
		{"no messages, long memo", noMsgs},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bz := encode(t, tc.tx)
			dec, err := DecodeTx(bz)
			if err != nil {
				t.Fatalf("DecodeTx: %v", err)
			}
			again := encode(t, dec)
			if !bytes.Equal(again, bz) {
				t.Fatalf("Encode(Decode(x)) != x:\n%x\n%x", again, bz)
			}
			if dec.Body.Fee == nil || !dec.Body.Fee.Eq(tc.tx.Body.Fee) {
				t.Fatalf("fee = %v, want %v", dec.Body.Fee, tc.tx.Body.Fee)
			}
			if dec.Body.From != tc.tx.Body.From || dec.Body.Nonce != tc.tx.Body.Nonce || dec.Body.Memo != tc.tx.Body.Memo || len(dec.Body.Msgs) != len(tc.tx.Body.Msgs) {
				t.Fatalf("decoded body %s differs from %s", &dec.Body, &tc.tx.Body)
			}
		})
	}
}

// A nil fee has no byte form of its own: it encodes as zero and decodes as a
// non-nil zero, so no decoded transaction carries a nil fee.
func TestDecodeTxNilFeeEncodesAsZero(t *testing.T) {
	withNil := &Tx{Body: TxBody{ChainID: "c"}}
	withZero := &Tx{Body: TxBody{ChainID: "c", Fee: new(uint256.Int)}}
	bz := encode(t, withNil)
	if !bytes.Equal(bz, encode(t, withZero)) {
		t.Fatal("nil fee and zero fee encode differently")
	}
	dec, err := DecodeTx(bz)
	if err != nil {
		t.Fatalf("DecodeTx: %v", err)
	}
	if dec.Body.Fee == nil || !dec.Body.Fee.IsZero() {
		t.Fatalf("decoded fee = %v, want a non-nil zero", dec.Body.Fee)
	}
}

func TestDecodeTxRejects(t *testing.T) {
	tx := sampleTx(t)
	valid := encode(t, tx)
	b := &tx.Body
	// The body's fields, each canonically encoded, to rebuild with one
	// field replaced.
	chainID, from, nonce, fee := enc(t, b.ChainID), enc(t, b.From), enc(t, b.Nonce), enc(t, b.Fee)
	msgs, memo, sig := enc(t, b.Msgs), enc(t, b.Memo), enc(t, tx.Sig)
	build := func(body ...[]byte) []byte { return rawList(t, rawList(t, body...), sig) }
	if !bytes.Equal(build(chainID, from, nonce, fee, msgs, memo), valid) {
		t.Fatal("rebuilt encoding differs from Encode: the test's builder is wrong")
	}
	// longList re-encodes a short list with a needless long-form header.
	longList := func(bz []byte) []byte {
		content := bz[1:] // short list: one header byte 0xc0+len
		return append([]byte{0xf8, byte(len(content))}, content...)
	}
	shortBody := rawList(t, chainID, from, enc(t, uint64(5)), fee, enc(t, []RawMsg{}), enc(t, ""))

	cases := []struct {
		name string
		bz   []byte
	}{
		{"empty", nil},
		{"trailing byte", append(bytes.Clone(valid), 0x00)},
		{"trailing list", append(bytes.Clone(valid), 0xc0)},
		{"two transactions", append(bytes.Clone(valid), valid...)},
		{"truncated", valid[:len(valid)-1]},
		{"not a list", enc(t, "hello")},
		{"empty list", []byte{0xc0}},
		{"nonce with leading zero", build(chainID, from, []byte{0x82, 0x00, 0x07}, fee, msgs, memo)},
		{"nonce as one-byte string", build(chainID, from, []byte{0x81, 0x07}, fee, msgs, memo)},
		{"fee with leading zero", build(chainID, from, nonce, append([]byte{0x89, 0x00}, fee[1:]...), msgs, memo)},
		{"fee of 33 bytes", build(chainID, from, nonce, append([]byte{0xa1}, bytes.Repeat([]byte{1}, 33)...), msgs, memo)},
		{"fee missing", build(chainID, from, nonce)},
		{"fee is a list", build(chainID, from, nonce, []byte{0xc0}, msgs, memo)},
		{"memo missing", build(chainID, from, nonce, fee, msgs)},
		{"extra body field", build(chainID, from, nonce, fee, msgs, memo, enc(t, uint64(1)))},
		{"short address", build(chainID, enc(t, b.From[:19]), nonce, fee, msgs, memo)},
		{"long address", build(chainID, enc(t, append(b.From[:], 0)), nonce, fee, msgs, memo)},
		{"nonce over 64 bits", build(chainID, from, enc(t, new(big.Int).Lsh(big.NewInt(1), 64)), fee, msgs, memo)},
		{"msg type over 16 bits", build(chainID, from, nonce, fee, rawList(t, rawList(t, enc(t, uint64(1<<16)), enc(t, []byte{1}))), memo)},
		{"long-form header for short list", rawList(t, longList(shortBody), sig)},
		{"long-form header for short string", build([]byte{0xb8, 0x01, 'c'}, from, nonce, fee, msgs, memo)},
		{"signature missing", rawList(t, rawList(t, chainID, from, nonce, fee, msgs, memo))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeTx(tc.bz)
			if err == nil {
				t.Fatalf("DecodeTx(%x) = %s, want an error", tc.bz, &got.Body)
			}
			if !errors.Is(err, ErrMalformedTx) || CodeOf(err) != ErrMalformedTx.Code {
				t.Fatalf("DecodeTx error = %v (code %d), want ErrMalformedTx", err, CodeOf(err))
			}
		})
	}
}

func TestTxHash(t *testing.T) {
	a := encode(t, sampleTx(t))
	b := append(bytes.Clone(a[:len(a)-1]), a[len(a)-1]^1)
	cases := []struct {
		name  string
		x, y  []byte
		equal bool
	}{
		{"same bytes", a, bytes.Clone(a), true},
		{"one bit differs", a, b, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hx, hy := TxHash(tc.x), TxHash(tc.y)
			if len(hx) != 32 {
				t.Fatalf("TxHash is %d bytes", len(hx))
			}
			if bytes.Equal(hx, hy) != tc.equal {
				t.Fatalf("TxHash equal = %v, want %v", !tc.equal, tc.equal)
			}
		})
	}
}

// FuzzDecodeTx: decoding never panics, refuses with ErrMalformedTx, and
// whatever it accepts re-encodes to exactly the input (one byte form per
// transaction). Seeds are in testdata/fuzz/FuzzDecodeTx plus the ones added
// here.
func FuzzDecodeTx(f *testing.F) {
	valid := encode(f, sampleTx(f))
	f.Add(valid)
	f.Add(encode(f, &Tx{Body: TxBody{Fee: new(uint256.Int)}}))
	f.Add(valid[:len(valid)/2])
	f.Add(append(bytes.Clone(valid), 0))
	f.Add([]byte{})
	f.Add([]byte{0xc0})
	f.Add([]byte{0xc2, 0xc0, 0x80})
	f.Fuzz(func(t *testing.T, bz []byte) {
		tx, err := DecodeTx(bz)
		if err != nil {
			if !errors.Is(err, ErrMalformedTx) {
				t.Fatalf("DecodeTx error %v is not ErrMalformedTx", err)
			}
			if tx != nil {
				t.Fatal("DecodeTx returned a transaction with an error")
			}
			return
		}
		if tx.Body.Fee == nil {
			t.Fatal("decoded transaction has a nil fee")
		}
		again, err := tx.Encode()
		if err != nil {
			t.Fatalf("cannot re-encode a decoded transaction: %v", err)
		}
		if !bytes.Equal(again, bz) {
			t.Fatalf("Encode(Decode(x)) != x:\n%x\n%x", again, bz)
		}
		// Neither of these may panic on any decoded transaction.
		if err := tx.VerifySignature(); err != nil && !errors.Is(err, ErrBadSignature) && !errors.Is(err, ErrMalformedTx) {
			t.Fatalf("VerifySignature error %v has no registered code", err)
		}
		_ = tx.Body.String()
	})
}
