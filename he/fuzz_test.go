package he

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// The fuzz targets try each input as it is and resealed (payload length
// and checksum recomputed): without that, almost every mutation stops at
// the checksum and the decoders behind it are never reached.
//
//	go test -run '^$' -fuzz FuzzUnmarshalCiphertext -fuzztime 60s ./he/

// smallSeal seals a payload in an envelope of the given kind.
func smallSeal(t testing.TB, kind Kind, preset string, payload []byte) []byte {
	p, err := NewParams(preset)
	if err != nil {
		t.Fatal(err)
	}
	return seal(kind, p, KeyID{1, 2, 3}, payload)
}

func FuzzUnmarshalCiphertext(f *testing.F) {
	// A ciphertext at level 0 of N13 (about 130 kB) and its header with
	// the metadata only.
	r := rand.New(rand.NewPCG(1, 1))
	m := buildModel(f, r, "N13", 0, 1, stageSpec{act: randomPolynomial(r, 1)}, stageSpec{act: randomPolynomial(r, 1)},
		stageSpec{act: randomPolynomial(r, 1)}, stageSpec{act: randomPolynomial(r, 1)})
	sk, ek := testKeys(f, "N13", 0)
	ev, err := NewEvaluator(m, ek)
	if err != nil {
		f.Fatal(err)
	}
	in, err := sk.Encrypt([]float64{0.5})
	if err != nil {
		f.Fatal(err)
	}
	outs := runStages(f, ev, in)
	level0 := marshalCT(f, outs[len(outs)-1])
	f.Add(level0)
	off := payloadOffset(level0)
	ml := int(level0[off])<<8 | int(level0[off+1])
	f.Add(reseal(append(append([]byte(nil), level0[:off+3+ml]...), make([]byte, 32)...)))
	f.Add(smallSeal(f, KindCiphertext, "N13", []byte{0, 2, '{', '}', 0}))
	f.Add(smallSeal(f, KindCiphertext, "N14", nil))
	f.Add([]byte("OGPUHE\x01\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, d := range [][]byte{data, reseal(data)} {
			c, err := UnmarshalCiphertext(d)
			if err != nil {
				if c != nil {
					t.Fatal("a ciphertext and an error")
				}
				continue
			}
			out, err := c.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out, d) {
				t.Fatalf("decoded ciphertext re-encodes to other bytes (%d vs %d)", len(out), len(d))
			}
		}
	})
}

// FuzzCiphertextMetadata fuzzes the JSON metadata of a ciphertext that
// is otherwise well formed (level 0 of N13, zero coefficients), which
// FuzzUnmarshalCiphertext reaches only when a mutation keeps the
// metadata's length prefix right.
func FuzzCiphertextMetadata(f *testing.F) {
	sk, _ := testKeys(f, "N13", 3)
	ct, err := sk.Encrypt([]float64{1})
	if err != nil {
		f.Fatal(err)
	}
	meta, err := ct.ct.MetaData.MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(meta)
	f.Add(bytes.Replace(meta, []byte(`"IsNTT":"0x01"`), []byte(`"IsNTT": "0x01"`), 1))
	f.Add(bytes.Replace(meta, []byte(`"IsNTT":"0x01"`), []byte(`"IsNTT":"1"`), 1))
	f.Add(bytes.Replace(meta, []byte(`"IsBatched":"0x01"`), []byte(`"isbatched":"0x01"`), 1))
	f.Add(bytes.Replace(meta, []byte(`"Mod":"0x0.`), []byte(`"Mod":"0x1.`), 1))
	p, err := NewParams("N13")
	if err != nil {
		f.Fatal(err)
	}
	body := make([]byte, 2*p.N()*8)
	f.Fuzz(func(t *testing.T, meta []byte) {
		if len(meta) > 1<<15 {
			return
		}
		payload := append(binary.BigEndian.AppendUint16(nil, uint16(len(meta))), meta...)
		payload = append(append(payload, 0), body...)
		data := seal(KindCiphertext, p, KeyID{}, payload)
		c, err := UnmarshalCiphertext(data)
		if err != nil {
			return
		}
		out, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, data) {
			t.Fatalf("ciphertext with metadata %q re-encodes to other bytes", meta)
		}
	})
}

