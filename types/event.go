package types

import (
	"encoding/hex"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/ethereum/go-ethereum/common"
	"github.com/holiman/uint256"
)

// Event is a typed state-change notification. Modules emit them; the chain
// turns them into ABCI events with EncodeEvent, and clients read them back
// with DecodeEvent into the same struct. The ABCI type is EventType(); every
// exported field becomes one attribute, named by its `event:"name"` tag (or
// the lower-cased field name), in field order. Tagging `event:"name,index"`
// makes CometBFT index the attribute, so clients can subscribe by it
// (job_awarded.job='7').
//
// Field kinds: string, bool, uint64, uint32, uint16, Address, Hash
// ([32]byte, hex), *uint256.Int (decimal base units) and []string (joined
// with commas, which therefore cannot appear in an element).
type Event interface {
	EventType() string
}

// Hash is a 32-byte digest (result hashes, commitments, model hashes).
type Hash = common.Hash

// Events collects the events of one message or one block's end, in order.
type Events []abci.Event

// Emit appends e.
func (es *Events) Emit(e Event) { *es = append(*es, EncodeEvent(e)) }

var (
	addrType    = reflect.TypeOf(Address{})
	hashType    = reflect.TypeOf(Hash{})
	uint256Type = reflect.TypeOf((*uint256.Int)(nil))
)

type eventField struct {
	index int
	name  string
	keyed bool
}

func eventFields(t reflect.Type) []eventField {
	var out []eventField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("event"), ",")
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out = append(out, eventField{index: i, name: name, keyed: opts == "index"})
	}
	return out
}

// EncodeEvent turns a typed event into an ABCI event.
func EncodeEvent(e Event) abci.Event {
	v := reflect.ValueOf(e)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	ev := abci.Event{Type: e.EventType()}
	for _, f := range eventFields(v.Type()) {
		ev.Attributes = append(ev.Attributes, abci.EventAttribute{
			Key: f.name, Value: formatField(v.Field(f.index)), Index: f.keyed,
		})
	}
	return ev
}

func formatField(v reflect.Value) string {
	switch v.Type() {
	case addrType:
		return v.Interface().(Address).Hex()
	case hashType:
		return hex.EncodeToString(v.Interface().(Hash).Bytes())
	case uint256Type:
		if v.IsNil() {
			return "0"
		}
		return v.Interface().(*uint256.Int).Dec()
	}
	switch v.Kind() {
	case reflect.String:
		return v.String()
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Uint64, reflect.Uint32, reflect.Uint16, reflect.Uint8:
		return strconv.FormatUint(v.Uint(), 10)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.String {
			return strings.Join(v.Interface().([]string), ",")
		}
	}
	panic(fmt.Sprintf("types: event field of unsupported type %s", v.Type()))
}

// DecodeEvent fills the typed event pointed to by out from an ABCI event of
// its type. Every attribute must be present exactly once and parse.
func DecodeEvent(ev abci.Event, out Event) error {
	v := reflect.ValueOf(out)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("decode event: want a pointer to an event struct, got %T", out)
	}
	if ev.Type != out.EventType() {
		return fmt.Errorf("event is %q, not %q", ev.Type, out.EventType())
	}
	v = v.Elem()
	seen := make(map[string]string, len(ev.Attributes))
	for _, a := range ev.Attributes {
		if _, dup := seen[a.Key]; dup {
			return fmt.Errorf("event %s: attribute %q twice", ev.Type, a.Key)
		}
		seen[a.Key] = a.Value
	}
	for _, f := range eventFields(v.Type()) {
		s, ok := seen[f.name]
		if !ok {
			return fmt.Errorf("event %s: attribute %q missing", ev.Type, f.name)
		}
		if err := parseField(v.Field(f.index), s); err != nil {
			return fmt.Errorf("event %s: attribute %q: %w", ev.Type, f.name, err)
		}
	}
	return nil
}

func parseField(v reflect.Value, s string) error {
	switch v.Type() {
	case addrType:
		a, err := ParseAddress(s)
		if err != nil {
			return err
		}
		v.Set(reflect.ValueOf(a))
		return nil
	case hashType:
		b, err := hex.DecodeString(s)
		if err != nil || len(b) != 32 {
			return fmt.Errorf("want 64 hex digits, got %q", s)
		}
		v.Set(reflect.ValueOf(common.BytesToHash(b)))
		return nil
	case uint256Type:
		n, err := uint256.FromDecimal(s)
		if err != nil {
			return err
		}
		v.Set(reflect.ValueOf(n))
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		v.SetBool(b)
	case reflect.Uint64, reflect.Uint32, reflect.Uint16, reflect.Uint8:
		n, err := strconv.ParseUint(s, 10, v.Type().Bits())
		if err != nil {
			return err
		}
		v.SetUint(n)
	case reflect.Slice:
		var parts []string
		if s != "" {
			parts = strings.Split(s, ",")
		}
		v.Set(reflect.ValueOf(parts))
	default:
		return fmt.Errorf("unsupported field type %s", v.Type())
	}
	return nil
}

// BytesToHash returns the hash whose last 32 bytes are b.
func BytesToHash(b []byte) Hash { return common.BytesToHash(b) }
