package blobstore

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/ogpu-network/ogpu/types"
)

// Partial is a download in progress: a pre-sized data file and a bitmap of
// the pieces written and verified, both kept on disk so that a restart
// resumes where it stopped. Its methods are safe for concurrent use; pieces
// may be written in any order.
type Partial struct {
	s    *Store
	m    *Manifest
	base string // partial/<hex>

	mu       sync.Mutex
	data     *os.File
	bits     *os.File
	have     []byte // bitmap, bit i%8 of byte i/8
	nmissing int
	closed   bool
}

// Begin opens the download of the blob m describes. An existing partial with
// the same manifest is reopened and keeps its pieces; one with a different
// manifest is discarded. Close (or Complete, or Discard) the Partial when
// done with it.
func (s *Store) Begin(m *Manifest) (*Partial, error) {
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("cannot begin download: %w", err)
	}
	h := m.Hash
	if s.Has(h) {
		return nil, fmt.Errorf("%w: %s", ErrExists, name(h))
	}
	p := &Partial{s: s, m: m, base: filepath.Join(s.dir, "partial", name(h))}
	s.mu.Lock()
	if s.partials[h] != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: blob %s in %s", ErrBusy, name(h), s.dir)
	}
	s.partials[h] = p
	s.mu.Unlock()
	if err := p.open(); err != nil {
		p.closeFiles()
		s.mu.Lock()
		delete(s.partials, h)
		s.mu.Unlock()
		return nil, fmt.Errorf("cannot begin download of blob %s: %w", name(h), err)
	}
	return p, nil
}

func (p *Partial) open() error {
	m := p.m
	reuse := false
	if b, err := os.ReadFile(p.base + ".json"); err == nil {
		if old, err := DecodeManifest(b); err == nil && old.Equal(m) {
			reuse = true
		}
	}
	if !reuse {
		if err := p.removeFiles(); err != nil {
			return err
		}
		if err := writeAtomic(p.s.dir, p.base+".json", m.Encode()); err != nil {
			return err
		}
	}
	var err error
	if p.data, err = os.OpenFile(p.base, os.O_RDWR|os.O_CREATE, 0o644); err != nil {
		return err
	}
	fi, err := p.data.Stat()
	if err != nil {
		return err
	}
	if fi.Size() != m.Size {
		reuse = false // the bitmap cannot describe a file of another size
		if err := p.data.Truncate(m.Size); err != nil {
			return err
		}
	}
	if p.bits, err = os.OpenFile(p.base+".bits", os.O_RDWR|os.O_CREATE, 0o644); err != nil {
		return err
	}
	n := len(m.Pieces)
	p.have = make([]byte, (n+7)/8)
	if reuse {
		if b, err := io.ReadAll(p.bits); err == nil && len(b) == len(p.have) {
			copy(p.have, b)
		}
	}
	if n%8 != 0 {
		p.have[len(p.have)-1] &= byte(1)<<(n%8) - 1
	}
	if err := p.bits.Truncate(0); err != nil {
		return err
	}
	if _, err := p.bits.WriteAt(p.have, 0); err != nil {
		return err
	}
	for i := range n {
		if !p.hasPiece(i) {
			p.nmissing++
		}
	}
	return nil
}

func (p *Partial) hasPiece(i int) bool { return p.have[i/8]&(1<<(i%8)) != 0 }

// Manifest returns the manifest being downloaded (not to be modified).
func (p *Partial) Manifest() *Manifest { return p.m }

// Missing returns the indexes of the pieces not yet written, ascending.
func (p *Partial) Missing() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]int, 0, p.nmissing)
	for i := range p.m.Pieces {
		if !p.hasPiece(i) {
			out = append(out, i)
		}
	}
	return out
}

