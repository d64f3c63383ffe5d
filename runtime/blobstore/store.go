package blobstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ogpu-network/ogpu/types"
)

// Errors, tested with errors.Is.
var (
	// ErrNotFound: the store has no complete blob with that hash.
	ErrNotFound = errors.New("blob not found")
	// ErrCorrupt: a stored blob no longer matches its hash or manifest.
	ErrCorrupt = errors.New("blob is corrupt")
	// ErrExists: Begin was called for a blob the store already holds.
	ErrExists = errors.New("blob already stored")
	// ErrBusy: a Partial for that blob is already open in this store.
	ErrBusy = errors.New("download already in progress")
	// ErrNoPiece: a piece index outside the blob.
	ErrNoPiece = errors.New("no such piece")
	// ErrBadPiece: a piece does not match its hash in the manifest.
	ErrBadPiece = errors.New("bad piece")
	// ErrIncomplete: Complete was called while pieces are missing.
	ErrIncomplete = errors.New("blob incomplete")
	// ErrHashMismatch: every piece matches the manifest but the whole does
	// not hash to the manifest's hash, so the manifest itself is false.
	ErrHashMismatch = errors.New("manifest does not match the blob hash")
)

// MaxGetSize is the largest blob Get returns in memory; use Path for more.
const MaxGetSize = 64 << 20

// Option configures a Store.
type Option func(*Store) error

// WithPieceSize sets the piece size of blobs added with Put and PutFile
// (default DefaultPieceSize).
func WithPieceSize(n int64) Option {
	return func(s *Store) error {
		if n < MinPieceSize || n > MaxPieceSize {
			return fmt.Errorf("piece size %d is outside %d..%d", n, MinPieceSize, MaxPieceSize)
		}
		s.pieceSize = n
		return nil
	}
}

// Store is a directory of content-addressed blobs. It is safe for concurrent
// use.
type Store struct {
	dir       string
	pieceSize int64

	mu        sync.Mutex
	manifests map[types.Hash]*Manifest // complete blobs, decoded once
	partials  map[types.Hash]*Partial  // open downloads
}

// Open opens (creating if needed) the store in dir.
func Open(dir string, opts ...Option) (*Store, error) {
	s := &Store{
		dir:       dir,
		pieceSize: DefaultPieceSize,
		manifests: map[types.Hash]*Manifest{},
		partials:  map[types.Hash]*Partial{},
	}
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, err
		}
	}
	for _, d := range []string{"blobs", "partial", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, fmt.Errorf("cannot open blob store: %w", err)
		}
	}
	// Temporary files older than a day are left over from a crash.
	if ents, err := os.ReadDir(filepath.Join(dir, "tmp")); err == nil {
		for _, e := range ents {
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > 24*time.Hour {
				os.Remove(filepath.Join(dir, "tmp", e.Name()))
			}
		}
	}
	return s, nil
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// PieceSize returns the piece size used by Put and PutFile.
func (s *Store) PieceSize() int64 { return s.pieceSize }

func name(h types.Hash) string { return hex.EncodeToString(h[:]) }

func (s *Store) blobPath(h types.Hash) string { return filepath.Join(s.dir, "blobs", name(h)) }

// Put stores data and returns its hash.
func (s *Store) Put(data []byte) (types.Hash, error) {
	return s.put(bytes.NewReader(data), int64(len(data)))
}

// PutFile copies the file at path into the store and returns its hash.
func (s *Store) PutFile(path string) (types.Hash, error) {
	f, err := os.Open(path)
	if err != nil {
		return types.Hash{}, fmt.Errorf("cannot add %s to the blob store: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return types.Hash{}, fmt.Errorf("cannot add %s to the blob store: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return types.Hash{}, fmt.Errorf("cannot add %s to the blob store: not a regular file", path)
	}
	h, err := s.put(f, fi.Size())
	if err != nil {
		return types.Hash{}, fmt.Errorf("cannot add %s to the blob store: %w", path, err)
	}
	return h, nil
}

// HashFile is the hash a file has as a blob (its sha256, which is how the
// chain names models) and its size, without storing it.
func HashFile(path string) (types.Hash, uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return types.Hash{}, 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return types.Hash{}, 0, fmt.Errorf("cannot hash %s: %w", path, err)
	}
	return types.BytesToHash(h.Sum(nil)), uint64(n), nil
}

