package store

import (
	"bytes"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
)

// kvPair is one key and value seen by an iteration.
type kvPair struct{ k, v string }

func collect(r Reader, start, end []byte) []kvPair {
	var out []kvPair
	r.Iterate(start, end, func(k, v []byte) bool {
		out = append(out, kvPair{string(k), string(v)})
		return false
	})
	return out
}

func pairsString(ps []kvPair) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "%q=%q ", p.k, p.v)
	}
	return b.String()
}

// parentWith returns a tree holding the given key/value pairs (unsaved).
func parentWith(kv ...string) *Tree {
	t := NewMemTree()
	for i := 0; i < len(kv); i += 2 {
		t.Set([]byte(kv[i]), []byte(kv[i+1]))
	}
	return t
}

func TestCacheGetSetDelete(t *testing.T) {
	cases := []struct {
		name string
		ops  func(c *Cache)
		key  string
		want string // "" means absent
	}{
		{"reads through to parent", func(c *Cache) {}, "a", "1"},
		{"absent everywhere", func(c *Cache) {}, "zz", ""},
		{"override", func(c *Cache) { c.Set([]byte("a"), []byte("x")) }, "a", "x"},
		{"new key", func(c *Cache) { c.Set([]byte("n"), []byte("y")) }, "n", "y"},
		{"delete hides parent", func(c *Cache) { c.Delete([]byte("a")) }, "a", ""},
		{"set after delete", func(c *Cache) { c.Delete([]byte("a")); c.Set([]byte("a"), []byte("z")) }, "a", "z"},
		{"delete after set", func(c *Cache) { c.Set([]byte("n"), []byte("y")); c.Delete([]byte("n")) }, "n", ""},
		{"delete absent key", func(c *Cache) { c.Delete([]byte("q")) }, "q", ""},
		{"other key untouched", func(c *Cache) { c.Delete([]byte("a")) }, "b", "2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			parent := parentWith("a", "1", "b", "2")
			c := NewCache(parent)
			tc.ops(c)
			if got := string(c.Get([]byte(tc.key))); got != tc.want {
				t.Fatalf("Get(%q) = %q, want %q", tc.key, got, tc.want)
			}
			// Nothing reaches the parent before Write.
			if got := collect(parent, nil, nil); pairsString(got) != `"a"="1" "b"="2" ` {
				t.Fatalf("parent changed before Write: %s", pairsString(got))
			}
		})
	}
}

func TestCacheSetCopiesValue(t *testing.T) {
	c := NewCache(NewMemTree())
	v := []byte("abc")
	c.Set([]byte("k"), v)
	v[0] = 'X'
	if got := string(c.Get([]byte("k"))); got != "abc" {
		t.Fatalf("Get = %q: Set kept the caller's slice", got)
	}
}

func TestCacheSetEmptyValuePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Set with an empty value did not panic")
		}
	}()
	NewCache(NewMemTree()).Set([]byte("k"), nil)
}

func TestCacheIterate(t *testing.T) {
	// Parent: a b c d e; buffer: overrides b, deletes c and e, adds a0, ca, f.
	setup := func() *Cache {
		c := NewCache(parentWith("a", "1", "b", "2", "c", "3", "d", "4", "e", "5"))
		c.Set([]byte("b"), []byte("B"))
		c.Delete([]byte("c"))
		c.Delete([]byte("e"))
		c.Set([]byte("a0"), []byte("new"))
		c.Set([]byte("ca"), []byte("CA"))
		c.Set([]byte("f"), []byte("F"))
		c.Delete([]byte("zz")) // deleting an absent key shows nothing
		return c
	}
	all := `"a"="1" "a0"="new" "b"="B" "ca"="CA" "d"="4" "f"="F" `
	cases := []struct {
		name       string
		start, end []byte
		stopAfter  int // 0: never stop
		want       string
	}{
		{name: "everything", want: all},
		{name: "from b", start: []byte("b"), want: `"b"="B" "ca"="CA" "d"="4" "f"="F" `},
		{name: "up to d", end: []byte("d"), want: `"a"="1" "a0"="new" "b"="B" "ca"="CA" `},
		{name: "b to d", start: []byte("b"), end: []byte("d"), want: `"b"="B" "ca"="CA" `},
		{name: "start at deleted key", start: []byte("c"), end: []byte("d"), want: `"ca"="CA" `},
		{name: "nil end, start past parent", start: []byte("e"), want: `"f"="F" `},
		{name: "empty range", start: []byte("d"), end: []byte("d"), want: ``},
		{name: "range of only deletions", start: []byte("e"), end: []byte("f"), want: ``},
		{name: "stop at first (buffered-before-parent)", stopAfter: 1, want: `"a"="1" `},
		{name: "stop on buffered key", stopAfter: 2, want: `"a"="1" "a0"="new" `},
		{name: "stop on override", stopAfter: 3, want: `"a"="1" "a0"="new" "b"="B" `},
		{name: "stop on parent key", stopAfter: 5, want: `"a"="1" "a0"="new" "b"="B" "ca"="CA" "d"="4" `},
		{name: "stop on trailing buffered key", stopAfter: 6, want: all},
		{name: "stop in range with nil end", start: []byte("ca"), stopAfter: 1, want: `"ca"="CA" `},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := setup()
			var got []kvPair
			calls := 0
			c.Iterate(tc.start, tc.end, func(k, v []byte) bool {
				calls++
				got = append(got, kvPair{string(k), string(v)})
				return tc.stopAfter != 0 && calls == tc.stopAfter
			})
			if s := pairsString(got); s != tc.want {
				t.Fatalf("Iterate(%q, %q) =\n%s\nwant\n%s", tc.start, tc.end, s, tc.want)
			}
		})
	}
}

