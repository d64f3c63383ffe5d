package escrow

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/types"
)

// fuzzMsgDecoder is one message decoder under FuzzDecodeEscrowMsg: its
// message type, and the decoder returning the decoded message re-encoded.
type fuzzMsgDecoder struct {
	name string
	typ  types.MsgType
	dec  func([]byte) (types.RawMsg, error)
}

func fuzzRaw[M interface{ Raw() types.RawMsg }](dec func([]byte) (M, error)) func([]byte) (types.RawMsg, error) {
	return func(bz []byte) (types.RawMsg, error) {
		m, err := dec(bz)
		if err != nil {
			return types.RawMsg{}, err
		}
		return m.Raw(), nil
	}
}

// fuzzEscrowDecoders are every message decoder of the package, selected by
// the first byte of a fuzz input (modulo their number).
var fuzzEscrowDecoders = []fuzzMsgDecoder{
	{"send", types.MsgTypeSend, fuzzRaw(DecodeMsgSend)},
	{"create-validator", types.MsgTypeCreateValidator, fuzzRaw(DecodeMsgCreateValidator)},
	{"unjail-validator", types.MsgTypeUnjailValidator, fuzzRaw(DecodeMsgUnjailValidator)},
	{"bond", types.MsgTypeBond, fuzzRaw(DecodeMsgBond)},
	{"unbond", types.MsgTypeUnbond, fuzzRaw(DecodeMsgUnbond)},
}

// checkDecoded is the property every decoder must have: refused input is an
// ErrInvalidMsg; accepted input is the canonical encoding of what it decodes
// to (Raw gives back exactly the input), and that encoding decodes again.
func checkDecoded(t *testing.T, d fuzzMsgDecoder, data []byte) {
	t.Helper()
	raw, err := d.dec(data)
	if err != nil {
		var e *types.Error
		if !errors.As(err, &e) || e.Code != types.ErrInvalidMsg.Code {
			t.Fatalf("%s: refusal %q is not an ErrInvalidMsg (code %d)", d.name, err, types.CodeOf(err))
		}
		return
	}
	if raw.Type != d.typ {
		t.Fatalf("%s: Raw() has type %d, want %d", d.name, raw.Type, d.typ)
	}
	if !bytes.Equal(raw.Data, data) {
		t.Fatalf("%s: accepted %x but re-encodes to %x: not canonical", d.name, data, raw.Data)
	}
	again, err := d.dec(raw.Data)
	if err != nil {
		t.Fatalf("%s: own encoding %x refused: %v", d.name, raw.Data, err)
	}
	if !bytes.Equal(again.Data, data) {
		t.Fatalf("%s: second round trip gives %x, want %x", d.name, again.Data, data)
	}
}

// fuzzEscrowSeeds are a valid encoding of every message and near misses,
// each prefixed with its decoder's index.
func fuzzEscrowSeeds() map[string][]byte {
	enc := func(i int, m interface{ Raw() types.RawMsg }) []byte {
		return append([]byte{byte(i)}, m.Raw().Data...)
	}
	pub := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize)).Public().(ed25519.PublicKey)
	send := enc(0, &MsgSend{To: bob, Amount: types.OGPU(12)})
	return map[string][]byte{
		"send":                  send,
		"send_max":              enc(0, &MsgSend{To: bob, Amount: new(uint256.Int).SetAllOne()}),
		"send_zero":             enc(0, &MsgSend{To: bob, Amount: new(uint256.Int)}),
		"send_zero_address":     enc(0, &MsgSend{Amount: types.OGPU(1)}),
		"send_trailing":         append(bytes.Clone(send), 0x80),
		"send_amount_leading_0": {0, 0xd8, 0x94, 0xb0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x82, 0x00, 0x01},
		"create_validator":      enc(1, &MsgCreateValidator{Name: "val-2", PubKey: pub, SelfBond: types.OGPU(1000)}),
		"create_validator_zero": enc(1, &MsgCreateValidator{Name: "v", PubKey: pub, SelfBond: new(uint256.Int)}),
		"create_validator_key":  enc(1, &MsgCreateValidator{Name: "v", PubKey: pub[:31], SelfBond: types.OGPU(1)}),
		"create_validator_name": enc(1, &MsgCreateValidator{Name: "tab\there", PubKey: pub, SelfBond: types.OGPU(1)}),
		"unjail":                enc(2, &MsgUnjailValidator{}),
		"unjail_not_list":       {2, 0x80},
		"bond":                  enc(3, &MsgBond{Amount: types.OGPU(100)}),
		"bond_zero":             enc(3, &MsgBond{Amount: new(uint256.Int)}),
		"bond_33_bytes":         append([]byte{3, 0xe2, 0xa1, 0x01}, make([]byte, 32)...),
		"unbond":                enc(4, &MsgUnbond{Amount: uint256.NewInt(1)}),
		"unbond_zero":           enc(4, &MsgUnbond{Amount: new(uint256.Int)}),
		"empty":                 {},
		"garbage":               []byte("\x01\xf8\xff not a message"),
	}
}

// FuzzDecodeEscrowMsg runs arbitrary bytes through an escrow message decoder
// chosen by the first byte: no panic, refusals are ErrInvalidMsg, and what
// is accepted is canonical and accepted again.
func FuzzDecodeEscrowMsg(f *testing.F) {
	seeds := fuzzEscrowSeeds()
	for _, name := range slices.Sorted(maps.Keys(seeds)) {
		f.Add(seeds[name])
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		checkDecoded(t, fuzzEscrowDecoders[int(in[0])%len(fuzzEscrowDecoders)], in[1:])
	})
}

// The seeds decode (or are refused) as their names say.
func TestFuzzEscrowSeeds(t *testing.T) {
	refused := map[string]bool{
		"send_zero": true, "send_zero_address": true, "send_trailing": true, "send_amount_leading_0": true,
		"create_validator_key": true, "create_validator_name": true, "unjail_not_list": true,
		"bond_zero": true, "bond_33_bytes": true, "unbond_zero": true, "garbage": true,
	}
	for name, in := range fuzzEscrowSeeds() {
		if len(in) == 0 {
			continue
		}
		d := fuzzEscrowDecoders[int(in[0])%len(fuzzEscrowDecoders)]
		_, err := d.dec(in[1:])
		if got := err != nil; got != refused[name] {
			t.Errorf("seed %s (%s): refused = %v (%v), want %v", name, d.name, got, err, refused[name])
		}
		checkDecoded(t, d, in[1:])
	}
}
