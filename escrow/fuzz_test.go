package escrow

import (
	"bytes"
	"crypto/ed25519"
	"maps"
	"slices"
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/types/msgtest"
)

// fuzzEscrowDecoders are every message decoder of the package, selected by
// the first byte of a fuzz input (modulo their number).
var fuzzEscrowDecoders = []msgtest.Decoder{
	{Name: "send", Type: types.MsgTypeSend, Dec: msgtest.Raw(DecodeMsgSend)},
	{Name: "create-validator", Type: types.MsgTypeCreateValidator, Dec: msgtest.Raw(DecodeMsgCreateValidator)},
	{Name: "unjail-validator", Type: types.MsgTypeUnjailValidator, Dec: msgtest.Raw(DecodeMsgUnjailValidator)},
	{Name: "bond", Type: types.MsgTypeBond, Dec: msgtest.Raw(DecodeMsgBond)},
	{Name: "unbond", Type: types.MsgTypeUnbond, Dec: msgtest.Raw(DecodeMsgUnbond)},
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
		msgtest.Check(t, fuzzEscrowDecoders[int(in[0])%len(fuzzEscrowDecoders)], in[1:])
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
		_, err := d.Dec(in[1:])
		if got := err != nil; got != refused[name] {
			t.Errorf("seed %s (%s): refused = %v (%v), want %v", name, d.Name, got, err, refused[name])
		}
		msgtest.Check(t, d, in[1:])
	}
}
