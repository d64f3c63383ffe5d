package escrow

import (
	"github.com/ethereum/go-ethereum/rlp"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/types"
)

// MsgSend moves Amount from the transaction's sender to To.
type MsgSend struct {
	To     types.Address
	Amount *uint256.Int
}

// Raw encodes the message for a transaction.
func (m *MsgSend) Raw() types.RawMsg {
	bz, err := rlp.EncodeToBytes(m)
	if err != nil {
		panic(err) // a struct of fixed-shape fields always encodes
	}
	return types.RawMsg{Type: types.MsgTypeSend, Data: bz}
}

// DecodeMsgSend parses and checks a MsgSend payload.
func DecodeMsgSend(data []byte) (*MsgSend, error) {
	var m MsgSend
	if err := rlp.DecodeBytes(data, &m); err != nil {
		return nil, types.ErrInvalidMsg.Wrapf("send: %v", err)
	}
	if m.Amount == nil || m.Amount.IsZero() {
		return nil, types.ErrInvalidMsg.Wrapf("send: amount must be positive")
	}
	if m.To == (types.Address{}) {
		return nil, types.ErrInvalidMsg.Wrapf("send: recipient is the zero address")
	}
	return &m, nil
}

// MsgCreateValidator makes the sender a validator: it binds the sender's
// account (the operator) to a CometBFT ed25519 consensus key and bonds
// SelfBond from its balance. Voting power follows the operator's bonded
// stake from the end of the block.
type MsgCreateValidator struct {
	Name     string
	PubKey   []byte
	SelfBond *uint256.Int
}

// MaxNameLen bounds validator names.
const MaxNameLen = 64

// Raw encodes the message.
func (m *MsgCreateValidator) Raw() types.RawMsg {
	return types.NewRawMsg(types.MsgTypeCreateValidator, m)
}

// DecodeMsgCreateValidator parses and checks a MsgCreateValidator payload.
func DecodeMsgCreateValidator(data []byte) (*MsgCreateValidator, error) {
	var m MsgCreateValidator
	if err := types.DecodeMsgPayload("create-validator", data, &m); err != nil {
		return nil, err
	}
	switch {
	case len(m.PubKey) != 32:
		return nil, types.ErrInvalidMsg.Wrapf("create-validator: consensus key is %d bytes, want an ed25519 public key of 32 (config/priv_validator_key.json)", len(m.PubKey))
	case m.Name == "" || len(m.Name) > MaxNameLen || !types.Printable(m.Name):
		return nil, types.ErrInvalidMsg.Wrapf("create-validator: name must be 1..%d printable characters", MaxNameLen)
	case m.SelfBond == nil:
		return nil, types.ErrInvalidMsg.Wrapf("create-validator: self-bond is missing")
	}
	return &m, nil
}

// MsgUnjailValidator returns the sender's jailed validator to the set.
type MsgUnjailValidator struct{}

// Raw encodes the message.
func (m *MsgUnjailValidator) Raw() types.RawMsg {
	return types.NewRawMsg(types.MsgTypeUnjailValidator, m)
}

// DecodeMsgUnjailValidator parses a MsgUnjailValidator payload.
func DecodeMsgUnjailValidator(data []byte) (*MsgUnjailValidator, error) {
	var m MsgUnjailValidator
	return &m, types.DecodeMsgPayload("unjail-validator", data, &m)
}

// MsgBond bonds Amount of the sender's balance as stake.
type MsgBond struct{ Amount *uint256.Int }

// Raw encodes the message.
func (m *MsgBond) Raw() types.RawMsg { return types.NewRawMsg(types.MsgTypeBond, m) }

// DecodeMsgBond parses and checks a MsgBond payload.
func DecodeMsgBond(data []byte) (*MsgBond, error) {
	var m MsgBond
	if err := types.DecodeMsgPayload("bond", data, &m); err != nil {
		return nil, err
	}
	if m.Amount == nil || m.Amount.IsZero() {
		return nil, types.ErrInvalidMsg.Wrapf("bond: amount must be positive")
	}
	return &m, nil
}

// MsgUnbond starts unbonding Amount of the sender's stake. It returns to
// the balance after unbonding_blocks and stays slashable until then.
type MsgUnbond struct{ Amount *uint256.Int }

// Raw encodes the message.
func (m *MsgUnbond) Raw() types.RawMsg { return types.NewRawMsg(types.MsgTypeUnbond, m) }

// DecodeMsgUnbond parses and checks a MsgUnbond payload.
func DecodeMsgUnbond(data []byte) (*MsgUnbond, error) {
	var m MsgUnbond
	if err := types.DecodeMsgPayload("unbond", data, &m); err != nil {
		return nil, err
	}
	if m.Amount == nil || m.Amount.IsZero() {
		return nil, types.ErrInvalidMsg.Wrapf("unbond: amount must be positive")
	}
	return &m, nil
}
