package store

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// fill writes n keys over versions versions and returns the tree.
func fill(t *testing.T, n, versions int) *Tree {
	t.Helper()
	tr := NewMemTree()
	for v := 0; v < versions; v++ {
		for i := 0; i < n; i++ {
			if (i+v)%3 == 0 {
				tr.Set([]byte(fmt.Sprintf("k%05d", i)), []byte(fmt.Sprintf("v%d-%d", i, v)))
			}
		}
		if v > 0 {
			tr.Delete([]byte(fmt.Sprintf("k%05d", v)))
		}
		if _, _, err := tr.SaveVersion(); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

// exportChunks exports version v as chunks of at most size bytes.
func exportChunks(t *testing.T, tr *Tree, v int64, size int) [][]byte {
	t.Helper()
	var chunks [][]byte
	var cur []byte
	err := tr.Export(v, func(n *Node) error {
		cur = AppendNode(cur, n)
		if len(cur) >= size {
			chunks, cur = append(chunks, cur), nil
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(cur) > 0 {
		chunks = append(chunks, cur)
	}
	return chunks
}

func restore(t *testing.T, chunks [][]byte, v int64) (*Tree, error) {
	t.Helper()
	dst := NewMemTree()
	im, err := dst.Import(v)
	if err != nil {
		return nil, err
	}
	for _, c := range chunks {
		nodes, err := DecodeNodes(c)
		if err != nil {
			im.Close()
			return dst, err
		}
		for _, n := range nodes {
			if err := im.Add(n); err != nil {
				im.Close()
				return dst, err
			}
		}
	}
	return dst, im.Commit()
}

// TestExportImport: a saved version rebuilt from its exported nodes, in
// chunks, has the same root hash and contents, and goes on from there
// exactly as the original does.
func TestExportImport(t *testing.T) {
	src := fill(t, 500, 6)
	snap, err := src.Snapshot(4)
	if err != nil {
		t.Fatal(err)
	}
	chunks := exportChunks(t, src, 4, 1<<10)
	if len(chunks) < 5 {
		t.Fatalf("%d chunks: want several", len(chunks))
	}
	dst, err := restore(t, chunks, 4)
	if err != nil {
		t.Fatal(err)
	}
	if dst.Version() != 4 || !bytes.Equal(dst.Hash(), snap.Hash()) {
		t.Fatalf("restored version %d hash %x, want 4 and %x", dst.Version(), dst.Hash(), snap.Hash())
	}
	var a, b []string
	snap.Iterate(nil, nil, func(k, v []byte) bool { a = append(a, string(k)+"="+string(v)); return false })
	dst.Iterate(nil, nil, func(k, v []byte) bool { b = append(b, string(k)+"="+string(v)); return false })
	if strings.Join(a, ",") != strings.Join(b, ",") || len(a) == 0 {
		t.Fatalf("restored contents differ: %d vs %d keys", len(b), len(a))
	}
	// The same writes on top give the same next version.
	other := NewMemTree()
	if other.Get([]byte("k00008")) != nil { // read (cached absent) before the restore
		t.Fatal("an empty tree holds k00008")
	}
	im, _ := other.Import(4)
	for _, c := range chunks {
		nodes, _ := DecodeNodes(c)
		for _, n := range nodes {
			_ = im.Add(n)
		}
	}
	if err := im.Commit(); err != nil {
		t.Fatal(err)
	}
	if got, want := other.Get([]byte("k00008")), snap.Get([]byte("k00008")); want == nil || !bytes.Equal(got, want) {
		t.Fatalf("after the restore k00008 reads %q, want the snapshot's %q (the value cache kept the empty tree's)", got, want)
	}
	for _, tr := range []*Tree{dst, other} {
		tr.Set([]byte("k00007"), []byte("after"))
		tr.Delete([]byte("k00009"))
		if _, _, err := tr.SaveVersion(); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(dst.Hash(), other.Hash()) || dst.Version() != 5 {
		t.Fatalf("after the same block: %x vs %x", dst.Hash(), other.Hash())
	}
	// Import only into an empty tree.
	if _, err := dst.Import(6); err == nil || !strings.Contains(err.Error(), "empty data directory") {
		t.Fatalf("import over state: %v", err)
	}
	if err := src.Export(99, func(*Node) error { return nil }); err == nil {
		t.Fatal("exported a version that does not exist")
	}
}

// TestExportBesideWrites: an export of a saved version runs while the
// working tree writes and saves the next versions (go test -race).
func TestExportBesideWrites(t *testing.T) {
	src := fill(t, 2_000, 3)
	want, _ := src.Snapshot(3)
	var wg sync.WaitGroup
	var chunks [][]byte
	wg.Add(1)
	go func() {
		defer wg.Done()
		chunks = exportChunks(t, src, 3, 4<<10)
	}()
	for v := 0; v < 20; v++ {
		for i := 0; i < 200; i++ {
			src.Set([]byte(fmt.Sprintf("k%05d", (i*7+v)%2_000)), []byte(fmt.Sprintf("w%d", v)))
		}
		if _, _, err := src.SaveVersion(); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	dst, err := restore(t, chunks, 3)
	if err != nil || !bytes.Equal(dst.Hash(), want.Hash()) {
		t.Fatalf("restored %v hash %x, want %x", err, dst.Hash(), want.Hash())
	}
}

// TestDecodeNodesRefuses: a peer's chunk is untrusted.
func TestDecodeNodesRefuses(t *testing.T) {
	good := AppendNode(nil, &Node{Key: []byte("k"), Value: []byte("v"), Version: 3, Height: 0})
	inner := AppendNode(nil, &Node{Key: []byte("k"), Version: 3, Height: 1})
	if nodes, err := DecodeNodes(append(append([]byte(nil), good...), inner...)); err != nil || len(nodes) != 2 || string(nodes[0].Value) != "v" || nodes[1].Height != 1 {
		t.Fatalf("good chunk: %v %+v", err, nodes)
	}
	for name, bz := range map[string][]byte{
		"truncated value":  good[:len(good)-1],
		"truncated height": inner[:len(inner)-1],
		"empty key":        {0},
		"huge key":         {0xff, 0xff, 0xff, 0xff, 0x0f},
		"zero version":     AppendNode(nil, &Node{Key: []byte("k"), Value: []byte("v"), Version: 0}),
		"height 200":       {1, 'k', 6, 200},
		"empty value":      {1, 'k', 6, 0, 0},
		"bad varint":       {0x80},
	} {
		if _, err := DecodeNodes(bz); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// TestWipe: a restored tree that is not the trusted state is wiped back
// to an empty tree, which restores the right snapshot afterwards.
func TestWipe(t *testing.T) {
	src := fill(t, 300, 3)
	chunks := exportChunks(t, src, 3, 1<<10)
	dst, err := restore(t, chunks, 3)
	if err != nil {
		t.Fatal(err)
	}
	if dst.Get([]byte("k00003")) == nil { // read (cached) before the wipe
		t.Fatal("the restored tree lacks k00003")
	}
	if err := dst.Wipe(); err != nil {
		t.Fatal(err)
	}
	if dst.Version() != 0 || dst.Get([]byte("k00003")) != nil {
		t.Fatalf("after the wipe: version %d", dst.Version())
	}
	im, err := dst.Import(3)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chunks {
		nodes, _ := DecodeNodes(c)
		for _, n := range nodes {
			if err := im.Add(n); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := im.Commit(); err != nil || !bytes.Equal(dst.Hash(), src.Hash()) {
		t.Fatalf("restore after the wipe: %v", err)
	}
}

// TestPruneTo: old versions go, the latest and its hash stay, and a
// version being exported is kept until its export ends.
func TestPruneTo(t *testing.T) {
	tr := fill(t, 200, 10)
	latest := bytes.Clone(tr.Hash())
	if err := tr.PruneTo(5); err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= 10; v++ {
		_, err := tr.Snapshot(v)
		if gone := err != nil; gone != (v <= 5) {
			t.Fatalf("version %d: err %v after pruning to 5", v, err)
		}
	}
	if !bytes.Equal(tr.Hash(), latest) {
		t.Fatal("pruning changed the latest hash")
	}
	want, _ := tr.Snapshot(7)
	started, release := make(chan struct{}), make(chan struct{})
	var chunks [][]byte
	done := make(chan error)
	go func() {
		var cur []byte
		first := true
		err := tr.Export(7, func(n *Node) error {
			if first {
				close(started)
				<-release
				first = false
			}
			cur = AppendNode(cur, n)
			return nil
		})
		chunks = [][]byte{cur}
		done <- err
	}()
	<-started
	if err := tr.PruneTo(9); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Snapshot(7); err != nil {
		t.Fatalf("the exported version was pruned: %v", err)
	}
	if _, err := tr.Snapshot(6); err == nil {
		t.Fatal("version 6, below the export's, was kept")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if dst, err := restore(t, chunks, 7); err != nil || !bytes.Equal(dst.Hash(), want.Hash()) {
		t.Fatalf("the export beside pruning: %v", err)
	}
	if err := tr.PruneTo(100); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Snapshot(9); err == nil {
		t.Fatal("version 9 kept after the export ended")
	}
	if _, err := tr.Snapshot(10); err != nil || !bytes.Equal(tr.Hash(), latest) {
		t.Fatalf("the latest version: %v", err)
	}
}

// ReadSnapshot reads what each saved version holds, refuses a version
// never saved, and, after a wipe and a restore of another state at the
// same version, reads the restored values rather than the values it kept
// in memory from before.
func TestReadSnapshot(t *testing.T) {
	tr := fill(t, 300, 3)
	for v := int64(1); v <= 3; v++ {
		r, err := tr.ReadSnapshot(v)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := tr.Snapshot(v)
		if !bytes.Equal(r.Hash(), want.Hash()) || !bytes.Equal(r.Get([]byte("k00006")), want.Get([]byte("k00006"))) {
			t.Fatalf("version %d differs from Snapshot's", v)
		}
	}
	if _, err := tr.ReadSnapshot(4); err == nil {
		t.Fatal("a version never saved was read")
	}
	// Another state restored at version 3 over the wiped tree.
	other := NewMemTree()
	for i := range 50 {
		other.Set([]byte(fmt.Sprintf("k%05d", i)), []byte("other"))
	}
	for range 3 {
		if _, _, err := other.SaveVersion(); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.Wipe(); err != nil {
		t.Fatal(err)
	}
	im, err := tr.Import(3)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range exportChunks(t, other, 3, 1<<10) {
		nodes, _ := DecodeNodes(c)
		for _, n := range nodes {
			if err := im.Add(n); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := im.Commit(); err != nil {
		t.Fatal(err)
	}
	r, err := tr.ReadSnapshot(3)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Get([]byte("k00006")); string(got) != "other" || !bytes.Equal(r.Hash(), other.Hash()) {
		t.Fatalf("after the restore the reader reads %q (hash %X, want %X)", got, r.Hash(), other.Hash())
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.ReadSnapshot(3); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}
