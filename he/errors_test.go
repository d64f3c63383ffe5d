package he

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// wantErr fails unless err is non-nil and its message contains every
// fragment.
func wantErr(t *testing.T, err error, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one mentioning %q", fragments)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Fatalf("error %q does not mention %q", err, f)
		}
	}
}

// noPanic runs f, failing the test if it panics.
func noPanic(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("panic: %v", r)
		}
	}()
	f()
}

func TestWrongPreset(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	m13 := buildModel(t, r, "N13", 3, 8, stageSpec{4, randomPolynomial(r, 2)})
	m14 := buildModel(t, r, "N14", 3, 8, stageSpec{4, randomPolynomial(r, 2)})
	sk13, ek13 := testKeys(t, "N13", 3)
	sk14, _ := testKeys(t, "N14", 3)

	_, err := NewEvaluator(m14, ek13)
	wantErr(t, err, "preset N13", "N14", "--preset N14")

	_, ek13w16 := testKeys(t, "N13", 4)
	_, err = NewEvaluator(m13, ek13w16)
	wantErr(t, err, "2^4", "2^3", "--log-slots 3")

	ev, err := NewEvaluator(m13, ek13)
	if err != nil {
		t.Fatal(err)
	}
	ct14, err := sk14.Encrypt([]float64{0.5})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ev.EvalStage(0, ct14)
	wantErr(t, err, "preset N14", "N13")

	_, err = sk13.Decrypt(ct14, 1)
	wantErr(t, err, "key")

	_, err = NewParams("N15")
	wantErr(t, err, `"N15"`, "N13, N14")
	_, _, err = GenerateKeys("N13", 13)
	wantErr(t, err, "2^13", "2^8")
}

