// Package types holds the wire types shared by the chain, the state machines
// and the clients: addresses, amounts, transactions, messages and the error
// codes a transaction can be refused with.
package types

import (
	"errors"
	"fmt"
)

// Codespace names the registry of error codes below in ABCI responses.
const Codespace = "ogpu"

// Error is a refusal with a stable ABCI code. Codes are literals, append-only,
// and never reused or renumbered: clients and block explorers depend on them.
type Error struct {
	Code uint32
	Desc string
}

func (e *Error) Error() string { return e.Desc }

// Wrapf returns an error that says what went wrong in this case and still
// matches e under errors.Is.
func (e *Error) Wrapf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", e, fmt.Sprintf(format, args...))
}

// Consensus rules: a transaction breaking one of these is invalid on every
// node, in CheckTx and in FinalizeBlock alike.
var (
	ErrMalformedTx       = &Error{1, "malformed transaction"}
	ErrTxTooLarge        = &Error{2, "transaction too large"}
	ErrWrongChainID      = &Error{3, "wrong chain id"}
	ErrBadSignature      = &Error{4, "bad signature"}
	ErrNonceUsed         = &Error{5, "nonce already used"}
	ErrNonceAhead        = &Error{6, "nonce ahead of account"}
	ErrFeeTooLow         = &Error{7, "fee too low"}
	ErrInsufficientFunds = &Error{8, "insufficient funds"}
	ErrUnknownMsg        = &Error{9, "unknown message type"}
	ErrInvalidMsg        = &Error{10, "invalid message"}
	ErrTooManyMsgs       = &Error{11, "too many messages"}
	ErrNoMsgs            = &Error{12, "transaction has no messages"}

	// Market, staking and verification refusals.
	ErrUnknownJob        = &Error{20, "unknown job"}
	ErrWrongPhase        = &Error{21, "not allowed in the job's current phase"}
	ErrNotEligible       = &Error{22, "provider not eligible"}
	ErrUnauthorized      = &Error{23, "sender not allowed to do this"}
	ErrDuplicate         = &Error{24, "already done"}
	ErrCommitMismatch    = &Error{25, "reveal does not match the commitment"}
	ErrJailed            = &Error{26, "jailed"}
	ErrUnknownProvider   = &Error{27, "unknown provider"}
	ErrUnknownValidator  = &Error{28, "unknown validator"}
	ErrInsufficientStake = &Error{29, "insufficient stake"}
)

// Query errors: never part of consensus.
var (
	ErrUnknownQuery = &Error{100, "unknown query path"}
	ErrBadQuery     = &Error{101, "bad query"}
	ErrNotFound     = &Error{102, "not found"}
)

// ErrInternal marks a failure that is not the sender's fault (a store error).
var ErrInternal = &Error{999, "internal error"}

// CodeOf returns the ABCI code of err: 0 for nil, the registered code for an
// *Error anywhere in the chain, ErrInternal's code otherwise.
func CodeOf(err error) uint32 {
	if err == nil {
		return 0
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ErrInternal.Code
}
