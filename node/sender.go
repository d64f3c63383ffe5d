package node

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"strings"
	"time"

	ctypes "github.com/cometbft/cometbft/rpc/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/types"
)

// Sender sends transactions from one account with nonces it keeps itself,
// so that a long-running agent can have several transactions in the mempool
// at once without asking the node for the nonce each time. It is safe for
// concurrent use: broadcasts are serialized, in nonce order.
//
// The next nonce, the chain id and the parameters are read from the node
// on first use. A refusal for the nonce (another client used the same key)
// re-reads the account and retries once; a refusal for the fee re-reads the
// parameters and retries once; any other refusal leaves the nonce unused.
type Sender struct {
	c    *Client
	key  *ecdsa.PrivateKey
	addr types.Address

	lock    chan struct{} // held while signing and broadcasting; guards below
	chainID string
	params  *genesis.Params
	next    uint64
	synced  bool // next was read from the account (or advanced from it)

	// RebroadcastEvery is how often Send (and Pending.Wait) hands the node
	// a transaction no block has included yet again; 0 means 3 s. Set it
	// before the first use.
	RebroadcastEvery time.Duration
}

// NewSender returns a sender for key's account through c.
func NewSender(c *Client, key *ecdsa.PrivateKey) *Sender {
	s := &Sender{c: c, key: key, lock: make(chan struct{}, 1)}
	if key != nil {
		s.addr = crypto.PubkeyToAddress(key.PublicKey)
	}
	return s
}

// Address is the sending account.
func (s *Sender) Address() types.Address { return s.addr }

// Send signs msgs into one transaction, broadcasts it and waits for its
// inclusion. While it waits it broadcasts the same bytes again every
// rebroadcastEvery: a node restarted (kill -9) after its mempool took the
// transaction, and before a block did, has forgotten it, and would
// otherwise keep the sender waiting until ctx ends while the transaction's
// deadline passes. The identical bytes cannot be included twice (same
// nonce); a node that still holds them answers from its cache.
func (s *Sender) Send(ctx context.Context, msgs ...types.RawMsg) (*ctypes.ResultTx, error) {
	p, err := s.Post(ctx, msgs...)
	if err != nil {
		return nil, err
	}
	return p.Wait(ctx)
}

// Pending is a transaction a node's mempool took.
type Pending struct {
	Hash  []byte
	bz    []byte
	c     *Client
	every time.Duration
}

// Wait waits for a block to include p, handing the node its bytes again
// while it waits, as Send does.
func (p *Pending) Wait(ctx context.Context) (*ctypes.ResultTx, error) {
	return p.c.waitTx(ctx, p.Hash, p.bz, p.every)
}

// Post is Send in two steps: it signs and broadcasts msgs (as Submit) and
// returns the pending transaction, whose Wait the caller may run later or
// elsewhere.
func (s *Sender) Post(ctx context.Context, msgs ...types.RawMsg) (*Pending, error) {
	hash, bz, err := s.submit(ctx, msgs)
	if err != nil {
		return nil, err
	}
	every := s.RebroadcastEvery
	if every <= 0 {
		every = rebroadcastEvery
	}
	return &Pending{Hash: hash, bz: bz, c: s.c, every: every}, nil
}

// rebroadcastEvery is how long Send waits for a block to include its
// transaction before it hands the node the same bytes again, unless the
// Sender's RebroadcastEvery says otherwise.
const rebroadcastEvery = 3 * time.Second

// Submit signs msgs into one transaction and broadcasts it without waiting
// for a block; it returns the transaction hash. A mempool refusal is a
// *TxError. After a transport error the transaction may or may not have
// reached the mempool: submitting the same messages again is then safe, as
// the node recognizes the identical transaction while its mempool cache
// remembers it.
func (s *Sender) Submit(ctx context.Context, msgs ...types.RawMsg) ([]byte, error) {
	hash, _, err := s.submit(ctx, msgs)
	return hash, err
}