func TestCacheIterateEmptyParent(t *testing.T) {
	c := NewCache(NewMemTree())
	for _, k := range []string{"c", "a", "b"} {
		c.Set([]byte(k), []byte(strings.ToUpper(k)))
	}
	c.Delete([]byte("b"))
	if got := pairsString(collect(c, nil, nil)); got != `"a"="A" "c"="C" ` {
		t.Fatalf("Iterate = %s", got)
	}
}

// recordingKV records the writes that reach it.
type recordingKV struct {
	*Tree
	log []string
}

func (r *recordingKV) Set(k, v []byte) { r.log = append(r.log, "set "+string(k)); r.Tree.Set(k, v) }
func (r *recordingKV) Delete(k []byte) { r.log = append(r.log, "del "+string(k)); r.Tree.Delete(k) }

func TestCacheWriteSortedOrder(t *testing.T) {
	cases := []struct {
		name string
		ops  []string // "set k" or "del k", applied in this order
		want []string
	}{
		{"sets in reverse", []string{"set c", "set b", "set a"}, []string{"set a", "set b", "set c"}},
		{"mixed", []string{"del z", "set m", "del a", "set b"}, []string{"del a", "set b", "set m", "del z"}},
		{"last write wins", []string{"set k", "del k", "set j", "set k"}, []string{"set j", "set k"}},
		{"byte order not length order", []string{"set b", "set a\xff", "set ab", "set a"}, []string{"set a", "set ab", "set a\xff", "set b"}},
		{"nothing", nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			parent := &recordingKV{Tree: NewMemTree()}
			c := NewCache(parent)
			for _, op := range tc.ops {
				verb, k, _ := strings.Cut(op, " ")
				if verb == "set" {
					c.Set([]byte(k), []byte("v"))
				} else {
					c.Delete([]byte(k))
				}
			}
			c.Write()
			if !slices.Equal(parent.log, tc.want) {
				t.Fatalf("writes reached the parent as %q, want %q", parent.log, tc.want)
			}
			if c.Len() != 0 {
				t.Fatalf("Len after Write = %d, want 0", c.Len())
			}
			// Writing again writes nothing.
			parent.log = nil
			c.Write()
			if len(parent.log) != 0 {
				t.Fatalf("second Write wrote %q", parent.log)
			}
		})
	}
}

// Two caches holding the same writes made in different orders give the tree
// the same root: Write's sorted order makes the hash independent of the order
// of the buffered writes.
func TestCacheWriteOrderIndependentHash(t *testing.T) {
	keys := []string{"k5", "k1", "k9", "k3", "k7", "k2", "k8", "k0", "k4", "k6"}
	hash := func(order []string) []byte {
		tree := NewMemTree()
		c := NewCache(tree)
		for _, k := range order {
			c.Set([]byte(k), []byte("v"+k))
		}
		c.Write()
		return tree.WorkingHash()
	}
	sorted := slices.Sorted(slices.Values(keys))
	if a, b := hash(keys), hash(sorted); !bytes.Equal(a, b) {
		t.Fatalf("root depends on buffered write order: %x vs %x", a, b)
	}
}

