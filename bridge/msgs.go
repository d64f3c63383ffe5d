package bridge

import (
	"github.com/ethereum/go-ethereum/common"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// MsgSetBridgeKey binds the sending validator operator to bridge address
// Key; Proof is Key's signature over KeyDigest(chain id, operator).
type MsgSetBridgeKey struct {
	Key   common.Address
	Proof Sig
}

// Raw encodes the message.
func (m *MsgSetBridgeKey) Raw() types.RawMsg { return types.NewRawMsg(types.MsgTypeSetBridgeKey, m) }

// DecodeMsgSetBridgeKey parses and checks a MsgSetBridgeKey payload.
func DecodeMsgSetBridgeKey(data []byte) (*MsgSetBridgeKey, error) {
	var m MsgSetBridgeKey
	if err := types.DecodeMsgPayload("set bridge key", data, &m); err != nil {
		return nil, err
	}
	if m.Key == (common.Address{}) {
		return nil, types.ErrInvalidMsg.Wrapf("set bridge key: the key's address is zero")
	}
	return &m, nil
}

// MsgBridgeWithdraw sends Amount of the sender's oGPU to Ethereum address
// To. It cannot be cancelled.
type MsgBridgeWithdraw struct {
	To     common.Address
	Amount *uint256.Int
}

// Raw encodes the message.
func (m *MsgBridgeWithdraw) Raw() types.RawMsg {
	return types.NewRawMsg(types.MsgTypeBridgeWithdraw, m)
}

// DecodeMsgBridgeWithdraw parses and checks a MsgBridgeWithdraw payload.
func DecodeMsgBridgeWithdraw(data []byte) (*MsgBridgeWithdraw, error) {
	var m MsgBridgeWithdraw
	if err := types.DecodeMsgPayload("bridge withdraw", data, &m); err != nil {
		return nil, err
	}
	if m.To == (common.Address{}) {
		return nil, types.ErrInvalidMsg.Wrapf("bridge withdraw: the Ethereum recipient is the zero address")
	}
	if m.Amount == nil || m.Amount.IsZero() {
		return nil, types.ErrInvalidMsg.Wrapf("bridge withdraw: amount must be positive")
	}
	return &m, nil
}

// Invariant checks the bridge's books: the pending withdrawals sum to the
// outbound escrow, each pending one has a record not marked executed, and
// the deposit and withdrawal nonces are consistent.
func Invariant(kv store.KV) error {
	view := NewView(kv)
	sum := new(uint256.Int)
	for _, n := range view.Pending() {
		w, ok := view.Withdrawal(n)
		if !ok || w.Executed != 0 {
			return invariantErr("pending withdrawal %d has no open record", n)
		}
		if n > view.LastWithdrawal() {
			return invariantErr("pending withdrawal %d is above the last nonce %d", n, view.LastWithdrawal())
		}
		sum.Add(sum, w.Amount)
	}
	esc := NewKeeper(Context{KV: kv}).escrow
	if out := esc.BridgeOutbound(); !out.Eq(sum) {
		return invariantErr("pending withdrawals sum to %s, the outbound escrow holds %s", sum.Dec(), out.Dec())
	}
	return nil
}
