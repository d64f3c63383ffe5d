package node

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	rpcclient "github.com/cometbft/cometbft/rpc/client"
	rpchttp "github.com/cometbft/cometbft/rpc/client/http"
	ctypes "github.com/cometbft/cometbft/rpc/core/types"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/types"
)

// Client talks to a node over CometBFT RPC: queries the app, builds, signs
// and broadcasts transactions, and waits for their inclusion.
type Client struct {
	RPC rpcclient.Client
	// Addr is the node's RPC address, for error messages ("" in-process).
	Addr string
	// Also are other nodes every transaction the Sender sends is handed
	// to as well (fanout.go): it lands while RPC's node is cut off,
	// paused or restarting. Queries never go to them.
	Also []rpcclient.Client

	handMu sync.Mutex
	relays []chan struct{} // per Also node: closed when its last hand-off ends
}

// Dial connects to a node's RPC address, e.g. http://127.0.0.1:26657 or
// tcp://127.0.0.1:26657.
func Dial(addr string) (*Client, error) {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	c, err := rpchttp.New(addr)
	if err != nil {
		return nil, fmt.Errorf("cannot use node address %q: %w", addr, err)
	}
	return &Client{RPC: c, Addr: addr}, nil
}

// Unreachable wraps a transport error with the address and what to check.
func (c *Client) Unreachable(err error) error {
	if c.Addr == "" {
		return fmt.Errorf("cannot reach node: %w", err)
	}
	return fmt.Errorf("cannot reach node at %s (is `ogpud start` running there? set --node or OGPU_NODE): %w", c.Addr, err)
}

// QueryError is a query the app refused.
type QueryError struct {
	Code uint32
	Log  string
}

func (e *QueryError) Error() string { return fmt.Sprintf("query refused (code %d): %s", e.Code, e.Log) }

// Query runs an app query at height (0: latest).
func (c *Client) Query(ctx context.Context, path string, data []byte, height int64, prove bool) (*abci.QueryResponse, error) {
	res, err := c.RPC.ABCIQueryWithOptions(ctx, path, data, rpcclient.ABCIQueryOptions{Height: height, Prove: prove})
	if err != nil {
		return nil, c.Unreachable(err)
	}
	if res.Response.Code != 0 {
		return nil, &QueryError{Code: res.Response.Code, Log: res.Response.Log}
	}
	return &res.Response, nil
}

// QueryJSON runs an app query with data and decodes its JSON answer into
// out; it returns the height the answer is from.
func (c *Client) QueryJSON(ctx context.Context, path string, data []byte, out any) (int64, error) {
	res, err := c.Query(ctx, path, data, 0, false)
	if err != nil {
		return 0, err
	}
	if err := json.Unmarshal(res.Value, out); err != nil {
		return 0, fmt.Errorf("cannot decode the node's answer to %s: %w", path, err)
	}
	return res.Height, nil
}

func (c *Client) queryJSON(ctx context.Context, path string, out any) error {
	_, err := c.QueryJSON(ctx, path, nil, out)
	return err
}

// Account returns an account's balance and next nonce.
func (c *Client) Account(ctx context.Context, addr types.Address) (*chain.AccountView, error) {
	var v chain.AccountView
	return &v, c.queryJSON(ctx, chain.QueryAccount+addr.Hex(), &v)
}

// Params returns the chain's transaction parameters.
func (c *Client) Params(ctx context.Context) (*genesis.Params, error) {
	var p genesis.Params
	return &p, c.queryJSON(ctx, chain.QueryParams, &p)
}

// Beacon returns the randomness beacon's state.
func (c *Client) Beacon(ctx context.Context) (*chain.BeaconView, error) {
	var v chain.BeaconView
	return &v, c.queryJSON(ctx, chain.QueryBeacon, &v)
}

// Supply returns the supply breakdown.
func (c *Client) Supply(ctx context.Context) (*chain.SupplyView, error) {
	var v chain.SupplyView
	return &v, c.queryJSON(ctx, chain.QuerySupply, &v)
}