// TestCacheMatchesReferenceMap applies random operations to a Cache over a
// tree (and to a Cache over that Cache) and to plain maps, and compares every
// read, every iteration and the tree after Write.
func TestCacheMatchesReferenceMap(t *testing.T) {
	for _, seed := range []int64{1, 2, 3, 42, 1234} {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			// A small key space so that operations collide often; keys
			// include 0x00 and 0xff bytes and prefixes of each other.
			alphabet := []byte{0x00, 'a', 'b', 0xff}
			randKey := func() []byte {
				n := 1 + rng.Intn(3)
				k := make([]byte, n)
				for i := range k {
					k[i] = alphabet[rng.Intn(len(alphabet))]
				}
				return k
			}
			randBound := func() []byte {
				if rng.Intn(4) == 0 {
					return nil
				}
				return randKey()
			}

			tree := NewMemTree()
			ref := map[string]string{}
			for range 30 {
				k, v := randKey(), fmt.Sprint(rng.Intn(1000))
				tree.Set(k, []byte(v))
				ref[string(k)] = v
			}
			if _, _, err := tree.SaveVersion(); err != nil {
				t.Fatal(err)
			}

			check := func(step int, r Reader, want map[string]string) {
				t.Helper()
				k := randKey()
				if got, w := string(r.Get(k)), want[string(k)]; got != w {
					t.Fatalf("step %d: Get(%x) = %q, want %q", step, k, got, w)
				}
				start, end := randBound(), randBound()
				stop := rng.Intn(6) // 0: never stop
				var got []kvPair
				r.Iterate(start, end, func(k, v []byte) bool {
					got = append(got, kvPair{string(k), string(v)})
					return stop != 0 && len(got) == stop
				})
				var exp []kvPair
				for _, k := range slices.Sorted(func(yield func(string) bool) {
					for k := range want {
						if !yield(k) {
							return
						}
					}
				}) {
					if (start == nil || k >= string(start)) && (end == nil || k < string(end)) {
						exp = append(exp, kvPair{k, want[k]})
					}
				}
				if stop != 0 && len(exp) > stop {
					exp = exp[:stop]
				}
				if pairsString(got) != pairsString(exp) {
					t.Fatalf("step %d: Iterate(%x, %x) stop %d =\n%s\nwant\n%s", step, start, end, stop, pairsString(got), pairsString(exp))
				}
			}

			outer := NewCache(tree)
			outerRef := maps(ref)
			inner := NewCache(outer)
			innerRef := maps(outerRef)
			for step := range 400 {
				// Operate on the inner cache; sometimes flush it to the
				// outer one, or drop it.
				k := randKey()
				switch op := rng.Intn(10); {
				case op < 5:
					v := fmt.Sprint(rng.Intn(1000))
					inner.Set(k, []byte(v))
					innerRef[string(k)] = v
				case op < 8:
					inner.Delete(k)
					delete(innerRef, string(k))
				case op == 8:
					inner.Write()
					outerRef = maps(innerRef)
				default:
					inner = NewCache(outer)
					innerRef = maps(outerRef)
				}
				check(step, inner, innerRef)
				check(step, outer, outerRef)
				check(step, tree, ref)
			}
			inner.Write()
			outer.Write()
			if got, want := pairsString(collect(tree, nil, nil)), pairsString(collect(mapReader(innerRef), nil, nil)); got != want {
				t.Fatalf("tree after Write =\n%s\nwant\n%s", got, want)
			}
		})
	}
}

func maps(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// mapReader is a Reader over a map, for comparisons.
type mapReader map[string]string

func (m mapReader) Get(k []byte) []byte {
	if v, ok := m[string(k)]; ok {
		return []byte(v)
	}
	return nil
}

func (m mapReader) Iterate(start, end []byte, fn func(k, v []byte) bool) {
	keys := make([]string, 0, len(m))
	for k := range m {
		if (start == nil || k >= string(start)) && (end == nil || k < string(end)) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if fn([]byte(k), []byte(m[k])) {
			return
		}
	}
}

func TestPrefixEnd(t *testing.T) {
	cases := []struct {
		name   string
		prefix []byte
		want   []byte
	}{
		{"empty prefix: no bound", []byte{}, nil},
		{"nil prefix: no bound", nil, nil},
		{"one byte", []byte{0x10}, []byte{0x11}},
		{"zero byte", []byte{0x00}, []byte{0x01}},
		{"last byte increments", []byte{0x01, 0x02}, []byte{0x01, 0x03}},
		{"0xfe becomes 0xff", []byte{0x01, 0xfe}, []byte{0x01, 0xff}},
		{"trailing 0xff carries", []byte{0x01, 0xff}, []byte{0x02}},
		{"several trailing 0xff", []byte{0x01, 0x02, 0xff, 0xff}, []byte{0x01, 0x03}},
		{"0xff in the middle stays", []byte{0xff, 0x01}, []byte{0xff, 0x02}},
		{"all 0xff: no bound", []byte{0xff}, nil},
		{"many 0xff: no bound", []byte{0xff, 0xff, 0xff}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := bytes.Clone(tc.prefix)
			got := PrefixEnd(tc.prefix)
			if !bytes.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
				t.Fatalf("PrefixEnd(%x) = %x (nil %v), want %x (nil %v)", tc.prefix, got, got == nil, tc.want, tc.want == nil)
			}
			if !bytes.Equal(tc.prefix, in) {
				t.Fatalf("PrefixEnd modified its argument: %x, was %x", tc.prefix, in)
			}
		})
	}
}

