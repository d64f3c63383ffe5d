package ethbridge

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/ogpu-network/ogpu/contracts"
)

// Client is the part of Ethereum's JSON-RPC API this package uses: reading
// contract state and logs at a given block, headers (latest and
// finalized), gas estimation and sending transactions, receipts, and the
// chain id. *ethclient.Client and the simulated backend's client
// (ethclient/simulated) both satisfy it.
type Client interface {
	bind.ContractBackend
	bind.DeployBackend
	ChainID(ctx context.Context) (*big.Int, error)
}

var _ Client = (*ethclient.Client)(nil)

// The bindings are stateless once parsed; one copy serves every watcher and
// relayer.
var (
	bridgeABI = contracts.NewOGPUBridge()
	tokenABI  = contracts.NewOGPUToken()
)

// Defaults of the options.
const (
	// DefaultGasMargin is added to a transaction's gas estimate. The
	// estimate of a withdrawal can fall ~7k short of what the mined block
	// uses (the outflow bucket depends on the block's timestamp), and only
	// the gas actually used is paid, so the margin is generous.
	DefaultGasMargin = 50_000
	// DefaultPollInterval is how often a receipt is polled while waiting.
	DefaultPollInterval = time.Second
)

// ContractError is a call that the contract (or the token, through it)
// refuses, decoded into words. Tx is zero when the call was refused at gas
// estimation and nothing was sent; otherwise the transaction was mined and
// reverted (its gas is spent), and Reason is what replaying it at its block
// gives.
type ContractError struct {
	// Method is the contract function called ("withdraw", "deposit", ...).
	Method string
	// Reason is the decoded custom error, a pointer to one of the bindings'
	// error structs (e.g. *contracts.OGPUBridgeIsPaused), or nil when the
	// revert data was not a known custom error.
	Reason any
	// Tx is the reverted transaction, zero when nothing was sent.
	Tx common.Hash
	// Detail is the node's message when Reason is nil.
	Detail string
}

// Error says what the contract refused and why, in words.
func (e *ContractError) Error() string {
	why := e.Detail
	if e.Reason != nil {
		why = describeReason(e.Reason)
	}
	if e.Tx == (common.Hash{}) {
		return fmt.Sprintf("%s refused by the contract (nothing sent): %s", e.Method, why)
	}
	return fmt.Sprintf("%s transaction %s reverted: %s", e.Method, e.Tx, why)
}

// describeReason turns the bindings' custom errors into sentences.
func describeReason(r any) string {
	switch v := r.(type) {
	case *contracts.OGPUBridgeAlreadyExecuted:
		return fmt.Sprintf("withdrawal %d was already executed", v.Nonce)
	case *contracts.OGPUBridgeInsufficientPower:
		return fmt.Sprintf("the valid signatures hold %s of %s power; strictly more than 2/3 is needed", v.Signed, v.Total)
	case *contracts.OGPUBridgeInvalidSignature:
		return fmt.Sprintf("signature %d does not recover to validator %d (forged, for another digest, or high-s)", v.Index, v.Index)
	case *contracts.OGPUBridgeInvalidV:
		return fmt.Sprintf("signature %d has v = %d (want 27 or 28)", v.Index, v.V)
	case *contracts.OGPUBridgeInvalidValidator:
		return fmt.Sprintf("validator %d of the new set is zero, out of order or duplicated, or has zero power", v.Index)
	case *contracts.OGPUBridgeMalformedValset:
		return "the validator set is empty or its validators and powers differ in length"
	case *contracts.OGPUBridgeWrongCheckpoint:
		return fmt.Sprintf("the validator set given (checkpoint %x) is not the contract's current set (checkpoint %x): fetch the current set with CurrentValset", v.Given, v.Stored)
	case *contracts.OGPUBridgeWrongValsetNonce:
		return fmt.Sprintf("the new set has nonce %d, the contract wants %d", v.Given, v.Want)
	case *contracts.OGPUBridgeSignatureCount:
		return fmt.Sprintf("%s signatures for a set of %s validators", v.Given, v.Want)
	case *contracts.OGPUBridgeIsPaused:
		return "the bridge is paused by its guardian; deposits and withdrawals wait for a validator-signed unpause"
	case *contracts.OGPUBridgeNotPaused:
		return "the bridge is not paused"
	case *contracts.OGPUBridgeNotGuardian:
		return fmt.Sprintf("%s is not the guardian", v.Caller)
	case *contracts.OGPUBridgeWrongUnpauseNonce:
		return fmt.Sprintf("unpause nonce %d, the contract wants %d", v.Given, v.Want)
	case *contracts.OGPUBridgeNotQueued:
		return fmt.Sprintf("withdrawal %d is not queued (never queued, or already paid)", v.Nonce)
	case *contracts.OGPUBridgeNotReady:
		return fmt.Sprintf("nonce %d is not ready: it can be executed or applied from %s (unix %d) on", v.Nonce, time.Unix(int64(v.ReadyAt), 0).UTC().Format(time.RFC3339), v.ReadyAt)
	case *contracts.OGPUBridgeNotQueuedValset:
		return fmt.Sprintf("the set with checkpoint %x is not the queued valset update", v.Checkpoint)
	case *contracts.OGPUBridgeZeroAddress:
		return "zero address (recipient, token or guardian)"
	case *contracts.OGPUBridgeZeroAmount:
		return "zero amount (or nothing arrived at the bridge)"
	case *contracts.OGPUBridgeBadLimits:
		return "outflow cap, large-withdrawal threshold and delays must all be non-zero"
	case *contracts.OGPUBridgeSafeERC20FailedOperation:
		return fmt.Sprintf("token %s refused the transfer", v.Token)
	case *contracts.OGPUTokenERC20InsufficientBalance:
		return fmt.Sprintf("%s holds %s oGPU units, %s needed", v.Sender, v.Balance, v.Needed)
	case *contracts.OGPUTokenOwnableUnauthorizedAccount:
		return fmt.Sprintf("%s is not the token's owner", v.Account)
	case *contracts.OGPUTokenERC20InsufficientAllowance:
		return fmt.Sprintf("%s may spend %s oGPU units, %s needed: approve the bridge first", v.Spender, v.Allowance, v.Needed)
	}
	return fmt.Sprintf("%T %+v", r, r)
}