// ChainID asks the node which chain it runs.
func (c *Client) ChainID(ctx context.Context) (string, error) {
	st, err := c.RPC.Status(ctx)
	if err != nil {
		return "", c.Unreachable(err)
	}
	return st.NodeInfo.Network, nil
}

// BuildOptions are the optional fields of a transaction. Zero values mean:
// ask the node for the chain id and the nonce, pay the required fee.
type BuildOptions struct {
	ChainID string
	Nonce   *uint64
	Fee     *uint256.Int
	Memo    string
}

// SignTx builds a transaction of msgs from key's account and signs it.
func (c *Client) SignTx(ctx context.Context, key *ecdsa.PrivateKey, msgs []types.RawMsg, o BuildOptions) ([]byte, *types.Tx, error) {
	tx := &types.Tx{Body: types.TxBody{ChainID: o.ChainID, Msgs: msgs, Memo: o.Memo}}
	if err := tx.Sign(key); err != nil { // fills in From
		return nil, nil, err
	}
	if tx.Body.ChainID == "" {
		id, err := c.ChainID(ctx)
		if err != nil {
			return nil, nil, err
		}
		tx.Body.ChainID = id
	}
	if o.Nonce != nil {
		tx.Body.Nonce = *o.Nonce
	} else {
		acct, err := c.Account(ctx, tx.Body.From)
		if err != nil {
			return nil, nil, err
		}
		tx.Body.Nonce = acct.Nonce
	}
	if o.Fee != nil {
		tx.Body.Fee = o.Fee
	} else {
		params, err := c.Params(ctx)
		if err != nil {
			return nil, nil, err
		}
		tx.Body.Fee = RequiredFee(params, tx)
	}
	if err := tx.Sign(key); err != nil {
		return nil, nil, err
	}
	bz, err := tx.Encode()
	return bz, tx, err
}

// RequiredFee is the fee params charge for tx, computed on its largest
// encoding (the fee field at full width and a full signature) so that the
// signed transaction never needs more than it pays.
func RequiredFee(params *genesis.Params, tx *types.Tx) *uint256.Int {
	probe := *tx
	probe.Body.Fee = new(uint256.Int).SetAllOne()
	probe.Sig = make([]byte, 65)
	bz, err := probe.Encode()
	if err != nil {
		panic(err)
	}
	return params.RequiredFee(len(bz), chain.MsgWorks(tx.Body.Msgs))
}

// TxError is a transaction the node refused or that failed in its block.
type TxError struct {
	Hash   []byte
	Height int64
	Code   uint32
	Log    string
}

func (e *TxError) Error() string {
	if e.Height > 0 {
		return fmt.Sprintf("transaction %X failed in block %d (code %d): %s", e.Hash, e.Height, e.Code, e.Log)
	}
	return fmt.Sprintf("transaction refused (code %d): %s", e.Code, e.Log)
}

// Broadcast submits a signed transaction to the mempool; a refusal by
// CheckTx comes back as *TxError.
func (c *Client) Broadcast(ctx context.Context, bz []byte) ([]byte, error) {
	res, err := c.RPC.BroadcastTxSync(ctx, bz)
	if err != nil {
		return types.TxHash(bz), c.broadcastError(ctx, bz, err)
	}
	if res.Code != 0 {
		return res.Hash, &TxError{Hash: res.Hash, Code: res.Code, Log: res.Log}
	}
	return res.Hash, nil
}

var checkTxRefusal = regexp.MustCompile(`code=(\d+), data=.*, log='(.*)', codespace='`)