// WritePiece verifies piece i against the manifest and writes it. A piece
// that does not match is refused with an error wrapping ErrBadPiece.
// Writing a piece already present is a no-op.
func (p *Partial) WritePiece(i int, data []byte) error {
	m := p.m
	if i < 0 || i >= len(m.Pieces) {
		return fmt.Errorf("%w: blob %s has no piece %d (it has %d)", ErrBadPiece, name(m.Hash), i, len(m.Pieces))
	}
	if int64(len(data)) != m.PieceLen(i) {
		return fmt.Errorf("%w: piece %d of blob %s is %d bytes, want %d", ErrBadPiece, i, name(m.Hash), len(data), m.PieceLen(i))
	}
	if got := types.Hash(sha256.Sum256(data)); got != m.Pieces[i] {
		return fmt.Errorf("%w: piece %d of blob %s hashes to %s, the manifest says %s", ErrBadPiece, i, name(m.Hash), name(got), name(m.Pieces[i]))
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return errors.New("partial download is closed")
	}
	if p.hasPiece(i) {
		p.mu.Unlock()
		return nil
	}
	f := p.data
	p.mu.Unlock()
	if _, err := f.WriteAt(data, int64(i)*m.PieceSize); err != nil {
		return fmt.Errorf("cannot write piece %d of blob %s: %w", i, name(m.Hash), err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("partial download is closed")
	}
	if p.hasPiece(i) {
		return nil // written twice at once: same bytes
	}
	p.have[i/8] |= 1 << (i % 8)
	p.nmissing--
	if _, err := p.bits.WriteAt(p.have[i/8:i/8+1], int64(i/8)); err != nil {
		return fmt.Errorf("cannot record piece %d of blob %s: %w", i, name(m.Hash), err)
	}
	return nil
}

// Complete checks that every piece is present and that the whole hashes to
// the manifest's hash, then moves the blob into place and returns its path.
// The Partial is closed on success.
//
// If the whole does not match, every piece is checked again: pieces damaged
// on disk (after a crash, say) are marked missing and the error wraps
// ErrIncomplete, so that fetching them again resumes the download; if every
// piece matches, the manifest itself is false, the partial is discarded and
// the error wraps ErrHashMismatch.
func (p *Partial) Complete() (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.m
	if p.closed {
		return "", errors.New("partial download is closed")
	}
	if p.nmissing > 0 {
		return "", fmt.Errorf("%w: blob %s has %d of %d pieces missing", ErrIncomplete, name(m.Hash), p.nmissing, len(m.Pieces))
	}
	if err := p.data.Sync(); err != nil {
		return "", fmt.Errorf("cannot complete blob %s: %w", name(m.Hash), err)
	}
	hh := sha256.New()
	if _, err := io.Copy(hh, io.NewSectionReader(p.data, 0, m.Size)); err != nil {
		return "", fmt.Errorf("cannot complete blob %s: %w", name(m.Hash), err)
	}
	if got := types.Hash(hh.Sum(nil)); got != m.Hash {
		return "", p.recheck(got)
	}
	p.closeFilesLocked()
	if err := p.s.commit(m, p.base); err != nil {
		return "", fmt.Errorf("cannot complete blob %s: %w", name(m.Hash), err)
	}
	os.Remove(p.base + ".bits")
	os.Remove(p.base + ".json")
	return p.s.blobPath(m.Hash), nil
}

// recheck runs after the whole-file hash failed (p.mu held).
func (p *Partial) recheck(got types.Hash) error {
	m := p.m
	var bad []int
	buf := make([]byte, m.PieceSize)
	for i := range m.Pieces {
		b := buf[:m.PieceLen(i)]
		if _, err := p.data.ReadAt(b, int64(i)*m.PieceSize); err != nil || types.Hash(sha256.Sum256(b)) != m.Pieces[i] {
			bad = append(bad, i)
		}
	}
	if len(bad) > 0 {
		for _, i := range bad {
			p.have[i/8] &^= 1 << (i % 8)
			p.nmissing++
		}
		if _, err := p.bits.WriteAt(p.have, 0); err != nil {
			return fmt.Errorf("cannot record damaged pieces of blob %s: %w", name(m.Hash), err)
		}
		return fmt.Errorf("%w: %d pieces of blob %s were damaged on disk (first %d) and must be fetched again", ErrIncomplete, len(bad), name(m.Hash), bad[0])
	}
	p.closeFilesLocked()
	p.removeFiles()
	return fmt.Errorf("%w: every piece matches the manifest for %s, but together they hash to %s; the manifest is false and the partial download was discarded: fetch from other peers",
		ErrHashMismatch, name(m.Hash), name(got))
}

// Close closes the Partial, keeping its state on disk for a later Begin.
func (p *Partial) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closeFilesLocked()
}

// Discard closes the Partial and deletes its state.
func (p *Partial) Discard() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeFilesLocked()
	return p.removeFiles()
}

func (p *Partial) closeFiles() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeFilesLocked()
}

// closeFilesLocked closes the files and releases the blob's slot in the
// store (p.mu held).
func (p *Partial) closeFilesLocked() error {
	if p.closed {
		return nil
	}
	p.closed = true
	var err error
	for _, f := range []*os.File{p.data, p.bits} {
		if f != nil {
			if e := f.Close(); e != nil && err == nil {
				err = e
			}
		}
	}
	p.s.mu.Lock()
	if p.s.partials[p.m.Hash] == p {
		delete(p.s.partials, p.m.Hash)
	}
	p.s.mu.Unlock()
	return err
}

func (p *Partial) removeFiles() error {
	for _, f := range []string{p.base, p.base + ".bits", p.base + ".json"} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}