func TestModelTooDeep(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	m := &Model{Format: ModelFormat, Name: "deep", Preset: "N13", LogSlots: 3, Inputs: 8, Stages: []Stage{
		{Name: "first", Dense: randomDense(r, 8, 8), Activation: randomPolynomial(r, 2)},  // 3 levels of 4
		{Name: "second", Dense: randomDense(r, 8, 8), Activation: randomPolynomial(r, 3)}, // 3 more
	}}
	check := func(t *testing.T, err error) {
		var de *DepthError
		if !errors.As(err, &de) {
			t.Fatalf("error %v is not a DepthError", err)
		}
		if de.Stage != 1 || de.StageName != "second" || de.Needed != 3 || de.Left != 1 || de.Available != 4 || de.Preset != "N13" {
			t.Fatalf("DepthError %+v: want stage 1 (second) needing 3 of 1 left of 4", *de)
		}
		wantErr(t, err, "stage 1 (second)", "needs 3 levels", "only 1 are left", "preset N13")
	}
	check(t, m.Validate())
	bz, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	_, err = ParseModel(bz)
	check(t, err)
	_, ek := testKeys(t, "N13", 3)
	_, err = NewEvaluator(m, ek)
	check(t, err)
	// The same model fits N14's seven levels.
	m.Preset = "N14"
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptedCiphertext: every corruption is a clear error, never a
// panic and never a ciphertext.
func TestCorruptedCiphertext(t *testing.T) {
	sk, ek := testKeys(t, "N13", 3)
	ct, err := sk.Encrypt([]float64{0.25, -0.5})
	if err != nil {
		t.Fatal(err)
	}
	good := marshalCT(t, ct)
	off := payloadOffset(good)
	metaLen := int(binary.BigEndian.Uint16(good[off:]))
	coeffs := off + 2 + metaLen + 1 // first coefficient: residue 0 of the first polynomial
	edit := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	kb, err := ek.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	skb, err := sk.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	q0 := ek.Params.Q()[0]

	cases := []struct {
		name      string
		data      []byte
		fragments []string
	}{
		{"flipped payload byte", edit(func(b []byte) []byte { b[len(b)/2] ^= 0x10; return b }), []string{"ciphertext is corrupted", "checksum"}},
		{"flipped checksum byte", edit(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), []string{"checksum"}},
		{"flipped key id byte", edit(func(b []byte) []byte { b[off-9] ^= 1; return b }), []string{"checksum"}},
		{"coefficient = its prime", edit(func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[coeffs:], q0)
			return reseal(b)
		}), []string{"coefficient 0 of residue 0", "not reduced"}},
		{"coefficient all ones", edit(func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[coeffs+8*100:], ^uint64(0))
			return reseal(b)
		}), []string{"coefficient 100 of residue 0", "not reduced"}},
		{"truncated to nothing", nil, []string{"not a ciphertext", `"OGPUHE"`}},
		{"truncated in the magic", good[:4], []string{"not a ciphertext"}},
		{"truncated in the header", good[:20], []string{"truncated"}},
		{"truncated after the header", good[:off+10], []string{"truncated"}},
		{"truncated by one byte", good[:len(good)-1], []string{"truncated"}},
		{"truncated and resealed", reseal(good[:len(good)-8]), []string{"must have", "coefficient bytes"}},
		{"trailing byte", append(append([]byte(nil), good...), 0), []string{"trailing"}},
		{"evaluation keys as a ciphertext", kb, []string{"evaluation key set", "not a ciphertext"}},
		{"secret key as a ciphertext", skb, []string{"secret key", "not a ciphertext"}},
		{"version byte", edit(func(b []byte) []byte { b[len(magic)] = Version + 1; return b }), []string{"version 2", "reads version 1"}},
		{"magic", edit(func(b []byte) []byte { b[0] = 'X'; return b }), []string{"not a ciphertext"}},
		{"unknown kind", edit(func(b []byte) []byte { b[len(magic)+1] = 9; return reseal(b) }), []string{"kind 9", "not a ciphertext"}},
		{"unknown preset", edit(func(b []byte) []byte { copy(b[len(magic)+3:], "X13"); return reseal(b) }), []string{`unknown parameter preset "X13"`}},
		{"other preset's name", edit(func(b []byte) []byte { copy(b[len(magic)+3:], "N14"); return reseal(b) }), []string{"different definition of preset N14"}},
		{"level above the preset's", edit(func(b []byte) []byte { b[off+2+metaLen] = 9; return reseal(b) }), []string{"level 9", "maximum 4"}},
		{"level below the data", edit(func(b []byte) []byte { b[off+2+metaLen] = 1; return reseal(b) }), []string{"level 1 must have"}},
		{"metadata not NTT", edit(func(b []byte) []byte {
			return replaceMeta(t, b, `"IsNTT":"0x01"`, `"IsNTT":"0x00"`)
		}), []string{"NTT"}},
		{"metadata two rows", edit(func(b []byte) []byte {
			return replaceMeta(t, b, `"LogDimensions":["0x00"`, `"LogDimensions":["0x01"`)
		}), []string{"slot dimensions"}},
		{"metadata spelled otherwise", edit(func(b []byte) []byte {
			return replaceMeta(t, b, `"IsNTT":"0x01"`, `"IsNTT": "0x1"`)
		}), []string{"metadata is not in the form this package writes"}},
		{"scale with a modulus", edit(func(b []byte) []byte {
			return replaceMeta(t, b, `"Mod":"0x0.`, `"Mod":"0x1.`)
		}), []string{"not a valid CKKS scale"}},
		{"metadata garbage", edit(func(b []byte) []byte {
			return replaceMeta(t, b, `"IsNTT":"0x01"`, `"IsNTT":"zz01"`)
		}), []string{"metadata", "malformed"}},
		{"metadata length beyond the payload", edit(func(b []byte) []byte {
			binary.BigEndian.PutUint16(b[off:], 0xffff)
			return reseal(b)
		}), []string{"metadata", "malformed"}},
		{"metadata length beyond a short payload", func() []byte {
			b := append([]byte(nil), good[:off+2+metaLen+1]...)
			binary.BigEndian.PutUint16(b[off:], 0xffff)
			return reseal(append(b, make([]byte, 32)...))
		}(), []string{"truncated"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			noPanic(t, func() {
				c, err := UnmarshalCiphertext(tc.data)
				if c != nil {
					t.Fatalf("decoded a ciphertext")
				}
				wantErr(t, err, tc.fragments...)
			})
		})
	}
	// The pristine bytes still decode: the cases edited copies.
	if _, err := UnmarshalCiphertext(good); err != nil {
		t.Fatal(err)
	}
}

// replaceMeta edits the JSON metadata of an encoded ciphertext, fixing its
// length and the checksum.
func replaceMeta(t *testing.T, b []byte, old, new string) []byte {
	t.Helper()
	off := payloadOffset(b)
	ml := int(binary.BigEndian.Uint16(b[off:]))
	meta := string(b[off+2 : off+2+ml])
	if !strings.Contains(meta, old) {
		t.Fatalf("metadata %s has no %s", meta, old)
	}
	meta = strings.Replace(meta, old, new, 1)
	var out []byte
	out = append(out, b[:off]...)
	out = binary.BigEndian.AppendUint16(out, uint16(len(meta)))
	out = append(out, meta...)
	out = append(out, b[off+2+ml:]...)
	return reseal(out)
}

