package bridge

import (
	"bytes"
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/rlp"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/types"
)

// Deposit is one Deposited event of the contract: the tuple validators
// attest. Nonces are the contract's gap-free deposit nonces (1, 2, ...);
// Amount is what the contract received (its balance difference).
type Deposit struct {
	Nonce     uint64         `json:"nonce"`
	From      common.Address `json:"from"`      // the Ethereum sender
	Recipient types.Address  `json:"recipient"` // the app-chain account credited
	Amount    *uint256.Int   `json:"amount"`
}

// Equal reports whether d and o are the identical tuple.
func (d Deposit) Equal(o Deposit) bool {
	return d.Nonce == o.Nonce && d.From == o.From && d.Recipient == o.Recipient &&
		d.Amount != nil && o.Amount != nil && d.Amount.Eq(o.Amount)
}

// Executed is one Withdrawn event of the contract: withdrawal Nonce paid To
// Amount on Ethereum.
type Executed struct {
	Nonce  uint64         `json:"nonce"`
	To     common.Address `json:"to"`
	Amount *uint256.Int   `json:"amount"`
}

// NonceSig is a validator's bridge-key signature over the digest of item
// Nonce (a withdrawal, or a valset checkpoint).
type NonceSig struct {
	Nonce uint64
	Sig   Sig
}

// Member is one signer of a validator set: a validator's bridge address and
// its power normalized to uint32.
type Member struct {
	Addr  common.Address `json:"addr"`
	Power uint32         `json:"power"`
}

// Valset is a validator set as the contract holds it: members sorted by
// address, unique, non-zero powers, and a nonce that goes up by one per
// update.
type Valset struct {
	Nonce   uint64   `json:"nonce"`
	Members []Member `json:"members"`
}

// Columns returns the set as the contract's two arrays.
func (vs *Valset) Columns() ([]common.Address, []uint32) {
	addrs := make([]common.Address, len(vs.Members))
	powers := make([]uint32, len(vs.Members))
	for i, m := range vs.Members {
		addrs[i], powers[i] = m.Addr, m.Power
	}
	return addrs, powers
}

// Total is the sum of the members' powers.
func (vs *Valset) Total() uint64 {
	var t uint64
	for _, m := range vs.Members {
		t += uint64(m.Power)
	}
	return t
}

// Power returns addr's power in the set (0 if absent).
func (vs *Valset) Power(addr common.Address) uint64 {
	for _, m := range vs.Members {
		if m.Addr == addr {
			return uint64(m.Power)
		}
	}
	return 0
}

// Validate checks what the contract checks of a set.
func (vs *Valset) Validate() error {
	if len(vs.Members) == 0 {
		return fmt.Errorf("empty validator set")
	}
	for i, m := range vs.Members {
		if m.Power == 0 {
			return fmt.Errorf("member %d (%s) has zero power", i, m.Addr)
		}
		if m.Addr == (common.Address{}) || (i > 0 && bytes.Compare(vs.Members[i-1].Addr[:], m.Addr[:]) >= 0) {
			return fmt.Errorf("member %d (%s): members must be non-zero, sorted and unique", i, m.Addr)
		}
	}
	return nil
}

// Limits on one vote extension: what a validator may report or sign in one
// height. They bound the work FinalizeBlock does for the injected commit:
// at most MaxSigs secp256k1 recoveries per validator per block.
const (
	MaxDeposits       = 16
	MaxExecuted       = 16
	MaxSigs           = 16
	MaxExtensionBytes = 8 << 10
)

// Extension is what a validator puts in its precommit's vote extension: its
// Ethereum node's view and its bridge-key signatures. Everything in it is
// checked again by every node when the next block carries it.
type Extension struct {
	// Deposits the validator's Ethereum node shows in finalized blocks,
	// from the chain's next deposit nonce on, consecutive.
	Deposits []Deposit
	// Executed withdrawals (Withdrawn events in finalized blocks) that the
	// chain still counts in the outbound escrow.
	Executed []Executed
	// Withdrawals: signatures over WithdrawDigest of pending withdrawals.
	Withdrawals []NonceSig
	// Valsets: signatures over Checkpoint of the valset with this nonce,
	// by a member of the set before it.
	Valsets []NonceSig
}

// extensionVersion is the first byte of an encoded extension.
const extensionVersion = 1

// Empty reports whether e carries nothing.
func (e *Extension) Empty() bool {
	return len(e.Deposits) == 0 && len(e.Executed) == 0 && len(e.Withdrawals) == 0 && len(e.Valsets) == 0
}

// Encode is the extension's wire form: a version byte and its RLP. An empty
// extension encodes as no bytes.
func (e *Extension) Encode() []byte {
	if e.Empty() {
		return nil
	}
	bz, err := rlp.EncodeToBytes(e)
	if err != nil {
		panic(err) // every field encodes
	}
	return append([]byte{extensionVersion}, bz...)
}

// DecodeExtension parses and bounds an extension. No bytes is the empty
// extension (a validator whose Ethereum node is down sends that).
func DecodeExtension(bz []byte) (*Extension, error) {
	e := &Extension{}
	if len(bz) == 0 {
		return e, nil
	}
	if len(bz) > MaxExtensionBytes {
		return nil, fmt.Errorf("vote extension is %d bytes, at most %d", len(bz), MaxExtensionBytes)
	}
	if bz[0] != extensionVersion {
		return nil, fmt.Errorf("vote extension version %d, want %d", bz[0], extensionVersion)
	}
	if err := rlp.DecodeBytes(bz[1:], e); err != nil {
		return nil, fmt.Errorf("vote extension: %w", err)
	}
	if len(e.Deposits) > MaxDeposits || len(e.Executed) > MaxExecuted || len(e.Withdrawals) > MaxSigs || len(e.Valsets) > MaxSigs {
		return nil, fmt.Errorf("vote extension carries too many items (at most %d deposits, %d executed, %d signatures of each kind)", MaxDeposits, MaxExecuted, MaxSigs)
	}
	for i, d := range e.Deposits {
		if d.Amount == nil || d.Amount.IsZero() {
			return nil, fmt.Errorf("vote extension: deposit %d has no amount", d.Nonce)
		}
		if i > 0 && d.Nonce != e.Deposits[i-1].Nonce+1 {
			return nil, fmt.Errorf("vote extension: deposits must be consecutive nonces")
		}
	}
	for i, x := range e.Executed {
		if x.Amount == nil || (i > 0 && x.Nonce <= e.Executed[i-1].Nonce) {
			return nil, fmt.Errorf("vote extension: executed withdrawals must be in increasing nonce order with amounts")
		}
	}
	for _, list := range [][]NonceSig{e.Withdrawals, e.Valsets} {
		for i := 1; i < len(list); i++ {
			if list[i].Nonce <= list[i-1].Nonce {
				return nil, fmt.Errorf("vote extension: signatures must be in increasing nonce order")
			}
		}
	}
	return e, nil
}

// Observation is what a validator's Ethereum watcher reads from its own
// node, all at the node's finalized block: the input of its extension.
type Observation struct {
	// Finalized is the block the observation was read at.
	Finalized uint64
	// Locked is the token balance of the bridge contract at Finalized.
	Locked *uint256.Int
	// Deposits from the asked-for nonce on, consecutive.
	Deposits []Deposit
	// Executed withdrawals among those asked about.
	Executed []Executed
	// ValsetNonce is the contract's valsetNonce at Finalized.
	ValsetNonce uint64
}
