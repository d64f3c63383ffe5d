package chain

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

func TestEventTxRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		ev   EventTx
	}{
		{"typical", EventTx{From: addrOf("alice"), Nonce: 7, Fee: types.OGPU(1)}},
		{"zero", EventTx{From: types.Address{}, Nonce: 0, Fee: new(uint256.Int)}},
		{"largest", EventTx{From: addrOf("bob"), Nonce: ^uint64(0), Fee: new(uint256.Int).SetAllOne()}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := tc.ev.ABCI()
			if ev.Type != EventTypeTx {
				t.Fatalf("type %q, want %q", ev.Type, EventTypeTx)
			}
			got, err := ParseEventTx(ev)
			if err != nil {
				t.Fatalf("ParseEventTx: %v", err)
			}
			if !reflect.DeepEqual(got, tc.ev) {
				t.Fatalf("round trip = %+v, want %+v", got, tc.ev)
			}
		})
	}
}

func TestEventTransferRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		ev   EventTransfer
	}{
		{"typical", EventTransfer{From: addrOf("alice"), To: addrOf("bob"), Amount: types.OGPU(10)}},
		{"one unit", EventTransfer{From: addrOf("bob"), To: addrOf("carol"), Amount: uint256.NewInt(1)}},
		{"to self, max", EventTransfer{From: addrOf("carol"), To: addrOf("carol"), Amount: new(uint256.Int).SetAllOne()}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := tc.ev.ABCI()
			if ev.Type != EventTypeTransfer {
				t.Fatalf("type %q, want %q", ev.Type, EventTypeTransfer)
			}
			got, err := ParseEventTransfer(ev)
			if err != nil {
				t.Fatalf("ParseEventTransfer: %v", err)
			}
			if !reflect.DeepEqual(got, tc.ev) {
				t.Fatalf("round trip = %+v, want %+v", got, tc.ev)
			}
		})
	}
}

// Clients query by from and to (transfer.to='0x...'): those attributes must
// be indexed.
func TestEventIndexedAttributes(t *testing.T) {
	cases := []struct {
		name    string
		ev      abci.Event
		indexed []string
	}{
		{"tx", EventTx{From: addrOf("alice"), Fee: types.OGPU(1)}.ABCI(), []string{"from", "nonce"}},
		{"transfer", EventTransfer{From: addrOf("alice"), To: addrOf("bob"), Amount: types.OGPU(1)}.ABCI(), []string{"from", "to"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, a := range tc.ev.Attributes {
				if a.Index {
					got = append(got, a.Key)
				}
			}
			if !slices.Equal(got, tc.indexed) {
				t.Fatalf("indexed attributes %v, want %v", got, tc.indexed)
			}
		})
	}
}

// without returns ev with the attribute key removed.
func without(ev abci.Event, key string) abci.Event {
	out := abci.Event{Type: ev.Type}
	for _, a := range ev.Attributes {
		if a.Key != key {
			out.Attributes = append(out.Attributes, a)
		}
	}
	return out
}

// with returns ev with an attribute appended.
func with(ev abci.Event, key, value string) abci.Event {
	out := abci.Event{Type: ev.Type, Attributes: slices.Clone(ev.Attributes)}
	out.Attributes = append(out.Attributes, abci.EventAttribute{Key: key, Value: value})
	return out
}

// set returns ev with the value of key replaced.
func set(ev abci.Event, key, value string) abci.Event {
	out := abci.Event{Type: ev.Type, Attributes: slices.Clone(ev.Attributes)}
	for i := range out.Attributes {
		if out.Attributes[i].Key == key {
			out.Attributes[i].Value = value
		}
	}
	return out
}

