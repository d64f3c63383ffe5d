package he

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// Run: go test -run '^$' -bench . -benchtime 5x ./he/
// Results and the machine they were taken on are in docs/benchmarks.md.

type benchShape struct {
	preset   string
	logSlots int
}

var benchShapes = []benchShape{{"N13", 3}, {"N13", 4}, {"N14", 3}, {"N14", 4}}

// wideShapes add the widest layers a model may have (256 values), where
// the dense layer and its encoding dominate.
var wideShapes = append(append([]benchShape(nil), benchShapes...), benchShape{"N13", 8}, benchShape{"N14", 8})

func shapeName(preset string, logSlots int) string {
	return fmt.Sprintf("%s/w%d", preset, 1<<logSlots)
}

// BenchmarkStage times one dense (n×n, with bias) + degree-2 activation
// stage at the preset's top level three ways:
//
//	he:              Evaluator.EvalStage (encodes the weights on every call)
//	bare:            the same lattigo calls written out (bareStage.evalStage:
//	                 build and encode the linear transformation with the
//	                 64-bit encoder, Evaluate, Rescale, encode and add the
//	                 bias, PolynomialEvaluator.Evaluate)
//	bare-preencoded: bare with the weights and bias encoded once, outside
//	                 the loop: what caching the encoded layer would give
//
// TestEvalStageIsBareLattigoWith64BitEncoder checks that he and bare
// produce the same bytes.
func BenchmarkStage(b *testing.B) {
	for _, s := range wideShapes {
		n := 1 << s.logSlots
		r := rand.New(rand.NewPCG(1, uint64(n)))
		m := buildModel(b, r, s.preset, s.logSlots, n, stageSpec{n, randomPolynomial(r, 2)})
		sk, ek := testKeys(b, s.preset, s.logSlots)
		in, err := sk.Encrypt(randomInput(r, n))
		if err != nil {
			b.Fatal(err)
		}
		ev, err := NewEvaluator(m, ek)
		if err != nil {
			b.Fatal(err)
		}
		bare, err := newBareStage(ek, s.logSlots, &m.Stages[0], n, ev.enc64)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(shapeName(s.preset, s.logSlots)+"/he", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := ev.EvalStage(0, in); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(shapeName(s.preset, s.logSlots)+"/bare", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := bare.evalStage(in.ct); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(shapeName(s.preset, s.logSlots)+"/bare-preencoded", func(b *testing.B) {
			lt, bias, err := bare.encode(in.Level())
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := bare.evalEncoded(in.ct, lt, bias); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(shapeName(s.preset, s.logSlots)+"/encode-only", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, _, err := bare.encode(in.Level()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkKeygen times GenerateKeys and reports the sizes of what it
// makes.
func BenchmarkKeygen(b *testing.B) {
	for _, s := range wideShapes {
		b.Run(shapeName(s.preset, s.logSlots), func(b *testing.B) {
			var sk *SecretKey
			var ek *EvalKeys
			for i := 0; i < b.N; i++ {
				var err error
				if sk, ek, err = GenerateKeys(s.preset, s.logSlots); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			kb, err := ek.Marshal()
			if err != nil {
				b.Fatal(err)
			}
			skb, err := sk.Marshal()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(len(kb)), "evalkey-bytes")
			b.ReportMetric(float64(len(ek.set.GaloisKeys)), "rotation-keys")
			b.ReportMetric(float64(len(skb)), "secretkey-bytes")
		})
	}
}

// BenchmarkUnmarshalEvalKeys times what a provider does once per client:
// checksum, layout check, decode, reduction check.
func BenchmarkUnmarshalEvalKeys(b *testing.B) {
	for _, s := range benchShapes {
		b.Run(shapeName(s.preset, s.logSlots), func(b *testing.B) {
			_, ek := testKeys(b, s.preset, s.logSlots)
			kb, err := ek.Marshal()
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(kb)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := UnmarshalEvalKeys(kb); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkEncrypt(b *testing.B) {
	for _, s := range benchShapes {
		b.Run(shapeName(s.preset, s.logSlots), func(b *testing.B) {
			sk, _ := testKeys(b, s.preset, s.logSlots)
			x := randomInput(rand.New(rand.NewPCG(2, 2)), 1<<s.logSlots)
			var ct *Ciphertext
			for i := 0; i < b.N; i++ {
				var err error
				if ct, err = sk.Encrypt(x); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(len(marshalCT(b, ct))), "ciphertext-bytes")
		})
	}
}

func BenchmarkDecrypt(b *testing.B) {
	for _, s := range benchShapes {
		b.Run(shapeName(s.preset, s.logSlots), func(b *testing.B) {
			sk, _ := testKeys(b, s.preset, s.logSlots)
			ct, err := sk.Encrypt(randomInput(rand.New(rand.NewPCG(3, 3)), 1<<s.logSlots))
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := sk.Decrypt(ct, 1<<s.logSlots); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestWireSizes checks the size of every encoded object against its
// layout and logs the table docs/benchmarks.md reports: a ciphertext at
// each level (2 polynomials × (level+1) residues × N words, plus a header
// and the metadata), and the key files.
func TestWireSizes(t *testing.T) {
	for _, s := range benchShapes {
		sk, ek := testKeys(t, s.preset, s.logSlots)
		p := ek.Params
		ct, err := sk.Encrypt([]float64{1})
		if err != nil {
			t.Fatal(err)
		}
		for lvl := p.MaxLevel(); lvl >= 0; lvl-- {
			c := &Ciphertext{Params: p, Key: ct.Key, ct: ct.ct.CopyNew()}
			c.ct.Resize(1, lvl)
			bz := marshalCT(t, c)
			meta, err := c.ct.MetaData.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			body := 2 * (lvl + 1) * p.N() * 8
			if want := payloadOffset(bz) + 2 + len(meta) + 1 + body + 32; len(bz) != want {
				t.Fatalf("%s ciphertext at level %d: %d bytes, its layout says %d", shapeName(s.preset, s.logSlots), lvl, len(bz), want)
			}
			if _, err := UnmarshalCiphertext(bz); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s ciphertext at level %d: %d bytes", shapeName(s.preset, s.logSlots), lvl, len(bz))
		}
		kb, err := ek.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		// Each key is a gadget ciphertext: digits × 2 polynomials over
		// the Q and P primes, digits = ceil(#Q / #P).
		nq, np := p.MaxLevel()+1, p.PCount()
		digits := (nq + np - 1) / np
		keys := 1 + len(ek.set.GaloisKeys)
		coeffBytes := keys * digits * 2 * (nq + np) * p.N() * 8
		if len(kb) < coeffBytes || len(kb) > coeffBytes+coeffBytes/100 {
			t.Fatalf("%s evaluation keys: %d bytes, %d keys of %d digits hold %d coefficient bytes", shapeName(s.preset, s.logSlots), len(kb), keys, digits, coeffBytes)
		}
		skb, err := sk.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		// The secret key (one polynomial over Q·P) and the public key (two).
		if want := 3 * (nq + np) * p.N() * 8; len(skb) < want || len(skb) > want+want/100 {
			t.Fatalf("%s secret key file: %d bytes, its three polynomials hold %d", shapeName(s.preset, s.logSlots), len(skb), want)
		}
		t.Logf("%s evaluation keys: %d bytes (relinearization + %d rotation keys, %d digits); secret key file: %d bytes",
			shapeName(s.preset, s.logSlots), len(kb), len(ek.set.GaloisKeys), digits, len(skb))
	}
}
