package he

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/he"
	"github.com/tuneinsight/lattigo/v5/ring/ringqp"
)

// bsgsRatio is the log2 baby-step/giant-step ratio of every dense layer:
// 0 needs the fewest rotation keys (about 2·sqrt(n)).
const bsgsRatio = 0

// MaxLogSlots bounds the vector width of a model: 2^8 = 256 values.
const MaxLogSlots = 8

// SecretKey is a client's CKKS key pair. It never leaves the client: what
// providers get is its EvalKeys.
type SecretKey struct {
	Params *Params
	// LogSlots is the width of the vectors it encrypts: 2^LogSlots values,
	// sparsely packed so that rotations wrap around that width.
	LogSlots int
	ID       KeyID
	sk       *rlwe.SecretKey
	pk       *rlwe.PublicKey
}

// EvalKeys are the public evaluation keys of a client key: the
// relinearization key and the rotation keys every dense layer of width
// 2^LogSlots needs. They are published once as a blob and cached by
// providers under its hash.
type EvalKeys struct {
	Params   *Params
	LogSlots int
	ID       KeyID
	set      *rlwe.MemEvaluationKeySet
}

// Rotations lists the Galois elements of the rotations a dense layer of
// width 2^logSlots needs with every diagonal present, in the baby-step
// giant-step order the evaluator uses.
func Rotations(p *Params, logSlots int) []uint64 {
	n := 1 << logSlots
	diags := make([]int, n)
	for i := range diags {
		diags[i] = i
	}
	return he.GaloisElementsForLinearTransformation(p.Parameters, diags, n, bsgsRatio)
}

func checkLogSlots(p *Params, logSlots int) error {
	if logSlots < 0 || logSlots > MaxLogSlots || logSlots > p.LogMaxSlots() {
		return fmt.Errorf("he: vector width 2^%d is out of range: use 2^0 to 2^%d", logSlots, min(MaxLogSlots, p.LogMaxSlots()))
	}
	return nil
}

// GenerateKeys makes a fresh key pair for vectors of 2^logSlots values and
// its evaluation keys.
func GenerateKeys(preset string, logSlots int) (*SecretKey, *EvalKeys, error) {
	p, err := cachedParams(preset)
	if err != nil {
		return nil, nil, err
	}
	if err := checkLogSlots(p, logSlots); err != nil {
		return nil, nil, err
	}
	kgen := rlwe.NewKeyGenerator(p.Parameters)
	sk, pk := kgen.GenKeyPairNew()
	id, err := keyID(pk)
	if err != nil {
		return nil, nil, err
	}
	rlk := kgen.GenRelinearizationKeyNew(sk)
	gks := kgen.GenGaloisKeysNew(Rotations(p, logSlots), sk)
	set := rlwe.NewMemEvaluationKeySet(rlk, gks...)
	return &SecretKey{Params: p, LogSlots: logSlots, ID: id, sk: sk, pk: pk},
		&EvalKeys{Params: p, LogSlots: logSlots, ID: id, set: set}, nil
}

func keyID(pk *rlwe.PublicKey) (KeyID, error) {
	bz, err := pk.MarshalBinary()
	if err != nil {
		return KeyID{}, fmt.Errorf("he: public key: %w", err)
	}
	return KeyID(sha256.Sum256(bz)), nil
}

// Marshal encodes the secret key (with its public key) for the client's
// own disk.
func (k *SecretKey) Marshal() ([]byte, error) {
	skb, err := k.sk.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("he: secret key: %w", err)
	}
	pkb, err := k.pk.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("he: public key: %w", err)
	}
	var b bytes.Buffer
	b.WriteByte(byte(k.LogSlots))
	b.Write(binary.BigEndian.AppendUint64(nil, uint64(len(skb))))
	b.Write(skb)
	b.Write(pkb)
	return seal(KindSecretKey, k.Params, k.ID, b.Bytes()), nil
}

