package blobstore

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/ogpu-network/ogpu/types"
)

const testPiece = 4 << 10

func randBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func open(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, WithPieceSize(testPiece))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestPutGet(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
	}{
		{"empty", 0},
		{"one byte", 1},
		{"one piece exactly", testPiece},
		{"short last piece", 3*testPiece + 17},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, t.TempDir())
			data := randBytes(tc.size, uint64(tc.size))
			h, err := s.Put(data)
			if err != nil {
				t.Fatal(err)
			}
			if h != types.Hash(sha256.Sum256(data)) {
				t.Fatalf("hash %x, want sha256 of the content", h)
			}
			if !s.Has(h) {
				t.Fatal("Has = false after Put")
			}
			got, err := s.Get(h)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("Get = %d bytes, %v", len(got), err)
			}
			m, err := s.Manifest(h)
			if err != nil {
				t.Fatal(err)
			}
			if want := (tc.size + testPiece - 1) / testPiece; m.NumPieces() != want {
				t.Fatalf("%d pieces, want %d", m.NumPieces(), want)
			}
			var joined []byte
			for i := range m.NumPieces() {
				b, err := s.ReadPiece(h, i)
				if err != nil {
					t.Fatal(err)
				}
				if types.Hash(sha256.Sum256(b)) != m.Pieces[i] {
					t.Fatalf("piece %d does not match its manifest hash", i)
				}
				joined = append(joined, b...)
			}
			if !bytes.Equal(joined, data) {
				t.Fatal("pieces do not join to the content")
			}
			if _, err := s.ReadPiece(h, m.NumPieces()); !errors.Is(err, ErrNoPiece) {
				t.Fatal("ReadPiece past the end: no error")
			}
			// Put again is a no-op.
			if h2, err := s.Put(data); err != nil || h2 != h {
				t.Fatalf("second Put = %x, %v", h2, err)
			}
			l, err := s.List()
			if err != nil || !slices.Equal(l, []types.Hash{h}) {
				t.Fatalf("List = %x, %v", l, err)
			}
		})
	}
}

func TestPutFile(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "model.bin")
	data := randBytes(100_000, 7)
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	s := open(t, filepath.Join(dir, "store"))
	h, err := s.PutFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if h != types.Hash(sha256.Sum256(data)) {
		t.Fatal("PutFile hash is not the file's sha256")
	}
	p, err := s.Path(h)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, data) {
		t.Fatal("stored file differs from the source")
	}
	if _, err := s.PutFile(filepath.Join(dir, "absent")); err == nil {
		t.Fatal("PutFile of a missing file: no error")
	}
	if _, err := s.PutFile(dir); err == nil {
		t.Fatal("PutFile of a directory: no error")
	}
	// A new Store on the same directory sees the blob.
	if s2 := open(t, filepath.Join(dir, "store")); !s2.Has(h) {
		t.Fatal("blob lost on reopen")
	}
}

func TestNotFound(t *testing.T) {
	s := open(t, t.TempDir())
	h := types.Hash{1}
	if s.Has(h) {
		t.Fatal("Has of an absent blob")
	}
	for _, err := range []error{
		func() error { _, err := s.Path(h); return err }(),
		func() error { _, err := s.Get(h); return err }(),
		func() error { _, err := s.Manifest(h); return err }(),
		func() error { _, err := s.ReadPiece(h, 0); return err }(),
	} {
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
	}
}