// broadcastError turns the RPC's refusal into a *TxError. The mempool
// remembers the transactions it has seen and refuses them again without
// asking the app; for those the nonce is looked up so the answer says why.
func (c *Client) broadcastError(ctx context.Context, bz []byte, err error) error {
	msg := err.Error()
	if code, log := refusal(nil, err); code != 0 {
		return &TxError{Code: code, Log: log}
	}
	if strings.Contains(msg, "tx already exists in cache") {
		tx, derr := types.DecodeTx(bz)
		if derr != nil {
			return &TxError{Code: types.ErrMalformedTx.Code, Log: derr.Error()}
		}
		acct, qerr := c.Account(ctx, tx.Body.From)
		if qerr != nil {
			return errors.Join(err, qerr)
		}
		if tx.Body.Nonce < acct.Nonce {
			return &TxError{Code: types.ErrNonceUsed.Code, Log: types.ErrNonceUsed.Wrapf(
				"nonce %d of %s was already used; the next nonce is %d (this transaction was already broadcast)",
				tx.Body.Nonce, tx.Body.From, acct.Nonce).Error()}
		}
		return &TxError{Code: types.ErrNonceUsed.Code, Log: fmt.Sprintf("transaction with nonce %d of %s is already in the mempool, waiting for a block", tx.Body.Nonce, tx.Body.From)}
	}
	return fmt.Errorf("cannot broadcast: %w", err)
}

// WaitTx polls until the transaction is in a block or ctx ends.
func (c *Client) WaitTx(ctx context.Context, hash []byte) (*ctypes.ResultTx, error) {
	return c.waitTx(ctx, hash, nil, 0, nil)
}

// waitTx is WaitTx; with bz (the transaction's bytes) it also broadcasts
// them again (to the node and the Also nodes) every every until a block
// includes them, for a node that lost its mempool (see Sender.Send), the
// first two times sooner (handOnSoon). The node takes the bytes again, or
// holds them already, or refuses them:
//
//   - for a used nonce: a block included them (the lookup finds them) or
//     another transaction of the sender took their nonce, and they can
//     never land. After two such refusals in a row and still no
//     inclusion, waitTx returns that refusal, so that the caller signs its
//     messages again instead of waiting for ctx to end;
//   - as ahead of the account's nonce: an earlier transaction of the
//     sender is missing. After two in a row waitTx calls fill (if set),
//     which closes the gap (Sender.fillGaps), and waits on;
//   - for the fee: the mempool is busy (it refuses ordinary transactions
//     it has no room for, at their fee); waitTx waits on;
//   - for anything else (the task's window ended, the funds are gone):
//     after two in a row with the same code and still no inclusion, the
//     bytes can never land, and waitTx returns that refusal.
func (c *Client) waitTx(ctx context.Context, hash, bz []byte, every time.Duration, fill func(context.Context) error) (*ctypes.ResultTx, error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	soon := 0 // rebroadcasts made of the first len(handOnSoon)
	next := func() time.Duration {
		if soon < len(handOnSoon) {
			soon++
			return min(handOnSoon[soon-1], every)
		}
		return every
	}
	again := time.Now().Add(next())
	var (
		last    uint32 // the code of the last rebroadcast's refusal; 0 taken
		lastLog string
		inARow  int // rebroadcasts in a row refused with code last
	)
	for {
		// Each lookup is bounded: a paused node (SIGSTOP) answers nothing,
		// and the rebroadcasts below must go on (to the other nodes too).
		qctx, cancel := context.WithTimeout(ctx, waitAttempt)
		res, err := c.RPC.Tx(qctx, hash, false)
		cancel()
		if err == nil {
			if res.TxResult.Code != 0 {
				return res, &TxError{Hash: hash, Height: res.Height, Code: res.TxResult.Code, Log: res.TxResult.Log}
			}
			return res, nil
		}
		if bz != nil && time.Now().After(again) {
			switch {
			case inARow >= 2 && last == types.ErrNonceUsed.Code:
				return nil, &TxError{Hash: hash, Code: last,
					Log: "no block included the transaction and its nonce is used by another transaction of the sender: send the messages again"}
			case inARow >= 2 && last == types.ErrNonceAhead.Code && fill != nil:
				if ferr := fill(ctx); ferr == nil {
					inARow = 0
				}
			case inARow >= 2 && last != types.ErrNonceAhead.Code && last != types.ErrFeeTooLow.Code:
				return nil, &TxError{Hash: hash, Code: last,
					Log: "no block included the transaction and the node now refuses it: " + lastLog}
			}
			again = time.Now().Add(next())
			c.handOn(bz)
			bctx, cancel := context.WithTimeout(ctx, waitAttempt)
			code, log := refusal(c.RPC.BroadcastTxSync(bctx, bz))
			cancel()
			switch {
			case code == 0:
				inARow = 0
			case code == last:
				inARow++
			default:
				last, inARow = code, 1
			}
			last, lastLog = code, log
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("transaction %X not included yet: %w", hash, ctx.Err())
		case <-tick.C:
		}
	}
}