// submit is Submit, also returning the signed bytes it broadcast.
func (s *Sender) submit(ctx context.Context, msgs []types.RawMsg) ([]byte, []byte, error) {
	if s.key == nil {
		return nil, nil, errors.New("sender has no key")
	}
	if len(msgs) == 0 {
		return nil, nil, errors.New("nothing to send: a transaction needs at least one message")
	}
	select {
	case s.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("not submitted: %w", ctx.Err())
	}
	defer func() { <-s.lock }()

	if err := s.load(ctx); err != nil {
		return nil, nil, err
	}
	hash, bz, err := s.broadcast(ctx, msgs)
	var te *TxError
	if !errors.As(err, &te) {
		return hash, bz, err
	}
	switch te.Code {
	case types.ErrNonceUsed.Code, types.ErrNonceAhead.Code:
		// The account answers from the last block, so it misses this
		// sender's transactions still in the mempool: used means the
		// mempool is past s.next too, ahead means s.next counts
		// transactions the mempool dropped.
		acct, qerr := s.c.Account(ctx, s.addr)
		if qerr != nil {
			s.synced = false
			return hash, bz, errors.Join(err, qerr)
		}
		if te.Code == types.ErrNonceUsed.Code {
			s.next = max(acct.Nonce, s.next+1)
		} else {
			s.next = acct.Nonce
		}
	case types.ErrFeeTooLow.Code:
		params, perr := s.c.Params(ctx)
		if perr != nil {
			return hash, bz, errors.Join(err, perr)
		}
		s.params = params
	default:
		return hash, bz, err
	}
	hash, bz, err = s.broadcast(ctx, msgs)
	if errors.As(err, &te) && (te.Code == types.ErrNonceUsed.Code || te.Code == types.ErrNonceAhead.Code) {
		s.synced = false // read the account again next time
	}
	return hash, bz, err
}

// load reads what the sender caches and has not read yet.
func (s *Sender) load(ctx context.Context) error {
	if s.chainID == "" {
		id, err := s.c.ChainID(ctx)
		if err != nil {
			return err
		}
		s.chainID = id
	}
	if s.params == nil {
		p, err := s.c.Params(ctx)
		if err != nil {
			return err
		}
		s.params = p
	}
	if !s.synced {
		acct, err := s.c.Account(ctx, s.addr)
		if err != nil {
			return err
		}
		s.next, s.synced = acct.Nonce, true
	}
	return nil
}

// broadcast signs msgs with the next nonce and broadcasts them; the nonce
// is used once the mempool has the transaction. It returns the
// transaction's hash and bytes.
func (s *Sender) broadcast(ctx context.Context, msgs []types.RawMsg) ([]byte, []byte, error) {
	tx := &types.Tx{Body: types.TxBody{ChainID: s.chainID, From: s.addr, Nonce: s.next, Msgs: msgs}}
	tx.Body.Fee = RequiredFee(s.params, tx)
	if err := tx.Sign(s.key); err != nil {
		return nil, nil, err
	}
	bz, err := tx.Encode()
	if err != nil {
		return nil, nil, err
	}
	hash := types.TxHash(bz)
	res, err := s.c.RPC.BroadcastTxSync(ctx, bz)
	switch {
	case err != nil && inMempoolCache(err):
		// The identical transaction (same nonce, same messages) was
		// accepted before, by a submission whose answer was lost.
		s.next++
		s.c.handOn(bz)
		return hash, bz, nil
	case err != nil:
		return hash, bz, s.c.broadcastError(ctx, bz, err)
	case res.Code != 0:
		return res.Hash, bz, &TxError{Hash: res.Hash, Code: res.Code, Log: res.Log}
	}
	s.next++
	s.c.handOn(bz)
	return res.Hash, bz, nil
}

// inMempoolCache reports whether a broadcast was refused because the node
// has these very bytes already.
func inMempoolCache(err error) bool {
	return strings.Contains(err.Error(), "tx already exists in cache")
}
