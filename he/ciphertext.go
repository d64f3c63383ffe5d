package he

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/he/hefloat"
	"github.com/tuneinsight/lattigo/v5/ring"
)

// Ciphertext is an encrypted vector of 2^LogSlots values under a client
// key.
type Ciphertext struct {
	Params *Params
	Key    KeyID
	ct     *rlwe.Ciphertext
}

// Level is how many rescalings it still affords.
func (c *Ciphertext) Level() int { return c.ct.Level() }

// LogSlots is log2 of its vector width.
func (c *Ciphertext) LogSlots() int { return c.ct.LogDimensions.Cols }

// Encrypt encrypts values (at most 2^LogSlots of them; the rest are zero)
// at the preset's full depth.
func (k *SecretKey) Encrypt(values []float64) (*Ciphertext, error) {
	n := 1 << k.LogSlots
	if len(values) > n {
		return nil, fmt.Errorf("he: %d values do not fit a key of width %d", len(values), n)
	}
	for i, v := range values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("he: value %d is %v: only finite values can be encrypted", i, v)
		}
	}
	padded := make([]float64, n)
	copy(padded, values)
	pt := hefloat.NewPlaintext(k.Params.Parameters, k.Params.MaxLevel())
	pt.LogDimensions = ring.Dimensions{Rows: 0, Cols: k.LogSlots}
	if err := hefloat.NewEncoder(k.Params.Parameters).Encode(padded, pt); err != nil {
		return nil, fmt.Errorf("he: encode: %w", err)
	}
	ct, err := rlwe.NewEncryptor(k.Params.Parameters, k.sk).EncryptNew(pt)
	if err != nil {
		return nil, fmt.Errorf("he: encrypt: %w", err)
	}
	return &Ciphertext{Params: k.Params, Key: k.ID, ct: ct}, nil
}

// Decrypt decrypts c and returns its first n values.
func (k *SecretKey) Decrypt(c *Ciphertext, n int) ([]float64, error) {
	if c.Key != k.ID {
		return nil, fmt.Errorf("he: the ciphertext is under key %s, this secret key is %s: use the key that encrypted the input", c.Key, k.ID)
	}
	if c.Params.Name != k.Params.Name {
		return nil, fmt.Errorf("he: the ciphertext uses preset %s, the key %s", c.Params.Name, k.Params.Name)
	}
	slots := 1 << c.LogSlots()
	if n < 0 || n > slots {
		return nil, fmt.Errorf("he: asked for %d values of a %d-value ciphertext", n, slots)
	}
	pt := rlwe.NewDecryptor(k.Params.Parameters, k.sk).DecryptNew(c.ct)
	out := make([]float64, slots)
	if err := hefloat.NewEncoder(k.Params.Parameters).Decode(pt, out); err != nil {
		return nil, fmt.Errorf("he: decode: %w", err)
	}
	return out[:n], nil
}

// Marshal encodes the ciphertext: lattigo's metadata, then both
// polynomials' residues as little-endian uint64s, level by level. The
// bytes are a function of the ciphertext alone, so equal ciphertexts hash
// equal.
func (c *Ciphertext) Marshal() ([]byte, error) {
	meta, err := c.ct.MetaData.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("he: ciphertext metadata: %w", err)
	}
	lvl := c.ct.Level()
	n := c.Params.N()
	out := make([]byte, 0, 3+len(meta)+2*(lvl+1)*n*8)
	out = binary.BigEndian.AppendUint16(out, uint16(len(meta)))
	out = append(out, meta...)
	out = append(out, byte(lvl))
	for _, poly := range c.ct.Value {
		for i := 0; i <= lvl; i++ {
			for _, x := range poly.Coeffs[i][:n] {
				out = binary.LittleEndian.AppendUint64(out, x)
			}
		}
	}
	return seal(KindCiphertext, c.Params, c.Key, out), nil
}

// UnmarshalCiphertext decodes and checks a ciphertext: its shape must be
// the preset's, every residue below its prime, and its metadata that of a
// CKKS ciphertext this package made.
func UnmarshalCiphertext(data []byte) (*Ciphertext, error) {
	env, err := open(data, KindCiphertext)
	if err != nil {
		return nil, err
	}
	p, bz := env.params, env.payload
	if len(bz) < 2 {
		return nil, fmt.Errorf("he: ciphertext payload is truncated")
	}
	ml := int(binary.BigEndian.Uint16(bz))
	if len(bz) < 3+ml {
		return nil, fmt.Errorf("he: ciphertext payload is truncated")
	}
	meta := &rlwe.MetaData{}
	if err := guard("ciphertext metadata", func() error { return meta.UnmarshalBinary(bz[2 : 2+ml]) }); err != nil {
		return nil, err
	}
	// The metadata is JSON, which decodes from many spellings; only the
	// one Marshal writes is accepted, so that a ciphertext has one
	// encoding and one hash.
	if canon, err := meta.MarshalBinary(); err != nil || !bytes.Equal(canon, bz[2:2+ml]) {
		return nil, fmt.Errorf("he: ciphertext metadata is not in the form this package writes: the ciphertext was altered")
	}
	lvl := int(bz[2+ml])
	if lvl > p.MaxLevel() {
		return nil, fmt.Errorf("he: ciphertext level %d is above preset %s's maximum %d", lvl, p.Name, p.MaxLevel())
	}
	n := p.N()
	body := bz[3+ml:]
	if want := 2 * (lvl + 1) * n * 8; len(body) != want {
		return nil, fmt.Errorf("he: ciphertext at level %d must have %d coefficient bytes, has %d", lvl, want, len(body))
	}
	switch {
	case !meta.IsNTT || meta.IsMontgomery || meta.IsBatched != true:
		return nil, fmt.Errorf("he: ciphertext metadata is not that of a batched CKKS ciphertext in NTT form")
	case meta.LogDimensions.Rows != 0 || meta.LogDimensions.Cols < 0 || meta.LogDimensions.Cols > min(MaxLogSlots, p.LogMaxSlots()):
		return nil, fmt.Errorf("he: ciphertext has slot dimensions %v: want one row of at most 2^%d", meta.LogDimensions, min(MaxLogSlots, p.LogMaxSlots()))
	}
	if s := meta.Scale.Float64(); !(s >= 1) || math.IsInf(s, 0) || meta.Scale.Mod != nil {
		return nil, fmt.Errorf("he: ciphertext scale %v is not a valid CKKS scale", s)
	}
	ct := rlwe.NewCiphertext(p.Parameters, 1, lvl)
	q := p.Q()
	off := 0
	for _, poly := range ct.Value {
		for i := 0; i <= lvl; i++ {
			row := poly.Coeffs[i]
			for j := 0; j < n; j++ {
				x := binary.LittleEndian.Uint64(body[off:])
				if x >= q[i] {
					return nil, fmt.Errorf("he: ciphertext coefficient %d of residue %d is not reduced modulo its prime: the ciphertext is corrupted", j, i)
				}
				row[j] = x
				off += 8
			}
		}
	}
	*ct.MetaData = *meta
	return &Ciphertext{Params: p, Key: env.key, ct: ct}, nil
}