func TestKeysDoNotMatch(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	m := buildModel(t, r, "N13", 3, 8, stageSpec{4, randomPolynomial(r, 2)})
	skA, ekA := testKeys(t, "N13", 3)
	skB, ekB, err := GenerateKeys("N13", 3) // a second client
	if err != nil {
		t.Fatal(err)
	}
	if skA.ID == skB.ID || ekA.ID == ekB.ID {
		t.Fatal("two key generations gave the same key id")
	}
	ctA, err := skA.Encrypt(randomInput(r, 8))
	if err != nil {
		t.Fatal(err)
	}
	evB, err := NewEvaluator(m, ekB)
	if err != nil {
		t.Fatal(err)
	}
	_, err = evB.EvalStage(0, ctA)
	wantErr(t, err, "under key "+skA.ID.String(), "keys are for key "+skB.ID.String())

	_, err = skB.Decrypt(ctA, 8)
	wantErr(t, err, "under key "+skA.ID.String(), "secret key is "+skB.ID.String())

	// A ciphertext evaluated under A decrypts under A only.
	evA, err := NewEvaluator(m, ekA)
	if err != nil {
		t.Fatal(err)
	}
	out, err := evA.EvalStage(0, ctA)
	if err != nil {
		t.Fatal(err)
	}
	_, err = skB.Decrypt(out, 4)
	wantErr(t, err, "under key "+skA.ID.String())
	if _, err := skA.Decrypt(out, 4); err != nil {
		t.Fatal(err)
	}
}

func TestWrongStageInput(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	m := buildModel(t, r, "N13", 3, 8, stageSpec{6, randomPolynomial(r, 2)}, stageSpec{out: 3})
	sk, ek := testKeys(t, "N13", 3)
	ev, err := NewEvaluator(m, ek)
	if err != nil {
		t.Fatal(err)
	}
	in, err := sk.Encrypt(randomInput(r, 8))
	if err != nil {
		t.Fatal(err)
	}
	_, err = ev.EvalStage(1, in) // the raw input, at level 4, given to stage 1
	wantErr(t, err, "stage 1 takes a ciphertext at level 1", "at level 4", "not stage 1's input")

	out0, err := ev.EvalStage(0, in)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ev.EvalStage(0, out0) // stage 0's output given to stage 0 again
	wantErr(t, err, "stage 0 takes a ciphertext at level 4", "at level 1")

	for _, s := range []int{-1, 2} {
		_, err = ev.EvalStage(s, in)
		wantErr(t, err, "stages 0..1")
	}

	// Width: a ciphertext of 16 values for a model of 8.
	sk16, _ := testKeys(t, "N13", 4)
	ct16, err := sk16.Encrypt([]float64{1})
	if err != nil {
		t.Fatal(err)
	}
	ev16, err := NewEvaluator(m, ek)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ev16.EvalStage(0, ct16)
	wantErr(t, err, "key") // another key first

	// Too many values, non-finite values, out-of-range decrypts.
	_, err = sk.Encrypt(make([]float64, 9))
	wantErr(t, err, "9 values", "width 8")
	_, err = sk.Encrypt([]float64{0, nanValue()})
	wantErr(t, err, "value 1 is NaN")
	_, err = sk.Decrypt(in, 9)
	wantErr(t, err, "9 values of a 8-value ciphertext")
}

func nanValue() float64 { var z float64; return z / z }