func TestCorruptOnDisk(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt func(t *testing.T, path string)
	}{
		{"flipped byte", func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte{0xff, 0x00, 0xff}, 5000); err != nil {
				t.Fatal(err)
			}
		}},
		{"truncated", func(t *testing.T, path string) {
			if err := os.Truncate(path, 100); err != nil {
				t.Fatal(err)
			}
		}},
		{"manifest garbage", func(t *testing.T, path string) {
			if err := os.WriteFile(path+".json", []byte("{not json"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir)
			data := randBytes(3*testPiece, 3)
			h, err := s.Put(data)
			if err != nil {
				t.Fatal(err)
			}
			p, _ := s.Path(h)
			tc.corrupt(t, p)
			s = open(t, dir) // no cached manifest
			if s.Has(h) {
				t.Fatal("Has = true for a corrupted blob")
			}
			_, err = s.Path(h)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Path err = %v, want ErrCorrupt", err)
			}
			if !bytes.Contains([]byte(err.Error()), []byte("delete it")) {
				t.Fatalf("error %q does not say what to do", err)
			}
			if _, err := s.Get(h); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Get err = %v, want ErrCorrupt", err)
			}
			// Put repairs it.
			if _, err := s.Put(data); err != nil {
				t.Fatal(err)
			}
			if !s.Has(h) {
				t.Fatal("Put did not repair the blob")
			}
			if err := s.Delete(h); err != nil || s.Has(h) {
				t.Fatalf("Delete: %v, Has after = %v", err, s.Has(h))
			}
		})
	}
}