func TestParseEventErrors(t *testing.T) {
	tx := EventTx{From: addrOf("alice"), Nonce: 1, Fee: types.OGPU(1)}.ABCI()
	tr := EventTransfer{From: addrOf("alice"), To: addrOf("bob"), Amount: types.OGPU(1)}.ABCI()
	parseTx := func(ev abci.Event) error { _, err := ParseEventTx(ev); return err }
	parseTransfer := func(ev abci.Event) error { _, err := ParseEventTransfer(ev); return err }
	cases := []struct {
		name  string
		parse func(abci.Event) error
		ev    abci.Event
		want  string
	}{
		{"tx: wrong type", parseTx, tr, `not "tx"`},
		{"tx: empty type", parseTx, abci.Event{Attributes: tx.Attributes}, `not "tx"`},
		{"tx: missing from", parseTx, without(tx, "from"), `"from" missing`},
		{"tx: missing nonce", parseTx, without(tx, "nonce"), `"nonce" missing`},
		{"tx: missing fee", parseTx, without(tx, "fee"), `"fee" missing`},
		{"tx: duplicate nonce", parseTx, with(tx, "nonce", "2"), `"nonce" twice`},
		{"tx: duplicate unknown attribute", parseTx, with(with(tx, "x", "1"), "x", "2"), `"x" twice`},
		{"tx: bad address", parseTx, set(tx, "from", "0x1234"), "invalid address"},
		{"tx: bad nonce", parseTx, set(tx, "nonce", "-1"), "nonce"},
		{"tx: nonce overflow", parseTx, set(tx, "nonce", "18446744073709551616"), "nonce"},
		{"tx: bad fee", parseTx, set(tx, "fee", "1ogpu"), "fee"},
		{"tx: empty fee", parseTx, set(tx, "fee", ""), "fee"},
		{"transfer: wrong type", parseTransfer, tx, `not "transfer"`},
		{"transfer: missing from", parseTransfer, without(tr, "from"), `"from" missing`},
		{"transfer: missing to", parseTransfer, without(tr, "to"), `"to" missing`},
		{"transfer: missing amount", parseTransfer, without(tr, "amount"), `"amount" missing`},
		{"transfer: duplicate to", parseTransfer, with(tr, "to", addrOf("carol").Hex()), `"to" twice`},
		{"transfer: bad to", parseTransfer, set(tr, "to", "bob"), "invalid address"},
		{"transfer: bad amount", parseTransfer, set(tr, "amount", "0x10"), "amount"},
		{"transfer: amount overflow", parseTransfer, set(tr, "amount", "115792089237316195423570985008687907853269984665640564039457584007913129639936"), "amount"},
		{"transfer: no attributes", parseTransfer, abci.Event{Type: EventTypeTransfer}, "missing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.parse(tc.ev)
			if err == nil {
				t.Fatalf("parsed %+v without error", tc.ev)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

// The events a block emits parse back to what happened.
func TestBlockEventsParse(t *testing.T) {
	h := newHarness(t, store.NewMemTree(), testGenesis())
	res := h.block(h.tx("alice", send("bob", types.OGPU(10)), send("carol", types.OGPU(2))))
	if res[0].Code != 0 {
		t.Fatalf("tx failed: %s", res[0].Log)
	}
	evs := res[0].Events
	if len(evs) != 3 {
		t.Fatalf("%d events, want 3 (tx, two transfers)", len(evs))
	}
	etx, err := ParseEventTx(evs[0])
	if err != nil {
		t.Fatal(err)
	}
	if etx.From != addrOf("alice") || etx.Nonce != 0 || !etx.Fee.Eq(types.OGPU(1)) {
		t.Fatalf("tx event %+v", etx)
	}
	for i, want := range []EventTransfer{
		{From: addrOf("alice"), To: addrOf("bob"), Amount: types.OGPU(10)},
		{From: addrOf("alice"), To: addrOf("carol"), Amount: types.OGPU(2)},
	} {
		got, err := ParseEventTransfer(evs[i+1])
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("transfer event %d = %+v, want %+v", i, got, want)
		}
	}
}
