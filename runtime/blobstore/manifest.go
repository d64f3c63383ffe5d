// Package blobstore keeps content-addressed files on disk.
//
// A blob's id is the sha256 of its whole content (for a model file, what
// `sha256sum model.gguf` prints). Blobs are split into fixed-size pieces so
// that they can be fetched from several peers at once and verified piece by
// piece; a Manifest lists the piece hashes. Downloads in progress are kept as
// Partials that survive restarts.
//
// Layout under the store directory:
//
//	blobs/<hex>          complete blob
//	blobs/<hex>.json     its manifest
//	blobs/<hex>.ok       size and mtime at the last full verification
//	partial/<hex>        download in progress (pre-sized)
//	partial/<hex>.json   its manifest
//	partial/<hex>.bits   bitmap of the pieces written and verified
//	tmp/                 temporary files, renamed into place when complete
//
// One Store per directory at a time.
package blobstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/ogpu-network/ogpu/types"
)

// Limits on manifests. They bound what a peer can make us allocate.
const (
	// DefaultPieceSize is the piece size of a new store.
	DefaultPieceSize = 1 << 20
	// MinPieceSize is the smallest piece size a manifest may use.
	MinPieceSize = 4 << 10
	// MaxPieceSize is the largest piece size a manifest may use.
	MaxPieceSize = 16 << 20
	// MaxPieces is the most pieces a manifest may list (256 GiB at 1 MiB
	// pieces; PutFile grows the piece size for larger files).
	MaxPieces = 1 << 18
	// MaxSize is the largest blob size.
	MaxSize = int64(MaxPieces) * MaxPieceSize
	// MaxManifestBytes bounds an encoded manifest (MaxPieces hex hashes fit).
	MaxManifestBytes = 24 << 20
)

// Manifest describes a blob: its hash, size and the sha256 of every piece.
// Piece i covers bytes [i*PieceSize, min((i+1)*PieceSize, Size)).
type Manifest struct {
	Hash      types.Hash   `json:"hash"`
	Size      int64        `json:"size"`
	PieceSize int64        `json:"piece_size"`
	Pieces    []types.Hash `json:"pieces"`
}

// NewManifest computes the manifest of data split into pieces of pieceSize.
func NewManifest(data []byte, pieceSize int64) (*Manifest, error) {
	return manifestOf(bytes.NewReader(data), int64(len(data)), pieceSize, io.Discard)
}

// manifestOf reads exactly size bytes from r, copying them to w, and returns
// their manifest.
func manifestOf(r io.Reader, size, pieceSize int64, w io.Writer) (*Manifest, error) {
	m := &Manifest{Size: size, PieceSize: pieceSize}
	if n := numPieces(size, pieceSize); n > MaxPieces {
		return nil, fmt.Errorf("blob of %d bytes needs %d pieces of %d bytes, more than the limit %d", size, n, pieceSize, MaxPieces)
	}
	whole := sha256.New()
	buf := make([]byte, min(pieceSize, max(size, 1)))
	for done := int64(0); done < size; {
		n := min(pieceSize, size-done)
		if _, err := io.ReadFull(r, buf[:n]); err != nil {
			return nil, fmt.Errorf("cannot read bytes %d..%d: %w", done, done+n, err)
		}
		m.Pieces = append(m.Pieces, sha256.Sum256(buf[:n]))
		whole.Write(buf[:n])
		if _, err := w.Write(buf[:n]); err != nil {
			return nil, err
		}
		done += n
	}
	var extra [1]byte
	if n, _ := r.Read(extra[:]); n > 0 {
		return nil, fmt.Errorf("source is longer than %d bytes (did it change while being read?)", size)
	}
	m.Hash = types.Hash(whole.Sum(nil))
	return m, m.Validate()
}

func numPieces(size, pieceSize int64) int64 {
	return (size + pieceSize - 1) / pieceSize
}

// NumPieces returns the number of pieces.
func (m *Manifest) NumPieces() int { return len(m.Pieces) }

// PieceLen returns the length of piece i (the last may be short).
func (m *Manifest) PieceLen(i int) int64 {
	return min(m.PieceSize, m.Size-int64(i)*m.PieceSize)
}

// Validate checks that the sizes are consistent and within the limits.
func (m *Manifest) Validate() error {
	switch {
	case m.Hash == (types.Hash{}):
		return errors.New("manifest has no hash")
	case m.Size < 0 || m.Size > MaxSize:
		return fmt.Errorf("manifest size %d is outside 0..%d", m.Size, MaxSize)
	case m.PieceSize < MinPieceSize || m.PieceSize > MaxPieceSize:
		return fmt.Errorf("manifest piece size %d is outside %d..%d", m.PieceSize, MinPieceSize, MaxPieceSize)
	}
	if want := numPieces(m.Size, m.PieceSize); int64(len(m.Pieces)) != want {
		return fmt.Errorf("manifest lists %d pieces, but %d bytes in pieces of %d need %d", len(m.Pieces), m.Size, m.PieceSize, want)
	}
	if len(m.Pieces) > MaxPieces {
		return fmt.Errorf("manifest lists %d pieces, more than the limit %d", len(m.Pieces), MaxPieces)
	}
	return nil
}

// Encode returns the canonical encoding: JSON with the fields in declaration
// order, hashes as 0x-prefixed lower-case hex, no insignificant space.
func (m *Manifest) Encode() []byte {
	b, err := json.Marshal(m)
	if err != nil {
		panic(err) // cannot happen: fixed-size fields only
	}
	return b
}

// Equal reports whether m and o describe the same pieces.
func (m *Manifest) Equal(o *Manifest) bool {
	if m.Hash != o.Hash || m.Size != o.Size || m.PieceSize != o.PieceSize || len(m.Pieces) != len(o.Pieces) {
		return false
	}
	for i := range m.Pieces {
		if m.Pieces[i] != o.Pieces[i] {
			return false
		}
	}
	return true
}

// DecodeManifest parses and validates an encoded manifest. Unknown fields,
// trailing data and oversized input are refused.
func DecodeManifest(b []byte) (*Manifest, error) {
	if len(b) > MaxManifestBytes {
		return nil, fmt.Errorf("manifest is %d bytes, more than the limit %d", len(b), MaxManifestBytes)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var m Manifest
	if err := d.Decode(&m); err != nil {
		return nil, fmt.Errorf("cannot decode manifest: %w", err)
	}
	if len(bytes.TrimSpace(b[d.InputOffset():])) > 0 {
		return nil, errors.New("cannot decode manifest: trailing data")
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}