// put streams size bytes from r into a temporary file, computing the
// manifest on the way, and moves it into place.
func (s *Store) put(r io.Reader, size int64) (types.Hash, error) {
	if size > MaxSize {
		return types.Hash{}, fmt.Errorf("blob of %d bytes is larger than the limit %d", size, MaxSize)
	}
	ps := s.pieceSize
	for numPieces(size, ps) > MaxPieces && ps < MaxPieceSize {
		ps *= 2
	}
	tmp, err := os.CreateTemp(filepath.Join(s.dir, "tmp"), "put-*")
	if err != nil {
		return types.Hash{}, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	m, err := manifestOf(r, size, ps, tmp)
	if err != nil {
		return types.Hash{}, err
	}
	if err := tmp.Sync(); err != nil {
		return types.Hash{}, err
	}
	if err := tmp.Close(); err != nil {
		return types.Hash{}, err
	}
	if s.Has(m.Hash) {
		return m.Hash, nil // already here (a corrupt copy is replaced)
	}
	return m.Hash, s.commit(m, tmp.Name())
}

// commit moves the complete, verified data file at src into place with its
// manifest and verification stamp. The data file's arrival is the commit
// point: a manifest without data is not a blob.
func (s *Store) commit(m *Manifest, src string) error {
	dst := s.blobPath(m.Hash)
	if err := writeAtomic(s.dir, dst+".json", m.Encode()); err != nil {
		return err
	}
	if err := os.Rename(src, dst); err != nil {
		return err
	}
	if err := syncDir(filepath.Dir(dst)); err != nil {
		return err
	}
	s.mu.Lock()
	s.manifests[m.Hash] = m
	s.mu.Unlock()
	return s.stamp(m.Hash)
}

// Has reports whether the store holds the complete blob h and its content
// still hashes to h.
func (s *Store) Has(h types.Hash) bool {
	_, err := s.Path(h)
	return err == nil
}

// Path returns the file path of the complete blob h. The content is hashed
// again when the file's size or modification time differs from the last
// verification; a mismatch is an error wrapping ErrCorrupt.
func (s *Store) Path(h types.Hash) (string, error) {
	m, err := s.manifest(h)
	if err != nil {
		return "", err
	}
	p := s.blobPath(h)
	fi, err := os.Stat(p)
	if err != nil {
		return "", s.notFound(h, err)
	}
	if b, err := os.ReadFile(p + ".ok"); err == nil && string(b) == stampOf(fi) {
		return p, nil
	}
	f, err := os.Open(p)
	if err != nil {
		return "", s.notFound(h, err)
	}
	defer f.Close()
	hh := sha256.New()
	if _, err := io.Copy(hh, f); err != nil {
		return "", fmt.Errorf("cannot read blob %s: %w", name(h), err)
	}
	if got := types.Hash(hh.Sum(nil)); got != h || fi.Size() != m.Size {
		return "", s.corrupt(h, fmt.Sprintf("its content now hashes to %s", name(got)))
	}
	if err := s.stamp(h); err != nil {
		return "", err
	}
	return p, nil
}

func stampOf(fi fs.FileInfo) string {
	return strconv.FormatInt(fi.Size(), 10) + " " + strconv.FormatInt(fi.ModTime().UnixNano(), 10) + "\n"
}

// stamp records that blob h was verified at its current size and mtime.
func (s *Store) stamp(h types.Hash) error {
	p := s.blobPath(h)
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	return writeAtomic(s.dir, p+".ok", []byte(stampOf(fi)))
}

func (s *Store) notFound(h types.Hash, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s", ErrNotFound, name(h))
	}
	return fmt.Errorf("cannot read blob %s: %w", name(h), err)
}

func (s *Store) corrupt(h types.Hash, why string) error {
	s.mu.Lock()
	delete(s.manifests, h)
	s.mu.Unlock()
	return fmt.Errorf("%w: %s in %s: %s; delete it (Store.Delete or rm %s*) and fetch it again",
		ErrCorrupt, name(h), s.dir, why, s.blobPath(h))
}

