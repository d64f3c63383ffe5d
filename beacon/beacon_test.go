package beacon

import (
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

func addr(name string) types.Address {
	h := sha256.Sum256([]byte(name))
	return types.BytesToAddress(h[:20])
}

// net is a beacon over a memory store with validators running their
// chains honestly unless told otherwise.
type net struct {
	t      *testing.T
	kv     store.KV
	height uint64
	ops    []types.Address
	chains map[types.Address]*Chain // looked up only
	reg    map[types.Address]uint64 // registration height
	active map[types.Address]bool
}

func newNet(t *testing.T, names ...string) *net {
	n := &net{t: t, kv: store.NewMemTree(), height: 1, chains: map[types.Address]*Chain{}, reg: map[types.Address]uint64{}, active: map[types.Address]bool{}}
	for _, name := range names {
		op := addr(name)
		n.ops = append(n.ops, op)
		n.chains[op] = NewChain(sha256.Sum256([]byte("seed of "+name)), 1000)
		n.active[op] = true
	}
	return n
}

// block runs block n.height carrying the extensions of height n.height-1
// from the validators in from (nil: all), then its Finalize.
func (n *net) block(from []types.Address) {
	n.t.Helper()
	h := n.height - 1
	if from == nil {
		from = n.ops
	}
	k := NewKeeper(n.kv, nil)
	for _, op := range from {
		if h == 0 {
			continue
		}
		rv := n.reveal(op, h)
		if why := k.Apply(op, h, rv); why != "" && !rv.Register {
			n.t.Fatalf("height %d: %s's reveal refused: %s", h, op, why)
		}
	}
	k.Finalize(n.height, func(op types.Address) bool { return n.active[op] })
	n.height++
}

// reveal is what an honest validator's extension at height h carries:
// a registration until its record is on chain, then its value.
func (n *net) reveal(op types.Address, h uint64) *Reveal {
	if rec, ok := GetRecord(n.kv, op); ok && rec.Start == n.reg[op]+1 {
		return &Reveal{Value: n.chains[op].At(h - n.reg[op])}
	}
	n.reg[op] = h
	return &Reveal{Value: n.chains[op].Tip(), Register: true, Length: n.chains[op].Len()}
}

func (n *net) value(d uint64) (types.Hash, bool) { return Value(n.kv, d) }

// TestChainAt: the checkpointed chain equals the naive one.
func TestChainAt(t *testing.T) {
	seed := sha256.Sum256([]byte("s"))
	for _, length := range []uint64{1, 2, 17, 100} {
		c := NewChain(seed, length)
		for i := uint64(0); i <= length; i++ {
			x := seed
			for j := uint64(0); j < length-i; j++ {
				x = Hash(x)
			}
			if c.At(i) != x {
				t.Fatalf("N=%d: At(%d) differs from H^%d(seed)", length, i, length-i)
			}
		}
	}
}

// TestOmissionOnlyDelays: a height's value is the same whether every
// reveal arrived on time or a proposer left some out (a later reveal
// discloses the omitted value): a proposer cannot choose it.
func TestOmissionOnlyDelays(t *testing.T) {
	honest, censored := newNet(t, "a", "b", "c"), newNet(t, "a", "b", "c")
	for i := 0; i < 20; i++ {
		honest.block(nil)
		var from []types.Address
		if censored.height < 8 || censored.height > 11 {
			from = nil
		} else {
			from = censored.ops[:1] // b and c left out of blocks 8..11
		}
		censored.block(from)
	}
	for d := uint64(3); d < 18; d++ {
		a, okA := honest.value(d)
		b, okB := censored.value(d)
		if !okA || !okB || a != b {
			t.Fatalf("height %d: honest %x (%v), censored %x (%v): omission changed or lost the value", d, a[:4], okA, b[:4], okB)
		}
	}
}

// TestMissingValidatorTimesOut: a validator that stops revealing holds
// heights back for Timeout blocks, then they are final without it (and
// say so); its later reveals are refused once past MaxGap.
func TestMissingValidatorTimesOut(t *testing.T) {
	n := newNet(t, "a", "b")
	for i := 0; i < 5; i++ {
		n.block(nil)
	}
	stop := n.height - 1 // b's last reveal
	var evs types.Events
	for i := 0; i < Timeout+3; i++ {
		h := n.height - 1
		k := NewKeeper(n.kv, &evs)
		if why := k.Apply(n.ops[0], h, n.reveal(n.ops[0], h)); why != "" {
			t.Fatal(why)
		}
		k.Finalize(n.height, func(types.Address) bool { return true })
		n.height++
	}
	if _, ok := n.value(stop + 1); !ok {
		t.Fatalf("height %d not final %d blocks later", stop+1, Timeout+2)
	}
	found := false
	for _, e := range evs {
		found = found || e.Type == "beacon_incomplete"
	}
	if !found {
		t.Error("no beacon_incomplete event for heights final without b")
	}
	if _, ok := n.value(n.height - 1); ok {
		t.Error("the current height is final before its precommits")
	}
}

// TestRefusals: a wrong value, a value too far ahead, and a registration
// over an active chain change nothing; the first value of a registration
// is the height after it.
func TestRefusals(t *testing.T) {
	n := newNet(t, "a")
	n.block(nil)
	n.block(nil) // a registered at height 1: its values start at 2
	op := n.ops[0]
	rec, _ := GetRecord(n.kv, op)
	if rec.Start != 2 || rec.Last != 1 {
		t.Fatalf("record %+v, want start 2, last 1 (the tip)", rec)
	}
	k := NewKeeper(n.kv, nil)
	for name, c := range map[string]struct {
		h    uint64
		rv   Reveal
		want string
	}{
		"wrong value": {2, Reveal{Value: sha256.Sum256([]byte("x"))}, "does not hash"},
		"too far":     {1 + MaxGap + 1, Reveal{Value: n.chains[op].At(MaxGap + 1)}, "register a new chain"},
		"past":        {1, Reveal{Value: n.chains[op].At(0)}, "not after"},
		"re-register": {2, Reveal{Value: sha256.Sum256([]byte("y")), Register: true, Length: 10}, "a chain is active"},
		"no length":   {2, Reveal{Value: sha256.Sum256([]byte("y")), Register: true}, "chain length"},
	} {
		before := *rec
		if why := k.Apply(op, c.h, &c.rv); !strings.Contains(why, c.want) {
			t.Errorf("%s: %q, want %q", name, why, c.want)
		}
		if now, _ := GetRecord(n.kv, op); *now != before {
			t.Errorf("%s: the record changed", name)
		}
	}
	if why := k.Apply(addr("stranger"), 2, &Reveal{Value: sha256.Sum256([]byte("z"))}); why == "" {
		t.Error("a reveal without a registration was taken")
	}
}

// TestDrawRate: draws below a rate select about that share.
func TestDrawRate(t *testing.T) {
	hits := 0
	const n = 20_000
	for i := 0; i < n; i++ {
		v := sha256.Sum256([]byte{byte(i), byte(i >> 8)})
		if Draw(v, []byte("task")) < 500 {
			hits++
		}
	}
	if hits < n*4/100 || hits > n*6/100 {
		t.Fatalf("%d of %d draws below 5%%", hits, n)
	}
}

func TestRevealRoundTrip(t *testing.T) {
	rv := &Reveal{Value: sha256.Sum256([]byte("v")), Register: true, Length: 99}
	got, err := DecodeReveal(rv.Encode())
	if err != nil || *got != *rv {
		t.Fatalf("%+v, %v", got, err)
	}
	if _, err := DecodeReveal(append(rv.Encode(), 0)); err == nil {
		t.Fatal("trailing byte accepted")
	}
}

// TestInactiveRecordsGo: a validator that leaves the active set counts for
// nothing at once and loses its record once silent past Timeout.
func TestInactiveRecordsGo(t *testing.T) {
	n := newNet(t, "a", "b")
	for range 4 {
		n.block(nil)
	}
	b := n.ops[1]
	n.active[b] = false
	for range Timeout + 2 {
		n.block(n.ops[:1])
	}
	if _, ok := GetRecord(n.kv, b); ok {
		t.Fatal("an inactive, silent validator's record is still there")
	}
	if _, ok := GetRecord(n.kv, n.ops[0]); !ok {
		t.Fatal("the active validator's record went")
	}
}
