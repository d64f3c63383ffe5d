package statesync

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ogpu-network/ogpu/store"
)

// waitSnapshots waits until s holds n snapshots.
func waitSnapshots(t *testing.T, s *Store, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); len(s.List()) != n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d snapshots, want %d", len(s.List()), n)
		}
	}
}

// TestStoreKeepsAndReopens: snapshots are taken at multiples of the
// interval only, the newest Keep are kept, their chunks served (nothing
// for one not held), and a reopened store serves the complete ones and
// drops a half-written export and a damaged snapshot.
func TestStoreKeepsAndReopens(t *testing.T) {
	dir := t.TempDir()
	tr, err := store.OpenTree(t.TempDir(), "state")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	s, err := Open(dir, tr, Options{Interval: 2, Keep: 2, ChunkSize: 64}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= 6; v++ {
		for i := 0; i < 20; i++ {
			tr.Set([]byte{byte(i), byte(v)}, []byte("value"))
		}
		if _, _, err := tr.SaveVersion(); err != nil {
			t.Fatal(err)
		}
		s.Saved(v)
		for v%2 == 0 && (len(s.List()) == 0 || s.List()[0].Height != uint64(v)) {
			time.Sleep(5 * time.Millisecond) // the export runs in the background
		}
	}
	waitSnapshots(t, s, 2)
	s.Close()
	l := s.List()
	if l[0].Height != 6 || l[1].Height != 4 || l[0].Chunks < 2 {
		t.Fatalf("held %d (%d chunks) and %d, want 6 and 4 in several chunks", l[0].Height, l[0].Chunks, l[1].Height)
	}
	if s.Chunk(6, 1, 0) == nil || s.Chunk(6, 1, l[0].Chunks) != nil || s.Chunk(2, 1, 0) != nil || s.Chunk(6, 2, 0) != nil {
		t.Fatal("chunks served wrongly")
	}
	if _, err := os.Stat(filepath.Join(dir, "2")); !os.IsNotExist(err) {
		t.Fatal("snapshot 2 was not removed")
	}
	// A crash mid-export and a damaged snapshot.
	if err := os.MkdirAll(filepath.Join(dir, "tmp-8"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(chunkPath(filepath.Join(dir, "4"), 0)); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir, tr, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l := s2.List(); len(l) != 1 || l[0].Height != 6 {
		t.Fatalf("reopened: %d snapshots, want only 6", len(l))
	}
	for _, gone := range []string{"tmp-8", "4"} {
		if _, err := os.Stat(filepath.Join(dir, gone)); !os.IsNotExist(err) {
			t.Fatalf("%s left behind", gone)
		}
	}
}
