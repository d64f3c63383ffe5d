// Package genesis is the chain's initial state: parameters, account
// allocations and validators, as the app_state of CometBFT's genesis.json.
// Default() gives a valid document, Validate() is pure, and a document
// exported from a running chain starts a new chain with the same app hash.
package genesis

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/types"
)

// Params are the consensus parameters of transaction admission.
type Params struct {
	// MinGasPrice is the fee in base units charged per unit of gas.
	MinGasPrice *uint256.Int `json:"min_gas_price"`
	// TxBaseGas is charged once per transaction.
	TxBaseGas uint64 `json:"tx_base_gas"`
	// TxByteGas is charged per byte of the encoded transaction.
	TxByteGas uint64 `json:"tx_byte_gas"`
	// MsgGas is charged per message.
	MsgGas uint64 `json:"msg_gas"`
	// MaxTxBytes bounds the encoded size of a transaction.
	MaxTxBytes uint64 `json:"max_tx_bytes"`
	// MaxMsgs bounds the number of messages in a transaction.
	MaxMsgs uint64 `json:"max_msgs"`
}

// DefaultParams: a transfer costs about 33,000 gas, 0.000033 oGPU at 1 gwei.
func DefaultParams() Params {
	return Params{
		MinGasPrice: uint256.NewInt(1_000_000_000),
		TxBaseGas:   21_000,
		TxByteGas:   16,
		MsgGas:      9_000,
		MaxTxBytes:  64 << 10,
		MaxMsgs:     32,
	}
}

// Validate reports the first parameter out of range.
func (p Params) Validate() error {
	switch {
	case p.MinGasPrice == nil:
		return fmt.Errorf("params.min_gas_price is missing")
	case p.MaxTxBytes < 256 || p.MaxTxBytes > 4<<20:
		return fmt.Errorf("params.max_tx_bytes = %d: want 256..4194304", p.MaxTxBytes)
	case p.MaxMsgs == 0 || p.MaxMsgs > 1024:
		return fmt.Errorf("params.max_msgs = %d: want 1..1024", p.MaxMsgs)
	}
	// Gas is computed in uint64 and reported to CometBFT as an int64, so the
	// gas of the largest transaction must fit in an int64 without wrapping
	// (a wrapped gas would make a large transaction cheap). runTx computes
	// gas before it refuses too many messages, so a message count is bounded
	// only by the size: one per byte at most.
	if hi, lo := bits.Mul64(p.MaxTxBytes, p.TxByteGas); hi != 0 || lo > math.MaxInt64 {
		return fmt.Errorf("params.tx_byte_gas = %d: the gas of a %d-byte transaction overflows", p.TxByteGas, p.MaxTxBytes)
	}
	if hi, lo := bits.Mul64(p.MaxTxBytes, p.MsgGas); hi != 0 || lo > math.MaxInt64 {
		return fmt.Errorf("params.msg_gas = %d: the gas of %d messages overflows", p.MsgGas, p.MaxTxBytes)
	}
	if total, carry := bits.Add64(p.TxBaseGas, p.MaxTxBytes*p.TxByteGas+p.MaxTxBytes*p.MsgGas, 0); carry != 0 || total > math.MaxInt64 {
		return fmt.Errorf("params.tx_base_gas = %d: the gas of the largest transaction overflows", p.TxBaseGas)
	}
	// The largest fee must fit in 256 bits: gas < 2^63, price < 2^192.
	if p.MinGasPrice.BitLen() > 192 {
		return fmt.Errorf("params.min_gas_price is absurdly large")
	}
	return nil
}

// Gas is the gas a transaction of size bytes with n messages uses.
func (p Params) Gas(size, n int) uint64 {
	return p.TxBaseGas + uint64(size)*p.TxByteGas + uint64(n)*p.MsgGas
}

// RequiredFee is Gas(size, n) * MinGasPrice.
func (p Params) RequiredFee(size, n int) *uint256.Int {
	return new(uint256.Int).Mul(uint256.NewInt(p.Gas(size, n)), p.MinGasPrice)
}

// Account is an allocation: a balance and, for exported chains, the nonce.
type Account struct {
	Address types.Address `json:"address"`
	Balance *uint256.Int  `json:"balance"`
	Nonce   uint64        `json:"nonce,omitempty"`
}

// Validator is a genesis validator: its CometBFT ed25519 consensus key and
// voting power.
type Validator struct {
	Name   string `json:"name"`
	PubKey []byte `json:"pub_key"`
	Power  int64  `json:"power"`
}

// Doc is the app_state of genesis.json. The bridge reserve is what the cap
// leaves after balances, fee pool and burned tokens: the oGPU that exists on
// the Ethereum side.
type Doc struct {
	Params     Params       `json:"params"`
	Accounts   []Account    `json:"accounts"`
	Validators []Validator  `json:"validators"`
	FeePool    *uint256.Int `json:"fee_pool"`
	Burned     *uint256.Int `json:"burned"`
}

