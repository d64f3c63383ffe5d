package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func save(t *testing.T, tree *Tree) ([]byte, int64) {
	t.Helper()
	h, v, err := tree.SaveVersion()
	if err != nil {
		t.Fatalf("SaveVersion: %v", err)
	}
	return h, v
}

func TestOpenTreeReopen(t *testing.T) {
	dir := t.TempDir()
	tree, err := OpenTree(dir, "state")
	if err != nil {
		t.Fatalf("OpenTree: %v", err)
	}
	if v := tree.Version(); v != 0 {
		t.Fatalf("new tree at version %d, want 0", v)
	}
	tree.Set([]byte("a"), []byte("1"))
	tree.Set([]byte("b"), []byte("2"))
	h1, v1 := save(t, tree)
	tree.Set([]byte("c"), []byte("3"))
	tree.Delete([]byte("a"))
	h2, v2 := save(t, tree)
	if v1 != 1 || v2 != 2 {
		t.Fatalf("versions %d, %d; want 1, 2", v1, v2)
	}
	if bytes.Equal(h1, h2) {
		t.Fatal("different states have the same root")
	}
	// Unsaved writes are not persisted.
	tree.Set([]byte("unsaved"), []byte("x"))
	if err := tree.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "state.db")); err != nil {
		t.Fatalf("no database at dir/name.db: %v", err)
	}

	again, err := OpenTree(dir, "state")
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	t.Cleanup(func() { again.Close() })
	if v := again.Version(); v != 2 {
		t.Fatalf("reopened at version %d, want 2", v)
	}
	if h := again.Hash(); !bytes.Equal(h, h2) {
		t.Fatalf("reopened hash %x, want %x", h, h2)
	}
	if h := again.WorkingHash(); !bytes.Equal(h, h2) {
		t.Fatalf("reopened working hash %x, want %x (unsaved write survived?)", h, h2)
	}
	cases := []struct {
		key, want string
	}{
		{"a", ""}, {"b", "2"}, {"c", "3"}, {"unsaved", ""},
	}
	for _, tc := range cases {
		if got := string(again.Get([]byte(tc.key))); got != tc.want {
			t.Errorf("after reopen Get(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
	// The old version is still there after a reopen.
	snap, err := again.Snapshot(1)
	if err != nil {
		t.Fatalf("Snapshot(1) after reopen: %v", err)
	}
	if !bytes.Equal(snap.Hash(), h1) || string(snap.Get([]byte("a"))) != "1" {
		t.Fatalf("version 1 after reopen: hash %x a=%q; want %x a=1", snap.Hash(), snap.Get([]byte("a")), h1)
	}
}

func TestSameWritesSameHash(t *testing.T) {
	a, b := NewMemTree(), openTestTree(t)
	for _, tree := range []*Tree{a, b} {
		for i := range 50 {
			tree.Set(fmt.Appendf(nil, "k%03d", i), fmt.Appendf(nil, "v%d", i))
		}
	}
	ha, _ := save(t, a)
	hb, _ := save(t, b)
	if !bytes.Equal(ha, hb) {
		t.Fatalf("memory and disk trees disagree: %x vs %x", ha, hb)
	}
}

// openTestTree opens a tree in a fresh temporary directory, closed at cleanup.
func openTestTree(t *testing.T) *Tree {
	t.Helper()
	tree, err := OpenTree(t.TempDir(), "state")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tree.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return tree
}

func TestRollback(t *testing.T) {
	tree := NewMemTree()
	tree.Set([]byte("a"), []byte("1"))
	h, _ := save(t, tree)
	tree.Set([]byte("a"), []byte("2"))
	tree.Set([]byte("b"), []byte("3"))
	tree.Rollback()
	if got := string(tree.Get([]byte("a"))); got != "1" {
		t.Fatalf("after Rollback a = %q, want 1", got)
	}
	if !bytes.Equal(tree.WorkingHash(), h) {
		t.Fatal("Rollback left the working hash changed")
	}
}

func TestInitialVersion(t *testing.T) {
	tree := NewMemTree()
	tree.SetInitialVersion(10)
	tree.Set([]byte("a"), []byte("1"))
	h, v := save(t, tree)
	if v != 10 || tree.Version() != 10 {
		t.Fatalf("first version %d (Version %d), want 10", v, tree.Version())
	}
	snap, err := tree.Snapshot(10)
	if err != nil || !bytes.Equal(snap.Hash(), h) {
		t.Fatalf("Snapshot(10) = %v, %v", snap, err)
	}
}

func TestSnapshot(t *testing.T) {
	tree := openTestTree(t)
	empty, err := tree.Snapshot(0)
	if err != nil {
		t.Fatalf("Snapshot(0) before any version: %v", err)
	}
	if empty.Version() != 0 || empty.Get([]byte("a")) != nil || len(collect(empty, nil, nil)) != 0 {
		t.Fatal("snapshot of an unsaved tree is not empty")
	}

	// version 1: a=1 b=1; version 2: a=2, b deleted, c=2; version 3: d=3.
	tree.Set([]byte("a"), []byte("1"))
	tree.Set([]byte("b"), []byte("1"))
	h1, _ := save(t, tree)
	tree.Set([]byte("a"), []byte("2"))
	tree.Delete([]byte("b"))
	tree.Set([]byte("c"), []byte("2"))
	h2, _ := save(t, tree)
	tree.Set([]byte("d"), []byte("3"))
	h3, _ := save(t, tree)
	// Unsaved writes never show in a snapshot.
	tree.Set([]byte("e"), []byte("working"))

	cases := []struct {
		name    string
		version int64
		wantV   int64
		hash    []byte
		content string
	}{
		{"version 1", 1, 1, h1, `"a"="1" "b"="1" `},
		{"version 2", 2, 2, h2, `"a"="2" "c"="2" `},
		{"version 3", 3, 3, h3, `"a"="2" "c"="2" "d"="3" `},
		{"latest (0)", 0, 3, h3, `"a"="2" "c"="2" "d"="3" `},
		{"latest (negative)", -1, 3, h3, `"a"="2" "c"="2" "d"="3" `},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap, err := tree.Snapshot(tc.version)
			if err != nil {
				t.Fatalf("Snapshot(%d): %v", tc.version, err)
			}
			if snap.Version() != tc.wantV {
				t.Fatalf("Version = %d, want %d", snap.Version(), tc.wantV)
			}
			if !bytes.Equal(snap.Hash(), tc.hash) {
				t.Fatalf("Hash = %x, want %x", snap.Hash(), tc.hash)
			}
			if got := pairsString(collect(snap, nil, nil)); got != tc.content {
				t.Fatalf("content = %s, want %s", got, tc.content)
			}
			// A snapshot can be the parent of a Cache, as the mempool's
			// check state is; writing to it directly panics.
			c := NewCache(snap)
			c.Set([]byte("z"), []byte("cached"))
			if string(c.Get([]byte("z"))) != "cached" || snap.Get([]byte("z")) != nil {
				t.Fatal("cache over snapshot leaked into the snapshot")
			}
			func() {
				defer func() {
					if recover() == nil {
						t.Fatal("writing to a snapshot did not panic")
					}
				}()
				c.Write()
			}()
		})
	}

	for _, v := range []int64{4, 100} {
		t.Run(fmt.Sprintf("missing version %d", v), func(t *testing.T) {
			if _, err := tree.Snapshot(v); !errors.Is(err, ErrVersionNotFound) {
				t.Fatalf("Snapshot(%d) error = %v, want ErrVersionNotFound", v, err)
			}
		})
	}
}

