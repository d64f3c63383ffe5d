package session

import (
	"github.com/ogpu-network/ogpu/types"
)

// MsgRedeemVoucher pays a voucher to its lane's provider. Anyone may send
// it: the payee is inside the signed voucher.
type MsgRedeemVoucher struct {
	Voucher Voucher
	Sig     []byte
}

// Raw encodes the message.
func (m *MsgRedeemVoucher) Raw() types.RawMsg {
	return types.NewRawMsg(types.MsgTypeRedeemVoucher, m)
}

// DecodeMsgRedeemVoucher parses and checks a MsgRedeemVoucher payload.
func DecodeMsgRedeemVoucher(data []byte) (*MsgRedeemVoucher, error) {
	var m MsgRedeemVoucher
	if err := types.DecodeMsgPayload("redeem voucher", data, &m); err != nil {
		return nil, err
	}
	if m.Voucher.Cumulative == nil || m.Voucher.Cumulative.IsZero() {
		return nil, types.ErrInvalidMsg.Wrapf("redeem voucher: the cumulative amount must be positive")
	}
	if len(m.Sig) != 65 {
		return nil, types.ErrInvalidMsg.Wrapf("redeem voucher: the signature is %d bytes, want 65", len(m.Sig))
	}
	return &m, nil
}

// MsgCloseSession ends a session early (its client only).
type MsgCloseSession struct {
	Session uint64
}

// Raw encodes the message.
func (m *MsgCloseSession) Raw() types.RawMsg { return types.NewRawMsg(types.MsgTypeCloseSession, m) }

// DecodeMsgCloseSession parses a MsgCloseSession payload.
func DecodeMsgCloseSession(data []byte) (*MsgCloseSession, error) {
	var m MsgCloseSession
	if err := types.DecodeMsgPayload("close session", data, &m); err != nil {
		return nil, err
	}
	return &m, nil
}