// UnmarshalSecretKey decodes a secret key written by Marshal.
func UnmarshalSecretKey(data []byte) (*SecretKey, error) {
	env, err := open(data, KindSecretKey)
	if err != nil {
		return nil, err
	}
	p, bz := env.params, env.payload
	if len(bz) < 9 {
		return nil, fmt.Errorf("he: secret key payload is truncated")
	}
	logSlots := int(bz[0])
	if err := checkLogSlots(p, logSlots); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint64(bz[1:9])
	if n > uint64(len(bz)-9) {
		return nil, fmt.Errorf("he: secret key payload is truncated")
	}
	sk, pk := rlwe.NewSecretKey(p.Parameters), rlwe.NewPublicKey(p.Parameters)
	if sk.BinarySize() != int(n) || pk.BinarySize() != len(bz)-9-int(n) {
		return nil, fmt.Errorf("he: secret key payload does not match preset %s", p.Name)
	}
	if err := sameShape("secret key", sk, qpRows(p, sk.Value, nil), bz[9:9+n]); err != nil {
		return nil, err
	}
	if err := sameShape("public key", pk, vectorRows(p, pk.Value, nil), bz[9+n:]); err != nil {
		return nil, err
	}
	if err := guard("secret key", func() error { return sk.UnmarshalBinary(bz[9 : 9+n]) }); err != nil {
		return nil, err
	}
	if err := guard("public key", func() error { return pk.UnmarshalBinary(bz[9+n:]) }); err != nil {
		return nil, err
	}
	if err := reduced("secret key", append(qpRows(p, sk.Value, nil), vectorRows(p, pk.Value, nil)...)); err != nil {
		return nil, err
	}
	id, err := keyID(pk)
	if err != nil {
		return nil, err
	}
	if id != env.key {
		return nil, fmt.Errorf("he: secret key file is inconsistent: its public key hashes to %s, the header says %s", id, env.key)
	}
	return &SecretKey{Params: p, LogSlots: logSlots, ID: id, sk: sk, pk: pk}, nil
}

// Marshal encodes the evaluation keys: the blob a client publishes.
func (k *EvalKeys) Marshal() ([]byte, error) {
	bz, err := k.set.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("he: evaluation keys: %w", err)
	}
	return seal(KindEvalKeys, k.Params, k.ID, append([]byte{byte(k.LogSlots)}, bz...)), nil
}

// UnmarshalEvalKeys decodes and checks an evaluation key set: the preset,
// the relinearization key and exactly the rotation keys a dense layer of
// its width needs, each of the preset's shape.
func UnmarshalEvalKeys(data []byte) (*EvalKeys, error) {
	env, err := open(data, KindEvalKeys)
	if err != nil {
		return nil, err
	}
	p, bz := env.params, env.payload
	if len(bz) < 1 {
		return nil, fmt.Errorf("he: evaluation key payload is empty")
	}
	logSlots := int(bz[0])
	if err := checkLogSlots(p, logSlots); err != nil {
		return nil, err
	}
	want := Rotations(p, logSlots)
	// The exact size of a well-formed set, checked before decoding so
	// that garbage cannot make the decoder allocate what it claims.
	ref := rlwe.NewMemEvaluationKeySet(rlwe.NewRelinearizationKey(p.Parameters))
	for _, g := range want {
		gk := rlwe.NewGaloisKey(p.Parameters)
		gk.GaloisElement = g
		ref.GaloisKeys[g] = gk
	}
	if size := ref.BinarySize(); size != len(bz)-1 {
		return nil, fmt.Errorf("he: evaluation key set has %d bytes, preset %s at width 2^%d needs %d: it is not a key set this build made", len(bz)-1, p.Name, logSlots, size)
	}
	if err := sameShape("evaluation key set", ref, evalKeyRows(p, ref), bz[1:]); err != nil {
		return nil, err
	}
	set := &rlwe.MemEvaluationKeySet{}
	if err := guard("evaluation keys", func() error { return set.UnmarshalBinary(bz[1:]) }); err != nil {
		return nil, err
	}
	if err := reduced("evaluation key set", evalKeyRows(p, set)); err != nil {
		return nil, err
	}
	if set.RelinearizationKey == nil {
		return nil, fmt.Errorf("he: evaluation key set has no relinearization key")
	}
	for _, g := range want {
		gk, ok := set.GaloisKeys[g]
		if !ok {
			return nil, fmt.Errorf("he: evaluation key set lacks the rotation key for Galois element %d", g)
		}
		if gk.LevelQ() != p.MaxLevelQ() || gk.LevelP() != p.MaxLevelP() {
			return nil, fmt.Errorf("he: rotation key %d has the wrong shape for preset %s", g, p.Name)
		}
	}
	if len(set.GaloisKeys) != len(want) {
		return nil, fmt.Errorf("he: evaluation key set has %d rotation keys, width 2^%d needs %d", len(set.GaloisKeys), logSlots, len(want))
	}
	return &EvalKeys{Params: p, LogSlots: logSlots, ID: env.key, set: set}, nil
}

// coeffRow is one residue polynomial of a key and its prime.
type coeffRow struct {
	coeffs  []uint64
	modulus uint64
}

// qpRows appends the residues of a polynomial over Q·P.
func qpRows(p *Params, poly ringqp.Poly, rows []coeffRow) []coeffRow {
	q, pp := p.Q(), p.P()
	for i, r := range poly.Q.Coeffs {
		rows = append(rows, coeffRow{r, q[i]})
	}
	for i, r := range poly.P.Coeffs {
		rows = append(rows, coeffRow{r, pp[i]})
	}
	return rows
}

