package chain

import (
	"fmt"
	"strconv"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/types"
)

// Event types. Clients subscribe to them (tm.event='Tx' AND transfer.to=...),
// so names and attribute keys are part of the public interface.
const (
	EventTypeTx       = "tx"
	EventTypeTransfer = "transfer"
)

// EventTx is emitted for every transaction that paid its fee.
type EventTx struct {
	From  types.Address
	Nonce uint64
	Fee   *uint256.Int
}

// ABCI encodes the event.
func (e EventTx) ABCI() abci.Event {
	return abci.Event{Type: EventTypeTx, Attributes: []abci.EventAttribute{
		{Key: "from", Value: e.From.Hex(), Index: true},
		{Key: "nonce", Value: strconv.FormatUint(e.Nonce, 10), Index: true},
		{Key: "fee", Value: e.Fee.Dec()},
	}}
}

// ParseEventTx is the inverse of EventTx.ABCI.
func ParseEventTx(ev abci.Event) (EventTx, error) {
	var e EventTx
	a, err := attrs(ev, EventTypeTx, "from", "nonce", "fee")
	if err != nil {
		return e, err
	}
	if e.From, err = types.ParseAddress(a["from"]); err != nil {
		return e, err
	}
	if e.Nonce, err = strconv.ParseUint(a["nonce"], 10, 64); err != nil {
		return e, fmt.Errorf("event tx: nonce: %w", err)
	}
	if e.Fee, err = uint256.FromDecimal(a["fee"]); err != nil {
		return e, fmt.Errorf("event tx: fee: %w", err)
	}
	return e, nil
}

// EventTransfer is emitted for every move of oGPU between accounts.
type EventTransfer struct {
	From, To types.Address
	Amount   *uint256.Int
}

// ABCI encodes the event.
func (e EventTransfer) ABCI() abci.Event {
	return abci.Event{Type: EventTypeTransfer, Attributes: []abci.EventAttribute{
		{Key: "from", Value: e.From.Hex(), Index: true},
		{Key: "to", Value: e.To.Hex(), Index: true},
		{Key: "amount", Value: e.Amount.Dec()},
	}}
}

// ParseEventTransfer is the inverse of EventTransfer.ABCI.
func ParseEventTransfer(ev abci.Event) (EventTransfer, error) {
	var e EventTransfer
	a, err := attrs(ev, EventTypeTransfer, "from", "to", "amount")
	if err != nil {
		return e, err
	}
	if e.From, err = types.ParseAddress(a["from"]); err != nil {
		return e, err
	}
	if e.To, err = types.ParseAddress(a["to"]); err != nil {
		return e, err
	}
	if e.Amount, err = uint256.FromDecimal(a["amount"]); err != nil {
		return e, fmt.Errorf("event transfer: amount: %w", err)
	}
	return e, nil
}

// attrs checks the event type and returns the wanted attributes, each of
// which must be present exactly once.
func attrs(ev abci.Event, typ string, keys ...string) (map[string]string, error) {
	if ev.Type != typ {
		return nil, fmt.Errorf("event is %q, not %q", ev.Type, typ)
	}
	out := make(map[string]string, len(keys))
	for _, a := range ev.Attributes {
		if _, dup := out[a.Key]; dup {
			return nil, fmt.Errorf("event %s: attribute %q twice", typ, a.Key)
		}
		out[a.Key] = a.Value
	}
	for _, k := range keys {
		if _, ok := out[k]; !ok {
			return nil, fmt.Errorf("event %s: attribute %q missing", typ, k)
		}
	}
	return out, nil
}