func TestIteratePrefix(t *testing.T) {
	tree := parentWith(
		"\x00", "z",
		"\x01", "p", "\x01\x00", "a", "\x01\xff", "b", "\x01\xff\xff", "c",
		"\x02", "q",
		"\xff", "f1", "\xff\x00", "f2", "\xff\xff", "f3",
	)
	cases := []struct {
		name   string
		prefix string
		want   string
	}{
		{"prefix with 0xff children", "\x01", `"\x01"="p" "\x01\x00"="a" "\x01\xff"="b" "\x01\xff\xff"="c" `},
		{"prefix ending in 0xff", "\x01\xff", `"\x01\xff"="b" "\x01\xff\xff"="c" `},
		{"0xff prefix: no upper bound", "\xff", `"\xff"="f1" "\xff\x00"="f2" "\xff\xff"="f3" `},
		{"0xff 0xff prefix", "\xff\xff", `"\xff\xff"="f3" `},
		{"absent prefix", "\x03", ``},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []kvPair
			IteratePrefix(tree, []byte(tc.prefix), func(k, v []byte) bool {
				got = append(got, kvPair{string(k), string(v)})
				return false
			})
			if s := pairsString(got); s != tc.want {
				t.Fatalf("IteratePrefix(%q) = %s, want %s", tc.prefix, s, tc.want)
			}
		})
	}
}

// TestC2CacheIterateVisitsOnlyItsRange: finding C2. A block's cache holds
// every write of the block, and EndBlock iterates narrow prefixes of it
// once per job and stage it closes. Iterate used to walk every buffered key
// for each call (O(D)), so N jobs closing at one height cost O(N²): 100,000
// unrelated buffered writes made each narrow iteration visit all 100,000.
// Now it visits only the buffered keys in its range (plus at most one past
// an early stop), whatever else the buffer holds.
func TestC2CacheIterateVisitsOnlyItsRange(t *testing.T) {
	parent := parentWith("job/0500/a", "p", "job/0500/z", "p")
	c := NewCache(parent)
	const unrelated = 100_000
	for i := range unrelated {
		c.Set(fmt.Appendf(nil, "job/%04d/%06d", i%1000, i), []byte("v"))
	}
	// The range: job 500's keys, 100 buffered plus 2 in the parent, one of
	// them deleted in the buffer.
	c.Delete([]byte("job/0500/z"))
	prefix := []byte("job/0500/")
	c.visited = 0
	got := 0
	IteratePrefix(c, prefix, func(k, v []byte) bool { got++; return false })
	if got != 101 {
		t.Fatalf("iterated %d keys of job 500, want 101 (100 buffered, the parent's a; z deleted)", got)
	}
	if c.visited > 101 {
		t.Fatalf("a prefix holding 101 buffered keys visited %d buffered entries of %d: Iterate walks the whole buffer", c.visited, c.Len())
	}
	// A stop after the first key visits no more than a few.
	c.visited = 0
	IteratePrefix(c, prefix, func(k, v []byte) bool { return true })
	if c.visited > 2 {
		t.Fatalf("an iteration stopped at its first key visited %d buffered entries", c.visited)
	}
	// An empty range visits none.
	c.visited = 0
	IteratePrefix(c, []byte("other/"), func(k, v []byte) bool { t.Fatal("key in an empty range"); return true })
	if c.visited != 0 {
		t.Fatalf("an empty range visited %d buffered entries", c.visited)
	}
}

// BenchmarkCacheIterateNarrow: one prefix iteration over 10 buffered keys in
// a cache holding D buffered keys in all. Flat in D since C2's fix; linear
// in D before it.
func BenchmarkCacheIterateNarrow(b *testing.B) {
	for _, d := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("D=%d", d), func(b *testing.B) {
			c := NewCache(NewMemTree())
			for i := range d {
				c.Set(fmt.Appendf(nil, "job/%06d/%02d", i/10, i%10), []byte("v"))
			}
			prefix := fmt.Appendf(nil, "job/%06d/", d/20)
			b.ResetTimer()
			for range b.N {
				n := 0
				IteratePrefix(c, prefix, func(k, v []byte) bool { n++; return false })
				if n != 10 {
					b.Fatalf("%d keys, want 10", n)
				}
			}
		})
	}
}