func FuzzUnmarshalEvalKeys(f *testing.F) {
	// Small seeds only: a real key set is megabytes. The unit tests feed
	// whole garbage and forged key sets.
	f.Add(smallSeal(f, KindEvalKeys, "N13", []byte{3}))
	f.Add(smallSeal(f, KindEvalKeys, "N13", []byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 0}))
	f.Add(smallSeal(f, KindEvalKeys, "N14", []byte{9, 0, 0}))
	f.Add(smallSeal(f, KindEvalKeys, "N13", nil))
	_, ek := testKeys(f, "N13", 0)
	kb, err := ek.Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(reseal(append(append([]byte(nil), kb[:payloadOffset(kb)+256]...), make([]byte, 32)...)))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, d := range [][]byte{data, reseal(data)} {
			k, err := UnmarshalEvalKeys(d)
			if err != nil {
				if k != nil {
					t.Fatal("a key set and an error")
				}
				continue
			}
			out, err := k.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out, d) {
				t.Fatal("decoded key set re-encodes to other bytes")
			}
		}
	})
}

func FuzzParseModel(f *testing.F) {
	r := rand.New(rand.NewPCG(2, 2))
	for _, m := range []*Model{
		buildModel(f, r, "N13", 2, 3, stageSpec{4, randomPolynomial(r, 2)}, stageSpec{out: 2}),
		buildModel(f, r, "N14", 1, 2, stageSpec{act: chebyshev(f, "tanh", -1, 1, 3)}, stageSpec{2, chebyshev(f, "sigmoid", -3, 2, 2)}),
	} {
		bz, err := m.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(bz)
	}
	f.Add([]byte(`{"format":"ogpu-pipeline/1","name":"x","preset":"N13","log_slots":0,"inputs":1,"stages":[{"name":"a","activation":{"kind":"polynomial","coeffs":["0","1"]}}]}`))
	f.Add([]byte(`{"format":"ogpu-pipeline/1","preset":"N13","log_slots":1,"inputs":2,"stages":[{"dense":{"weights":[[1,2]]}}]}`))
	f.Add([]byte(`{"stages":[{"activation":{"kind":"chebyshev","function":"softplus","interval":[0,1e-300],"coeffs":["0","0"]}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseModel(data)
		if err != nil {
			if m != nil {
				t.Fatal("a model and an error")
			}
			return
		}
		canon, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		m2, err := ParseModel(canon)
		if err != nil {
			t.Fatalf("the canonical form of a valid model does not parse: %v", err)
		}
		again, err := m2.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(canon, again) {
			t.Fatal("the canonical form is not stable: the model hash would change on a round trip")
		}
		// A valid model runs in plaintext without panicking.
		if _, err := m.Forward(make([]float64, m.Inputs)); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzPeek(f *testing.F) {
	f.Add(smallSeal(f, KindCiphertext, "N13", []byte{1, 2, 3}))
	f.Add(smallSeal(f, KindEvalKeys, "N14", nil))
	f.Add(smallSeal(f, KindSecretKey, "N13", []byte{0}))
	f.Add([]byte("OGPUHE"))
	f.Add([]byte("OGPUHE\x01\x02\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, d := range [][]byte{data, reseal(data)} {
			kind, preset, key, err := Peek(d)
			if err != nil {
				continue
			}
			// Whatever Peek accepts is exactly what seal writes for its
			// header and payload.
			p, err := NewParams(preset)
			if err != nil {
				t.Fatalf("Peek accepted preset %q: %v", preset, err)
			}
			payload := d[payloadOffset(d) : len(d)-32]
			if !bytes.Equal(seal(kind, p, key, payload), d) {
				t.Fatal("Peek accepted bytes that seal does not write")
			}
		}
	})
}