// revertData extracts the revert bytes a node attaches to a failed call or
// estimate (an rpc.DataError with hex data).
func revertData(err error) []byte {
	var de rpc.DataError
	if !errors.As(err, &de) {
		return nil
	}
	s, ok := de.ErrorData().(string)
	if !ok {
		return nil
	}
	raw, derr := hexutil.Decode(s)
	if derr != nil {
		return nil
	}
	return raw
}

// decodeRevert decodes revert data as a bridge or token custom error.
func decodeRevert(raw []byte) any {
	if len(raw) < 4 {
		return nil
	}
	if v, err := bridgeABI.UnpackError(raw); err == nil {
		return v
	}
	if v, err := tokenABI.UnpackError(raw); err == nil {
		return v
	}
	if r, err := abi.UnpackRevert(raw); err == nil {
		return &revertString{r}
	}
	return nil
}

// revertString is a plain require(..., "message") revert.
type revertString struct{ Msg string }

// contractError turns an estimation or call failure into a *ContractError
// when it carries revert data, and returns other errors (transport, funds)
// wrapped with the method name.
func contractError(method string, tx common.Hash, err error) error {
	raw := revertData(err)
	if raw == nil {
		if tx != (common.Hash{}) {
			return &ContractError{Method: method, Tx: tx, Detail: err.Error()}
		}
		return fmt.Errorf("%s: %w", method, err)
	}
	r := decodeRevert(raw)
	if rs, ok := r.(*revertString); ok {
		return &ContractError{Method: method, Tx: tx, Detail: rs.Msg}
	}
	return &ContractError{Method: method, Tx: tx, Reason: r, Detail: err.Error()}
}

// sender sends transactions with a gas limit of estimate + margin and waits
// for their receipts.
type sender struct {
	c       Client
	chainID *big.Int
	margin  uint64
	poll    time.Duration
}

func newSender(ctx context.Context, c Client, margin uint64, poll time.Duration) (*sender, error) {
	id, err := c.ChainID(ctx)
	if err != nil {
		return nil, fmt.Errorf("cannot read the Ethereum chain id: %w", err)
	}
	if margin == 0 {
		margin = DefaultGasMargin
	}
	if poll <= 0 {
		poll = DefaultPollInterval
	}
	return &sender{c: c, chainID: id, margin: margin, poll: poll}, nil
}

// send estimates, signs and sends a call of method (to == nil: a contract
// creation with data as init code), waits for its receipt and returns it.
// A revert at estimation sends nothing; a mined revert is replayed at its
// block for the reason. Both come back as *ContractError.
func (s *sender) send(ctx context.Context, key *ecdsa.PrivateKey, to *common.Address, method string, data []byte) (*types.Receipt, error) {
	if key == nil {
		return nil, fmt.Errorf("%s: no sender key", method)
	}
	from := crypto.PubkeyToAddress(key.PublicKey)
	msg := ethereum.CallMsg{From: from, To: to, Data: data}
	gas, err := s.c.EstimateGas(ctx, msg)
	if err != nil {
		return nil, contractError(method, common.Hash{}, err)
	}
	opts := bind.NewKeyedTransactor(key, s.chainID)
	opts.Context = ctx
	opts.GasLimit = gas + s.margin
	var tx *types.Transaction
	if to == nil {
		_, tx, err = bind.DeployContract(opts, data, s.c, nil)
	} else {
		tx, err = bind.Transact(bind.NewBoundContract(*to, abi.ABI{}, s.c, s.c, s.c), opts, data)
	}
	if err != nil {
		return nil, contractError(method, common.Hash{}, err)
	}
	r, err := s.wait(ctx, tx.Hash())
	if err != nil {
		return nil, fmt.Errorf("%s: sent %s but: %w", method, tx.Hash(), err)
	}
	if r.Status != types.ReceiptStatusSuccessful {
		// Replay at the block it was mined in: the state after that block
		// usually shows why (someone executed it first, a pause landed).
		_, cerr := s.c.CallContract(ctx, msg, r.BlockNumber)
		if cerr == nil {
			return r, &ContractError{Method: method, Tx: tx.Hash(),
				Detail: fmt.Sprintf("it used %d of %d gas and replaying it at block %s succeeds (out of gas?)", r.GasUsed, tx.Gas(), r.BlockNumber)}
		}
		return r, contractError(method, tx.Hash(), cerr)
	}
	return r, nil
}

// wait polls for tx's receipt until it is mined or ctx ends.
func (s *sender) wait(ctx context.Context, tx common.Hash) (*types.Receipt, error) {
	t := time.NewTicker(s.poll)
	defer t.Stop()
	for {
		r, err := s.c.TransactionReceipt(ctx, tx)
		if err == nil {
			return r, nil
		}
		if !errors.Is(err, ethereum.NotFound) {
			return nil, fmt.Errorf("cannot read the receipt: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("not mined yet: %w", ctx.Err())
		case <-t.C:
		}
	}
}