// Default returns a valid document with no accounts: the whole supply is in
// the bridge reserve.
func Default() *Doc {
	return &Doc{
		Params:     DefaultParams(),
		Accounts:   []Account{},
		Validators: []Validator{},
		FeePool:    new(uint256.Int),
		Burned:     new(uint256.Int),
	}
}

// Validate checks the document without touching anything else.
func (d *Doc) Validate() error {
	if err := d.Params.Validate(); err != nil {
		return err
	}
	if d.FeePool == nil || d.Burned == nil {
		return fmt.Errorf("fee_pool and burned must be set (use \"0\")")
	}
	if _, err := d.BridgeReserve(); err != nil {
		return err
	}
	for i, a := range d.Accounts {
		if a.Balance == nil {
			return fmt.Errorf("accounts[%d] (%s): balance is missing", i, a.Address)
		}
		if a.Address == (types.Address{}) {
			return fmt.Errorf("accounts[%d]: the zero address cannot hold oGPU", i)
		}
		if i > 0 && bytes.Compare(d.Accounts[i-1].Address[:], a.Address[:]) >= 0 {
			return fmt.Errorf("accounts[%d] (%s): accounts must be sorted by address without duplicates", i, a.Address)
		}
	}
	for i, v := range d.Validators {
		if len(v.PubKey) != ed25519.PublicKeySize {
			return fmt.Errorf("validators[%d] (%s): pub_key is %d bytes, want an ed25519 key of %d", i, v.Name, len(v.PubKey), ed25519.PublicKeySize)
		}
		if v.Power <= 0 {
			return fmt.Errorf("validators[%d] (%s): power must be positive", i, v.Name)
		}
		for _, w := range d.Validators[:i] {
			if bytes.Equal(w.PubKey, v.PubKey) {
				return fmt.Errorf("validators[%d] (%s): duplicate pub_key", i, v.Name)
			}
		}
	}
	return nil
}

// BridgeReserve is MaxSupply minus balances, fee pool and burned tokens; an
// error if they exceed the cap.
func (d *Doc) BridgeReserve() (*uint256.Int, error) {
	total := new(uint256.Int)
	parts := []*uint256.Int{d.FeePool, d.Burned}
	for _, a := range d.Accounts {
		parts = append(parts, a.Balance)
	}
	for _, p := range parts {
		if p == nil {
			continue
		}
		if _, overflow := total.AddOverflow(total, p); overflow {
			return nil, fmt.Errorf("allocations overflow")
		}
	}
	if total.Gt(types.MaxSupply) {
		return nil, fmt.Errorf("allocations total %s, more than the cap of %s", types.FormatAmount(total), types.FormatAmount(types.MaxSupply))
	}
	return new(uint256.Int).Sub(types.MaxSupply, total), nil
}

// AddAccount adds amt to addr's allocation (creating it) and keeps accounts
// sorted. It fails if the total would pass the cap.
func (d *Doc) AddAccount(addr types.Address, amt *uint256.Int) error {
	// Check before changing anything: a refused addition leaves d as it was.
	reserve, err := d.BridgeReserve()
	if err != nil {
		return err
	}
	if amt.Gt(reserve) {
		return fmt.Errorf("cannot add %s to %s: only %s is left under the cap of %s", types.FormatAmount(amt), addr, types.FormatAmount(reserve), types.FormatAmount(types.MaxSupply))
	}
	i, found := slices.BinarySearchFunc(d.Accounts, addr, func(a Account, t types.Address) int {
		return bytes.Compare(a.Address[:], t[:])
	})
	if found {
		// No overflow: the sum is within the cap checked above.
		d.Accounts[i].Balance = new(uint256.Int).Add(d.Accounts[i].Balance, amt)
	} else {
		d.Accounts = slices.Insert(d.Accounts, i, Account{Address: addr, Balance: amt.Clone()})
	}
	return nil
}

// Sort puts accounts in address order, as Validate requires.
func (d *Doc) Sort() {
	slices.SortFunc(d.Accounts, func(a, b Account) int { return bytes.Compare(a.Address[:], b.Address[:]) })
}

// Parse reads and validates an app_state.
func Parse(bz []byte) (*Doc, error) {
	d := Default()
	dec := json.NewDecoder(bytes.NewReader(bz))
	dec.DisallowUnknownFields()
	if err := dec.Decode(d); err != nil {
		return nil, fmt.Errorf("cannot parse genesis app_state: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("cannot parse genesis app_state: data after the JSON object")
	}
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("invalid genesis app_state: %w", err)
	}
	return d, nil
}

// Marshal writes the document as indented JSON.
func (d *Doc) Marshal() ([]byte, error) {
	return json.MarshalIndent(d, "", "  ")
}