// TestBadEvalKeys: garbage and forged key blobs are clear errors, not
// panics, and above all not allocations of whatever a forged length
// claims.
func TestBadEvalKeys(t *testing.T) {
	_, ek := testKeys(t, "N13", 3)
	good, err := ek.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	off := payloadOffset(good)
	edit := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return reseal(b)
	}
	r := rand.New(rand.NewPCG(9, 10))
	cases := []struct {
		name      string
		data      []byte
		fragments []string
	}{
		{"random payload of the right size", edit(func(b []byte) {
			for i := off + 1; i < len(b)-32; i++ {
				b[i] = byte(r.Uint32())
			}
		}), []string{"evaluation key set", "shape"}},
		// The ring degree of the first polynomial, 8192, claimed to be
		// 2^34: lattigo's decoder would allocate 128 GiB.
		{"forged polynomial length", edit(func(b []byte) {
			i := bytes.Index(b[off:off+200], binary.LittleEndian.AppendUint64(nil, 8192))
			if i < 0 {
				t.Fatal("no ring degree in the first 200 payload bytes")
			}
			binary.LittleEndian.PutUint64(b[off+i:], 1<<34)
		}), []string{"shape"}},
		{"coefficient not reduced", edit(func(b []byte) {
			binary.LittleEndian.PutUint64(b[len(b)-40:], ^uint64(0))
		}), []string{"not reduced"}},
		{"width byte", edit(func(b []byte) { b[off] = 4 }), []string{"preset N13 at width 2^4 needs"}},
		{"width byte out of range", edit(func(b []byte) { b[off] = 200 }), []string{"2^200"}},
		{"flipped byte", func() []byte { b := append([]byte(nil), good...); b[len(b)/2] ^= 4; return b }(), []string{"checksum"}},
		{"truncated", good[:len(good)/2], []string{"truncated"}},
		{"empty payload", reseal(good[:off+32]), []string{"payload is empty"}},
		{"a ciphertext", func() []byte {
			sk, _ := testKeys(t, "N13", 3)
			ct, err := sk.Encrypt([]float64{1})
			if err != nil {
				t.Fatal(err)
			}
			return marshalCT(t, ct)
		}(), []string{"ciphertext", "not an evaluation key set"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			noPanic(t, func() {
				k, err := UnmarshalEvalKeys(tc.data)
				if k != nil {
					t.Fatal("decoded a key set")
				}
				wantErr(t, err, tc.fragments...)
			})
		})
	}
	if _, err := UnmarshalEvalKeys(good); err != nil {
		t.Fatal(err)
	}
}

func TestBadSecretKey(t *testing.T) {
	sk, _ := testKeys(t, "N13", 3)
	good, err := sk.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	off := payloadOffset(good)
	edit := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return reseal(b)
	}
	skLen := int(binary.BigEndian.Uint64(good[off+1:]))
	cases := []struct {
		name      string
		data      []byte
		fragments []string
	}{
		{"forged polynomial length", edit(func(b []byte) {
			i := bytes.Index(b[off+9:off+200], binary.LittleEndian.AppendUint64(nil, 8192))
			if i < 0 {
				t.Fatal("no ring degree in the first 200 payload bytes")
			}
			binary.LittleEndian.PutUint64(b[off+9+i:], 1<<34)
		}), []string{"secret key", "shape"}},
		{"secret coefficient not reduced", edit(func(b []byte) {
			binary.LittleEndian.PutUint64(b[off+9+skLen-8:], ^uint64(0))
		}), []string{"not reduced"}},
		{"public key altered", edit(func(b []byte) { b[len(b)-40] ^= 1 }), []string{"inconsistent", "hashes to"}},
		{"length field", edit(func(b []byte) { binary.BigEndian.PutUint64(b[off+1:], 1<<40) }), []string{"truncated"}},
		{"evaluation keys as a secret key", func() []byte {
			_, ek := testKeys(t, "N13", 3)
			b, err := ek.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			return b
		}(), []string{"evaluation key set", "not a secret key"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			noPanic(t, func() {
				k, err := UnmarshalSecretKey(tc.data)
				if k != nil {
					t.Fatal("decoded a secret key")
				}
				wantErr(t, err, tc.fragments...)
			})
		})
	}
	k, err := UnmarshalSecretKey(good)
	if err != nil {
		t.Fatal(err)
	}
	if k.ID != sk.ID {
		t.Fatal("decoded key has another id")
	}
}

