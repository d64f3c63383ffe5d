package he

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"
)

// Wire format, version 1, of every object this package writes:
//
//	"OGPUHE" | version u8 | kind u8 | preset name (u8 length, bytes) |
//	params digest [32] | key id [32] | payload length u64 | payload |
//	sha256 of everything before [32]
//
// The preset digest pins the exact parameters (a redefined preset does not
// read old objects), the key id ties ciphertexts and evaluation keys to the
// client key that made them, and the trailing checksum turns a corrupted
// file into a clear error rather than a wrong decryption.
const (
	magic = "OGPUHE"
	// Version is the wire format version this build writes and reads.
	Version = 1
)

// Kind is what an encoded object holds.
type Kind uint8

const (
	KindCiphertext Kind = 1
	KindEvalKeys   Kind = 2
	KindSecretKey  Kind = 3
)

func (k Kind) String() string {
	switch k {
	case KindCiphertext:
		return "ciphertext"
	case KindEvalKeys:
		return "evaluation key set"
	case KindSecretKey:
		return "secret key"
	}
	return fmt.Sprintf("kind %d", uint8(k))
}

// article is the kind with "a" or "an" before it.
func (k Kind) article() string {
	if s := k.String(); strings.ContainsRune("aeiou", rune(s[0])) {
		return "an " + s
	}
	return "a " + k.String()
}

// KeyID names a client key: sha256 of its public key.
type KeyID [32]byte

func (id KeyID) String() string { return fmt.Sprintf("%x", id[:8]) }

type envelope struct {
	kind    Kind
	params  *Params
	key     KeyID
	payload []byte
}

func seal(kind Kind, p *Params, key KeyID, payload []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(payload) + 128)
	b.WriteString(magic)
	b.WriteByte(Version)
	b.WriteByte(byte(kind))
	b.WriteByte(byte(len(p.Name)))
	b.WriteString(p.Name)
	b.Write(p.Digest[:])
	b.Write(key[:])
	b.Write(binary.BigEndian.AppendUint64(nil, uint64(len(payload))))
	b.Write(payload)
	sum := sha256.Sum256(b.Bytes())
	b.Write(sum[:])
	return b.Bytes()
}

// Peek reads an object's header: its kind, preset and key id, checking the
// checksum. It is how a tool says what a file is.
func Peek(data []byte) (kind Kind, preset string, key KeyID, err error) {
	env, err := open(data, 0)
	if err != nil {
		return 0, "", KeyID{}, err
	}
	return env.kind, env.params.Name, env.key, nil
}

// open checks and splits an encoded object; want 0 accepts any kind.
func open(data []byte, want Kind) (*envelope, error) {
	what := "an oGPU HE object"
	if want != 0 {
		what = want.article()
	}
	if len(data) < len(magic)+3 || string(data[:len(magic)]) != magic {
		return nil, fmt.Errorf("he: not %s (no %q header): pass a file written by ogpu he", what, magic)
	}
	if v := data[len(magic)]; v != Version {
		return nil, fmt.Errorf("he: wire format version %d, this build reads version %d: upgrade ogpu or re-create the file", v, Version)
	}
	kind := Kind(data[len(magic)+1])
	if want != 0 && kind != want {
		return nil, fmt.Errorf("he: this is %s, not %s", kind.article(), what)
	}
	rest := data[len(magic)+2:]
	nl := int(rest[0])
	fixed := 1 + nl + 32 + 32 + 8
	if len(rest) < fixed {
		return nil, fmt.Errorf("he: %s is truncated: %d bytes, the header alone needs %d", kind, len(data), len(magic)+2+fixed)
	}
	name := string(rest[1 : 1+nl])
	var digest [32]byte
	copy(digest[:], rest[1+nl:])
	var key KeyID
	copy(key[:], rest[1+nl+32:])
	n := binary.BigEndian.Uint64(rest[1+nl+64:])
	body := rest[fixed:]
	if uint64(len(body)) < 32 || uint64(len(body))-32 != n {
		return nil, fmt.Errorf("he: %s is truncated or has trailing bytes: header says %d payload bytes, file has %d after the header (with a 32-byte checksum)", kind, n, len(body))
	}
	end := len(data) - 32
	if sum := sha256.Sum256(data[:end]); !bytes.Equal(sum[:], data[end:]) {
		return nil, fmt.Errorf("he: %s is corrupted: checksum mismatch", kind)
	}
	params, err := cachedParams(name)
	if err != nil {
		return nil, err
	}
	if params.Digest != digest {
		return nil, fmt.Errorf("he: %s was made with a different definition of preset %s than this build's: re-create it with this version", kind, name)
	}
	return &envelope{kind: kind, params: params, key: key, payload: body[:n]}, nil
}