func vectorRows(p *Params, v rlwe.VectorQP, rows []coeffRow) []coeffRow {
	for _, poly := range v {
		rows = qpRows(p, poly, rows)
	}
	return rows
}

func gadgetRows(p *Params, g *rlwe.GadgetCiphertext, rows []coeffRow) []coeffRow {
	for _, vs := range g.Value {
		for _, v := range vs {
			rows = vectorRows(p, v, rows)
		}
	}
	return rows
}

// evalKeyRows lists every residue of a key set's keys.
func evalKeyRows(p *Params, set *rlwe.MemEvaluationKeySet) []coeffRow {
	var rows []coeffRow
	if set.RelinearizationKey != nil {
		rows = gadgetRows(p, &set.RelinearizationKey.GadgetCiphertext, rows)
	}
	for _, gk := range set.GaloisKeys {
		rows = gadgetRows(p, &gk.GadgetCiphertext, rows)
	}
	return rows
}

// reduced checks that every coefficient is below its prime: lattigo's
// decoder does not, and unreduced residues are not a key this package
// made.
func reduced(what string, rows []coeffRow) error {
	for _, r := range rows {
		for j, x := range r.coeffs {
			if x >= r.modulus {
				return fmt.Errorf("he: %s: coefficient %d of a residue modulo %d is not reduced: the file is corrupted", what, j, r.modulus)
			}
		}
	}
	return nil
}

// sameShape checks, before lattigo's decoder reads a byte of it, that
// data encodes an object of ref's shape: every byte but the coefficients
// (lengths, dimensions, levels, Galois elements) equal to ref's encoding.
// lattigo's decoder allocates whatever lengths the data claims, so a key
// file with a forged length would otherwise make it allocate many
// gigabytes, which is a fatal error, not a panic. rows are ref's
// coefficients: ref is encoded twice, with them all zero and all ones,
// and a coefficient byte is one that is 0x00 in the first encoding and
// 0xff in the second; every other byte must match in both. It leaves
// ref's coefficients all ones.
func sameShape(what string, ref io.WriterTo, rows []coeffRow, data []byte) error {
	for _, fill := range []uint64{0, ^uint64(0)} {
		for _, r := range rows {
			for j := range r.coeffs {
				r.coeffs[j] = fill
			}
		}
		cmp := &shapeWriter{data: data, skip: byte(fill), bad: -1}
		w := bufio.NewWriterSize(cmp, 1<<16)
		_, err := ref.WriteTo(w)
		if err == nil {
			err = w.Flush()
		}
		switch {
		case cmp.bad >= 0:
			return fmt.Errorf("he: %s does not have the preset's shape (byte %d of its payload is not what the preset's layout has there): it is not a file this build made", what, cmp.bad)
		case err != nil:
			return fmt.Errorf("he: %s: %w", what, err)
		case cmp.off != len(data):
			return fmt.Errorf("he: %s has %d payload bytes, the preset's shape has %d: it is not a file this build made", what, len(data), cmp.off)
		}
	}
	return nil
}

// shapeWriter compares an encoding written to it with data, except for
// the bytes equal to skip.
type shapeWriter struct {
	data []byte
	off  int
	skip byte
	bad  int // offset of the first byte that differs, -1 if none
}

var errShape = fmt.Errorf("shape mismatch")

func (w *shapeWriter) Write(b []byte) (int, error) {
	if len(b) > len(w.data)-w.off {
		w.bad = len(w.data)
		return 0, errShape
	}
	d := w.data[w.off : w.off+len(b)]
	if !bytes.Equal(b, d) {
		// Eight bytes at a time: a window of eight skip bytes is inside
		// the coefficients.
		skip8 := uint64(w.skip) * 0x0101010101010101
		i := 0
		for ; i+8 <= len(b); i += 8 {
			if binary.LittleEndian.Uint64(b[i:]) == skip8 || binary.LittleEndian.Uint64(b[i:]) == binary.LittleEndian.Uint64(d[i:]) {
				continue
			}
			for k := i; k < i+8; k++ {
				if b[k] != w.skip && d[k] != b[k] {
					w.bad = w.off + k
					return 0, errShape
				}
			}
		}
		for ; i < len(b); i++ {
			if b[i] != w.skip && d[i] != b[i] {
				w.bad = w.off + i
				return 0, errShape
			}
		}
	}
	w.off += len(b)
	return len(b), nil
}

// guard runs a lattigo decoder, turning its panics on garbage into errors.
func guard(what string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("he: %s: malformed encoding (%v)", what, r)
		}
	}()
	if err := f(); err != nil {
		return fmt.Errorf("he: %s: malformed encoding: %w", what, err)
	}
	return nil
}