// Get returns the content of a complete blob of at most MaxGetSize bytes,
// verified against h.
func (s *Store) Get(h types.Hash) ([]byte, error) {
	m, err := s.manifest(h)
	if err != nil {
		return nil, err
	}
	if m.Size > MaxGetSize {
		return nil, fmt.Errorf("blob %s is %d bytes, more than Get's limit %d: use Path", name(h), m.Size, MaxGetSize)
	}
	b, err := os.ReadFile(s.blobPath(h))
	if err != nil {
		return nil, s.notFound(h, err)
	}
	if got := types.Hash(sha256.Sum256(b)); got != h {
		return nil, s.corrupt(h, fmt.Sprintf("its content now hashes to %s", name(got)))
	}
	return b, nil
}

// Manifest returns the manifest of the complete blob h. It checks the data
// file's size but does not hash it (Has and Path do).
func (s *Store) Manifest(h types.Hash) (*Manifest, error) {
	m, err := s.manifest(h)
	if err != nil {
		return nil, err
	}
	c := *m
	c.Pieces = slices.Clone(m.Pieces)
	return &c, nil
}

// manifest returns the cached manifest of a complete blob (not to be
// modified), after checking that the data file has the right size.
func (s *Store) manifest(h types.Hash) (*Manifest, error) {
	p := s.blobPath(h)
	fi, err := os.Stat(p)
	if err != nil {
		return nil, s.notFound(h, err)
	}
	s.mu.Lock()
	m := s.manifests[h]
	s.mu.Unlock()
	if m == nil {
		b, err := os.ReadFile(p + ".json")
		if err != nil {
			return nil, s.corrupt(h, fmt.Sprintf("its manifest is unreadable (%v)", err))
		}
		if m, err = DecodeManifest(b); err != nil {
			return nil, s.corrupt(h, fmt.Sprintf("its manifest is invalid (%v)", err))
		}
		if m.Hash != h {
			return nil, s.corrupt(h, "its manifest names another hash")
		}
		s.mu.Lock()
		s.manifests[h] = m
		s.mu.Unlock()
	}
	if fi.Size() != m.Size {
		return nil, s.corrupt(h, fmt.Sprintf("the file is %d bytes, its manifest says %d", fi.Size(), m.Size))
	}
	return m, nil
}

// ReadPiece returns piece i of the complete blob h as it is on disk. It does
// not verify the bytes: the receiver checks them against the manifest.
func (s *Store) ReadPiece(h types.Hash, i int) ([]byte, error) {
	m, err := s.manifest(h)
	if err != nil {
		return nil, err
	}
	if i < 0 || i >= len(m.Pieces) {
		return nil, fmt.Errorf("%w: blob %s has no piece %d (it has %d)", ErrNoPiece, name(h), i, len(m.Pieces))
	}
	f, err := os.Open(s.blobPath(h))
	if err != nil {
		return nil, s.notFound(h, err)
	}
	defer f.Close()
	b := make([]byte, m.PieceLen(i))
	if _, err := f.ReadAt(b, int64(i)*m.PieceSize); err != nil {
		return nil, fmt.Errorf("cannot read piece %d of blob %s: %w", i, name(h), err)
	}
	return b, nil
}

// Delete removes the complete blob h. Deleting an absent blob is not an
// error.
func (s *Store) Delete(h types.Hash) error {
	s.mu.Lock()
	delete(s.manifests, h)
	s.mu.Unlock()
	p := s.blobPath(h)
	// The data file goes first: without it the rest is not a blob.
	for _, f := range []string{p, p + ".ok", p + ".json"} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("cannot delete blob %s: %w", name(h), err)
		}
	}
	return nil
}

// List returns the hashes of the complete blobs, sorted. It does not verify
// their content.
func (s *Store) List() ([]types.Hash, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, "blobs"))
	if err != nil {
		return nil, fmt.Errorf("cannot list blob store: %w", err)
	}
	var out []types.Hash
	for _, e := range ents {
		n := e.Name()
		if len(n) != 64 || strings.Contains(n, ".") {
			continue
		}
		b, err := hex.DecodeString(n)
		if err != nil {
			continue
		}
		h := types.Hash(b)
		if _, err := os.Stat(s.blobPath(h) + ".json"); err == nil {
			out = append(out, h)
		}
	}
	slices.SortFunc(out, func(a, b types.Hash) int { return bytes.Compare(a[:], b[:]) })
	return out, nil
}

// writeAtomic writes data to path through a synced temporary file and a
// rename, so that readers see the old content or the new, never a mix.
func writeAtomic(storeDir, path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Join(storeDir, "tmp"), "w-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
