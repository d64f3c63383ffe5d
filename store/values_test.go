package store

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"
)

// TestTreeValueCacheMatchesUncached applies the same random writes, reads,
// rollbacks and saves to trees with and without the value cache (and with
// one so small that it starts over every few keys) and compares every read
// and every root hash: the cache changes how fast a read is, never what it
// returns or what the tree holds.
func TestTreeValueCacheMatchesUncached(t *testing.T) {
	for _, seed := range []int64{1, 2, 3, 42} {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			ref := newMemTreeValues(0, 0)
			trees := map[string]*Tree{
				"default": NewMemTree(),
				"tiny":    newMemTreeValues(5, 64),
			}
			names := []string{"default", "tiny"}
			key := func() []byte { return []byte{byte(rng.Intn(3)), byte(rng.Intn(12))} }
			for step := range 3000 {
				switch op := rng.Intn(20); {
				case op < 3:
					// A read of the saved version through ReadSnapshot
					// (the mempool's), which Get may answer from later.
					for _, n := range names {
						if v := trees[n].Version(); v > 0 {
							r, err := trees[n].ReadSnapshot(v)
							if err != nil {
								t.Fatal(err)
							}
							r.Get(key())
						}
					}
				case op < 8:
					k := key()
					want := ref.Get(k)
					for _, n := range names {
						if got := trees[n].Get(k); !bytes.Equal(got, want) {
							t.Fatalf("step %d: %s tree Get(%x) = %x, uncached %x", step, n, k, got, want)
						}
					}
				case op < 14:
					k, v := key(), []byte(fmt.Sprintf("v%d", step))
					ref.Set(k, v)
					for _, n := range names {
						trees[n].Set(k, v)
					}
				case op < 17:
					k := key()
					ref.Delete(k)
					for _, n := range names {
						trees[n].Delete(k)
					}
				case op < 18:
					ref.Rollback()
					for _, n := range names {
						trees[n].Rollback()
					}
				default:
					want, _, err := ref.SaveVersion()
					if err != nil {
						t.Fatal(err)
					}
					for _, n := range names {
						got, _, err := trees[n].SaveVersion()
						if err != nil {
							t.Fatal(err)
						}
						if !bytes.Equal(got, want) {
							t.Fatalf("step %d: %s tree saved root %x, uncached %x", step, n, got, want)
						}
					}
				}
				if n := trees["tiny"].vals.len(); n > 5 {
					t.Fatalf("step %d: the tiny cache holds %d keys, bound 5", step, n)
				}
			}
		})
	}
}

// TestTreeValueCacheWritesAndRollback is the attack on the cache: a
// provider's stake, read (and cached) when it bid, changes in a later
// block; the close must read the new stake, not the cached one, or a
// provider who unbonded after bidding would still win the job. And a block
// that is rolled back (never committed) must leave no trace in the cache.
func TestTreeValueCacheWritesAndRollback(t *testing.T) {
	tr := NewMemTree()
	stake, other := []byte("stake/alice"), []byte("stake/bob")
	tr.Set(stake, []byte("100"))
	tr.Set(other, []byte("50"))
	if _, _, err := tr.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	get := func(k []byte) string { return string(tr.Get(k)) }
	if got := get(stake); got != "100" { // read at the bid: now cached
		t.Fatalf("stake %q, want 100", got)
	}

	// A block writes mid-way (unbonds), then reads again.
	tr.Set(stake, []byte("0"))
	if got := get(stake); got != "0" {
		t.Fatalf("after the write the stake reads %q, want 0", got)
	}
	tr.Delete(other)
	if got := tr.Get(other); got != nil {
		t.Fatalf("deleted key reads %q", got)
	}
	tr.Set([]byte("new"), []byte("x"))

	// The block is not committed: everything goes back.
	tr.Rollback()
	for k, want := range map[string]string{"stake/alice": "100", "stake/bob": "50", "new": ""} {
		if got := get([]byte(k)); got != want {
			t.Fatalf("after rollback %s reads %q, want %q", k, got, want)
		}
	}

	// The same writes committed stay.
	tr.Set(stake, []byte("0"))
	tr.Delete(other)
	if _, _, err := tr.SaveVersion(); err != nil {
		t.Fatal(err)
	}
	tr.Rollback() // nothing unsaved: changes nothing
	if got := get(stake); got != "0" {
		t.Fatalf("after save and an empty rollback the stake reads %q, want 0", got)
	}
	if got := tr.Get(other); got != nil {
		t.Fatalf("after save the deleted key reads %q", got)
	}

	// Two writes in one block, rolled back: the saved value, not the first
	// write's, comes back.
	tr.Set(stake, []byte("7"))
	tr.Set(stake, []byte("8"))
	tr.Rollback()
	if got := get(stake); got != "0" {
		t.Fatalf("after rolling back two writes the stake reads %q, want the saved 0", got)
	}
}

// TestTreeValueCacheSetCopies: the cache keeps its own copy of a written
// value, so a caller reusing its buffer cannot change what a read returns.
func TestTreeValueCacheSetCopies(t *testing.T) {
	tr := NewMemTree()
	buf := []byte("abc")
	tr.Set([]byte("k"), buf)
	buf[0] = 'X'
	if got := string(tr.vals.vals["k"]); got != "abc" {
		t.Fatalf("cached value %q: Set kept the caller's buffer", got)
	}
}

// ReadSnapshot's reads of the last saved version, answered from the
// latest-values cache, equal what the saved version holds: random writes,
// deletes, rollbacks and saves, with reads of the newest version (which
// fill the cache) and of the one before (which it must not answer).
func TestReadSnapshotMatchesTheSavedVersion(t *testing.T) {
	for _, seed := range []int64{1, 2, 3, 42} {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			tr := NewMemTree()
			key := func() []byte { return []byte{byte(rng.Intn(3)), byte(rng.Intn(12))} }
			hits := 0
			for step := range 3000 {
				switch op := rng.Intn(20); {
				case op < 6:
					k := key()
					tr.Set(k, []byte(fmt.Sprintf("v%d", step)))
				case op < 8:
					tr.Delete(key())
				case op < 9:
					tr.Rollback()
				case op < 11:
					if _, _, err := tr.SaveVersion(); err != nil {
						t.Fatal(err)
					}
				default:
					v := tr.Version() - int64(rng.Intn(2))
					if v <= 0 {
						continue
					}
					r, err := tr.ReadSnapshot(v)
					if err != nil {
						t.Fatal(err)
					}
					want, err := tr.Snapshot(v)
					if err != nil {
						t.Fatal(err)
					}
					k := key()
					if _, ok := tr.latest.get(v, k); ok {
						hits++
					}
					if got, w := r.Get(k), want.Get(k); !bytes.Equal(got, w) {
						t.Fatalf("step %d: ReadSnapshot(%d).Get(%x) = %q, the saved version holds %q", step, v, k, got, w)
					}
				}
			}
			if hits == 0 {
				t.Fatal("no read was answered from the cache")
			}
		})
	}
}