func TestBadModel(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	base := buildModel(t, r, "N13", 2, 4,
		stageSpec{3, chebyshev(t, "sigmoid", -2, 2, 3)}, stageSpec{out: 2})
	good, err := base.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseModel(good); err != nil {
		t.Fatal(err)
	}
	// mutate decodes the canonical file, applies f and re-encodes.
	mutate := func(f func(m *Model)) []byte {
		m, err := ParseModel(good)
		if err != nil {
			t.Fatal(err)
		}
		f(m)
		bz, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return bz
	}
	replace := func(old, new string) []byte {
		if !bytes.Contains(good, []byte(old)) {
			t.Fatalf("model file has no %q", old)
		}
		return bytes.Replace(good, []byte(old), []byte(new), 1)
	}
	cases := []struct {
		name      string
		data      []byte
		fragments []string
	}{
		{"unknown top-level field", replace(`"format"`, `"colour": 1, "format"`), []string{`unknown field "colour"`}},
		{"unknown stage field", replace(`"name": "s0"`, `"name": "s0", "dropout": 0.5`), []string{`unknown field "dropout"`}},
		{"NaN weight", replace(`"weights": [`+"\n"+`     [`+"\n"+`      `, `"weights": [`+"\n"+`     [`+"\n"+`      NaN, `), []string{"not a pipeline model", "invalid character"}},
		{"huge weight", mutate(func(m *Model) { m.Stages[0].Dense.Weights[0][0] = 1e300 }), []string{"stage 0 (s0)", "weight [0][0] = 1e+300"}},
		{"short weight row", mutate(func(m *Model) { m.Stages[0].Dense.Weights[1] = m.Stages[0].Dense.Weights[1][:3] }), []string{"weight row 1 has 3 columns", "input has 4"}},
		{"second layer's rows", mutate(func(m *Model) { m.Stages[1].Dense.Weights[0] = append(m.Stages[1].Dense.Weights[0], 0) }), []string{"stage 1 (s1)", "weight row 0 has 4 columns", "input has 3"}},
		{"bias length", mutate(func(m *Model) { m.Stages[0].Dense.Bias = m.Stages[0].Dense.Bias[:2] }), []string{"bias has 2 values for 3 outputs"}},
		{"too many outputs", mutate(func(m *Model) {
			d := m.Stages[1].Dense
			for len(d.Weights) < 5 {
				d.Weights = append(d.Weights, make([]float64, 3))
				d.Bias = append(d.Bias, 0)
			}
		}), []string{"5 outputs", "1 to 4"}},
		{"too many inputs", mutate(func(m *Model) { m.Inputs = 5 }), []string{"5 inputs", "1 to 4"}},
		{"empty stage", mutate(func(m *Model) { m.Stages[1] = Stage{Name: "nothing"} }), []string{"empty stage"}},
		{"no stages", mutate(func(m *Model) { m.Stages = nil }), []string{"0 stages"}},
		{"labels", mutate(func(m *Model) { m.Labels = []string{"a", "b", "c"} }), []string{"3 labels for 2 outputs"}},
		{"format", mutate(func(m *Model) { m.Format = "ogpu-pipeline/2" }), []string{`"ogpu-pipeline/2"`, ModelFormat}},
		{"preset", mutate(func(m *Model) { m.Preset = "N99" }), []string{`"N99"`}},
		{"log slots", mutate(func(m *Model) { m.LogSlots = 9 }), []string{"2^9"}},
		{"chebyshev coefficient changed", mutate(func(m *Model) { m.Stages[0].Activation.Coeffs[2] = "0.125" }), []string{"chebyshev coefficient 2 is 0.125", "sigmoid over [-2, 2]", "regenerate"}},
		{"chebyshev interval changed", mutate(func(m *Model) { m.Stages[0].Activation.Interval[1] = 3 }), []string{"chebyshev coefficient", "over [-2, 3]"}},
		{"chebyshev function changed", mutate(func(m *Model) { m.Stages[0].Activation.Function = "tanh" }), []string{"approximation of tanh"}},
		{"chebyshev unknown function", mutate(func(m *Model) { m.Stages[0].Activation.Function = "relu" }), []string{`unknown function "relu"`}},
		{"chebyshev empty interval", mutate(func(m *Model) { m.Stages[0].Activation.Interval = [2]float64{1, 1} }), []string{"interval [1, 1]"}},
		{"coefficient not a number", mutate(func(m *Model) { m.Stages[0].Activation.Coeffs[0] = "one" }), []string{`coefficient 0 ("one") is not a decimal number`}},
		{"coefficient NaN", mutate(func(m *Model) { m.Stages[0].Activation.Coeffs[0] = "NaN" }), []string{`coefficient 0 ("NaN")`}},
		{"coefficient huge", mutate(func(m *Model) { m.Stages[0].Activation.Coeffs[0] = "1e30" }), []string{"larger than"}},
		{"polynomial with an interval", mutate(func(m *Model) { m.Stages[0].Activation.Kind = ActPolynomial }), []string{"takes no function or interval"}},
		{"activation kind", mutate(func(m *Model) { m.Stages[0].Activation.Kind = "relu" }), []string{`kind "relu"`}},
		{"one coefficient", mutate(func(m *Model) {
			m.Stages[0].Activation = &Activation{Kind: ActPolynomial, Coeffs: []string{"1"}}
		}), []string{"1 coefficients"}},
		{"not JSON", []byte("stages: 3"), []string{"not a pipeline model"}},
		{"empty", nil, []string{"not a pipeline model"}},
		{"trailing garbage", append(append([]byte(nil), good...), "{}"...), []string{"after the model"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			noPanic(t, func() {
				m, err := ParseModel(tc.data)
				if m != nil {
					t.Fatal("parsed a model")
				}
				wantErr(t, err, tc.fragments...)
			})
		})
	}
}