// handOnSoon are the delays of waitTx's first rebroadcasts, before it
// settles on one every rebroadcastEvery. A transaction that is valid from
// the block its sender's node has just committed (a bid reveal sent once
// the bid window's last block is in) is refused by a node that has not
// committed that block yet, and its peers gossip each transaction to it
// once: the soak's job 53 lost both reveals that way, the validators
// other than the bidders' node proposing the window's blocks empty. Handed
// the same bytes again half a second and a second and a half later, that
// node takes them (and gossips them on).
var handOnSoon = []time.Duration{500 * time.Millisecond, time.Second}

// waitAttempt bounds each lookup and rebroadcast of waitTx.
const waitAttempt = 3 * time.Second

// refusal is the mempool's refusal of a broadcast: its code and log, or 0
// if the node took the transaction, holds it already ("already in the
// cache"), or did not answer (a transport error says nothing of the
// transaction).
func refusal(r *ctypes.ResultBroadcastTx, err error) (uint32, string) {
	if err != nil {
		m := checkTxRefusal.FindStringSubmatch(err.Error())
		if m == nil {
			return 0, ""
		}
		code, _ := strconv.ParseUint(m[1], 10, 32)
		return uint32(code), m[2]
	}
	if r == nil {
		return 0, ""
	}
	return r.Code, r.Log
}

// BroadcastAndWait broadcasts and waits for inclusion.
func (c *Client) BroadcastAndWait(ctx context.Context, bz []byte) (*ctypes.ResultTx, error) {
	hash, err := c.Broadcast(ctx, bz)
	if err != nil {
		return nil, err
	}
	return c.WaitTx(ctx, hash)
}

// WaitHeight waits until the node has committed height h.
func (c *Client) WaitHeight(ctx context.Context, h int64) error {
	for {
		if got, err := c.CommittedHeight(ctx); err == nil && got >= h {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("height %d not reached", h), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// CommittedHeight is the height the application last committed, whose
// results are stored: the node's latest block height (Status) can be one
// ahead of it while the block executes, and BlockResults at that height
// fails until it is done. Read results only up to this height.
func (c *Client) CommittedHeight(ctx context.Context) (int64, error) {
	info, err := c.RPC.ABCIInfo(ctx)
	if err != nil {
		return 0, err
	}
	return info.Response.LastBlockHeight, nil
}

// Bridge returns the bridge's state (/bridge).
func (c *Client) Bridge(ctx context.Context) (*chain.BridgeView, error) {
	var v chain.BridgeView
	return &v, c.queryJSON(ctx, chain.QueryBridge, &v)
}

// BridgeWithdrawal returns withdrawal n with its signatures.
func (c *Client) BridgeWithdrawal(ctx context.Context, n uint64) (*chain.WithdrawalView, error) {
	var v chain.WithdrawalView
	return &v, c.queryJSON(ctx, chain.QueryBridgeWithdrawal+strconv.FormatUint(n, 10), &v)
}

// BridgePending lists the withdrawals not yet paid on Ethereum.
func (c *Client) BridgePending(ctx context.Context) ([]chain.WithdrawalView, error) {
	var v []chain.WithdrawalView
	return v, c.queryJSON(ctx, chain.QueryBridgePending, &v)
}

// BridgeValset returns valset n with the signatures adopting it.
func (c *Client) BridgeValset(ctx context.Context, n uint64) (*chain.ValsetView, error) {
	var v chain.ValsetView
	return &v, c.queryJSON(ctx, chain.QueryBridgeValset+strconv.FormatUint(n, 10), &v)
}
