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