func TestProofs(t *testing.T) {
	tree := NewMemTree()
	for i := range 20 {
		tree.Set(fmt.Appendf(nil, "key%02d", i*2), fmt.Appendf(nil, "value%d", i))
	}
	save(t, tree)
	tree.Set([]byte("key02"), []byte("changed in v2"))
	save(t, tree)
	v1, err := tree.Snapshot(1)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := tree.Snapshot(2)
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name  string
		snap  *Snapshot
		prove string // the key the proof is made for
		root  []byte
		key   string // the key and value it is checked against
		value []byte // nil: absence
		ok    bool
	}{
		{"present", v2, "key04", v2.Hash(), "key04", []byte("value2"), true},
		{"present, first key", v2, "key00", v2.Hash(), "key00", []byte("value0"), true},
		{"present, last key", v2, "key38", v2.Hash(), "key38", []byte("value19"), true},
		{"absent, between keys", v2, "key05", v2.Hash(), "key05", nil, true},
		{"absent, before all", v2, "a", v2.Hash(), "a", nil, true},
		{"absent, after all", v2, "zzz", v2.Hash(), "zzz", nil, true},
		{"old version value", v1, "key02", v1.Hash(), "key02", []byte("value1"), true},
		{"new version value", v2, "key02", v2.Hash(), "key02", []byte("changed in v2"), true},
		{"tampered value", v2, "key04", v2.Hash(), "key04", []byte("value3"), false},
		{"stale value against new root", v2, "key02", v2.Hash(), "key02", []byte("value1"), false},
		{"old proof against new root", v1, "key02", v2.Hash(), "key02", []byte("value1"), false},
		{"present key claimed absent", v2, "key04", v2.Hash(), "key04", nil, false},
		{"absent key claimed present", v2, "key05", v2.Hash(), "key05", []byte("x"), false},
		{"proof for another key", v2, "key04", v2.Hash(), "key06", []byte("value2"), false},
		{"tampered root", v2, "key04", append([]byte{v2.Hash()[0] ^ 1}, v2.Hash()[1:]...), "key04", []byte("value2"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			proof, err := tc.snap.Prove([]byte(tc.prove))
			if err != nil {
				t.Fatalf("Prove(%q): %v", tc.prove, err)
			}
			if got := VerifyProof(proof, tc.root, []byte(tc.key), tc.value); got != tc.ok {
				t.Fatalf("VerifyProof = %v, want %v", got, tc.ok)
			}
		})
	}
}
