package session

import (
	"strings"
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// keysOf lists the keys of r under this package's session-keyed tables
// that belong to session id.
func keysOf(r store.Reader, id uint64) int {
	n := 0
	for _, p := range []byte{prefixSession, prefixDispute, prefixAccused, prefixConvicted, prefixSealed, prefixOpened} {
		store.IteratePrefix(r, append([]byte{p}, be64(id)...), func(_, _ []byte) bool { n++; return false })
	}
	return n
}

// TestPruneSession: PruneSession refuses a session not settled and one
// with a dispute open (its bond still in escrow), and otherwise deletes
// the session's records and nothing of sessions 1, 10, 256 or 257 (session
// 1's fixed-width prefix is no prefix of theirs). A message naming the
// pruned session is told it was pruned when the chain says so (Pruned),
// "no session" otherwise; nothing is written.
func TestPruneSession(t *testing.T) {
	kv := store.NewMemTree()
	client := newParty(t)
	esc := escrow.NewKeeper(kv)
	ids := []uint64{1, 10, 256, 257}
	esc.SetGenesisBalance(client.addr, types.OGPU(uint64(len(ids))))
	for _, id := range ids {
		if err := esc.Lock(client.addr, id, types.OGPU(1)); err != nil {
			t.Fatal(err)
		}
		s := &Session{ID: id, Client: client.addr, PriceIn: new(uint256.Int), PriceOut: new(uint256.Int), Expiry: 5, Grace: 1,
			Lanes: []Lane{{Provider: client.addr, Budget: types.OGPU(1)}}, Fee: new(uint256.Int)}
		if err := NewKeeper(Context{KV: kv, ChainID: chainID, Height: 1}).Open(s); err != nil {
			t.Fatal(err)
		}
		// A dispute record of each, as a decided dispute leaves it.
		kv.Set(disputeKey(id, 0), []byte{1})
	}
	if PruneSession(kv, 1) {
		t.Fatal("pruned a session not settled")
	}
	NewKeeper(Context{KV: kv, ChainID: chainID, Height: 7}).EndBlock() // settles every one
	s, _ := Get(kv, 1)
	s.OpenDisputes = 1
	k := NewKeeper(Context{KV: kv, ChainID: chainID, Height: 8})
	k.set(s)
	if PruneSession(kv, 1) {
		t.Fatal("pruned a session with a dispute open")
	}
	s.OpenDisputes = 0
	k.set(s)
	before := map[uint64]int{}
	for _, id := range ids[1:] {
		before[id] = keysOf(kv, id)
	}
	if !PruneSession(kv, 1) {
		t.Fatal("a settled session without open disputes was not pruned")
	}
	if n := keysOf(kv, 1); n != 0 {
		t.Fatalf("session 1 keeps %d records", n)
	}
	for _, id := range ids[1:] {
		if n := keysOf(kv, id); n != before[id] || n != 2 {
			t.Fatalf("pruning session 1 changed session %d: %d records, had %d", id, n, before[id])
		}
	}
	for _, c := range []struct {
		name   string
		pruned func(uint64) bool
		want   string
	}{{"chain says pruned", func(id uint64) bool { return id == 1 }, "job 1 ended and was pruned"}, {"no hook", nil, "no session 1"}} {
		t.Run(c.name, func(t *testing.T) {
			c0 := store.NewCache(kv)
			k := NewKeeper(Context{KV: c0, ChainID: chainID, Height: 9, Pruned: c.pruned})
			err := k.Close(client.addr, 1)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("close of the pruned session: %v, want %q", err, c.want)
			}
			if c0.Len() != 0 {
				t.Fatal("the refused close wrote")
			}
		})
	}
}