func TestPartialResume(t *testing.T) {
	dir := t.TempDir()
	data := randBytes(10*testPiece+100, 11)
	m, err := NewManifest(data, testPiece)
	if err != nil {
		t.Fatal(err)
	}
	piece := func(i int) []byte { return data[int64(i)*m.PieceSize : int64(i)*m.PieceSize+m.PieceLen(i)] }

	s := open(t, dir)
	p, err := s.Begin(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Begin(m); !errors.Is(err, ErrBusy) {
		t.Fatalf("second Begin err = %v, want ErrBusy", err)
	}
	for _, i := range []int{0, 3, 10} {
		if err := p.WritePiece(i, piece(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.WritePiece(4, piece(5)); !errors.Is(err, ErrBadPiece) {
		t.Fatalf("wrong piece err = %v, want ErrBadPiece", err)
	}
	if err := p.WritePiece(4, piece(4)[1:]); !errors.Is(err, ErrBadPiece) {
		t.Fatalf("short piece err = %v, want ErrBadPiece", err)
	}
	if err := p.WritePiece(11, piece(4)); !errors.Is(err, ErrBadPiece) {
		t.Fatalf("out of range err = %v, want ErrBadPiece", err)
	}
	if _, err := p.Complete(); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("early Complete err = %v, want ErrIncomplete", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}

	// "Restart": a new Store on the same directory.
	s = open(t, dir)
	p, err = s.Begin(m)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{1, 2, 4, 5, 6, 7, 8, 9}
	if got := p.Missing(); !slices.Equal(got, want) {
		t.Fatalf("Missing after resume = %v, want %v", got, want)
	}
	var wg sync.WaitGroup
	for _, i := range want {
		wg.Go(func() {
			if err := p.WritePiece(i, piece(i)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	path, err := p.Complete()
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, data) {
		t.Fatal("completed file differs")
	}
	if !s.Has(m.Hash) {
		t.Fatal("Has = false after Complete")
	}
	if _, err := s.Begin(m); !errors.Is(err, ErrExists) {
		t.Fatalf("Begin of a stored blob err = %v, want ErrExists", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "partial")); len(ents) != 0 {
		t.Fatalf("partial state left behind: %v", ents)
	}
}

func TestPartialOtherManifestRestarts(t *testing.T) {
	dir := t.TempDir()
	data := randBytes(4*testPiece, 12)
	m1, _ := NewManifest(data, testPiece)
	m2, _ := NewManifest(data, 2*testPiece)
	s := open(t, dir)
	p, _ := s.Begin(m1)
	if err := p.WritePiece(0, data[:testPiece]); err != nil {
		t.Fatal(err)
	}
	p.Close()
	p, err := s.Begin(m2)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got := p.Missing(); !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("Missing = %v, want a fresh start", got)
	}
}

func TestPartialDamagedOnDisk(t *testing.T) {
	dir := t.TempDir()
	data := randBytes(4*testPiece, 13)
	m, _ := NewManifest(data, testPiece)
	s := open(t, dir)
	p, _ := s.Begin(m)
	for i := range 4 {
		if err := p.WritePiece(i, data[i*testPiece:(i+1)*testPiece]); err != nil {
			t.Fatal(err)
		}
	}
	p.Close()
	// A crash lost piece 2's bytes though the bitmap recorded it.
	f, _ := os.OpenFile(filepath.Join(dir, "partial", name(m.Hash)), os.O_WRONLY, 0)
	f.WriteAt(make([]byte, testPiece), 2*testPiece)
	f.Close()

	p, err := s.Begin(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Complete(); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("Complete err = %v, want ErrIncomplete", err)
	}
	if got := p.Missing(); !slices.Equal(got, []int{2}) {
		t.Fatalf("Missing = %v, want [2]", got)
	}
	if err := p.WritePiece(2, data[2*testPiece:3*testPiece]); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Complete(); err != nil {
		t.Fatal(err)
	}
}

func TestPartialLyingManifest(t *testing.T) {
	dir := t.TempDir()
	data := randBytes(2*testPiece, 14)
	m, _ := NewManifest(data, testPiece)
	m.Hash = types.Hash{0xab} // pieces are right, the whole hash is not
	s := open(t, dir)
	p, err := s.Begin(m)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := p.WritePiece(i, data[i*testPiece:(i+1)*testPiece]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Complete(); !errors.Is(err, ErrHashMismatch) {
		t.Fatalf("Complete err = %v, want ErrHashMismatch", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "partial")); len(ents) != 0 {
		t.Fatalf("false partial kept: %v", ents)
	}
	if s.Has(m.Hash) {
		t.Fatal("lying blob stored")
	}
}

func TestManifestValidate(t *testing.T) {
	good, _ := NewManifest(randBytes(3*MinPieceSize, 1), MinPieceSize)
	for _, tc := range []struct {
		name string
		edit func(m *Manifest)
	}{
		{"no hash", func(m *Manifest) { m.Hash = types.Hash{} }},
		{"negative size", func(m *Manifest) { m.Size = -1 }},
		{"huge size", func(m *Manifest) { m.Size = MaxSize + 1 }},
		{"small piece size", func(m *Manifest) { m.PieceSize = MinPieceSize - 1 }},
		{"big piece size", func(m *Manifest) { m.PieceSize = MaxPieceSize + 1 }},
		{"piece missing", func(m *Manifest) { m.Pieces = m.Pieces[:2] }},
		{"piece extra", func(m *Manifest) { m.Pieces = append(m.Pieces, types.Hash{}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := *good
			m.Pieces = slices.Clone(good.Pieces)
			tc.edit(&m)
			if m.Validate() == nil {
				t.Fatal("Validate accepted it")
			}
			if _, err := DecodeManifest(m.Encode()); err == nil {
				t.Fatal("DecodeManifest accepted it")
			}
		})
	}
	back, err := DecodeManifest(good.Encode())
	if err != nil || !back.Equal(good) || !bytes.Equal(back.Encode(), good.Encode()) {
		t.Fatalf("round trip: %v", err)
	}
	for _, bad := range []string{"", "null", "[]", `{"hash":1}`, string(good.Encode()) + "x", `{"extra":1}`} {
		if _, err := DecodeManifest([]byte(bad)); err == nil {
			t.Fatalf("DecodeManifest(%q) accepted it", bad)
		}
	}
}

func TestOpenOptions(t *testing.T) {
	if _, err := Open(t.TempDir(), WithPieceSize(100)); err == nil {
		t.Fatal("piece size 100 accepted")
	}
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o644)
	if _, err := Open(f); err == nil {
		t.Fatal("Open on a file: no error")
	}
}

func FuzzDecodeManifest(f *testing.F) {
	m, _ := NewManifest(randBytes(2*MinPieceSize+1, 1), MinPieceSize)
	f.Add(m.Encode())
	f.Add([]byte(`{"hash":"0x00","size":1,"piece_size":4096,"pieces":[]}`))
	f.Add([]byte("{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeManifest(b)
		if err != nil {
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("decoded manifest fails Validate: %v", err)
		}
		back, err := DecodeManifest(m.Encode())
		if err != nil || !back.Equal(m) {
			t.Fatalf("re-encoding does not round-trip: %v", err)
		}
	})
}
