// Package msgtest holds the property every message decoder must have, for
// the decoder fuzz tests of escrow, market and verifier. Only tests import it.
package msgtest

import (
	"bytes"
	"errors"
	"testing"

	"github.com/ogpu-network/ogpu/types"
)

// Decoder is one message decoder: its name, its message type, and the
// decoder returning the decoded message re-encoded.
type Decoder struct {
	Name string
	Type types.MsgType
	Dec  func([]byte) (types.RawMsg, error)
}

// Raw adapts a DecodeMsgX function to a Decoder's Dec.
func Raw[M interface{ Raw() types.RawMsg }](dec func([]byte) (M, error)) func([]byte) (types.RawMsg, error) {
	return func(bz []byte) (types.RawMsg, error) {
		m, err := dec(bz)
		if err != nil {
			return types.RawMsg{}, err
		}
		return m.Raw(), nil
	}
}

// Check asserts the decoder property on data: refused input is an
// ErrInvalidMsg; accepted input is the canonical encoding of what it
// decodes to (Raw gives back exactly the input), and that encoding decodes
// again.
func Check(t *testing.T, d Decoder, data []byte) {
	t.Helper()
	raw, err := d.Dec(data)
	if err != nil {
		var e *types.Error
		if !errors.As(err, &e) || e.Code != types.ErrInvalidMsg.Code {
			t.Fatalf("%s: refusal %q is not an ErrInvalidMsg (code %d)", d.Name, err, types.CodeOf(err))
		}
		return
	}
	if raw.Type != d.Type {
		t.Fatalf("%s: Raw() has type %d, want %d", d.Name, raw.Type, d.Type)
	}
	if !bytes.Equal(raw.Data, data) {
		t.Fatalf("%s: accepted %x but re-encodes to %x: not canonical", d.Name, data, raw.Data)
	}
	again, err := d.Dec(raw.Data)
	if err != nil {
		t.Fatalf("%s: own encoding %x refused: %v", d.Name, raw.Data, err)
	}
	if !bytes.Equal(again.Data, data) {
		t.Fatalf("%s: second round trip gives %x, want %x", d.Name, again.Data, data)
	}
}
