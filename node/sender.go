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
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/types"
)

// Sender sends transactions from one account with nonces it keeps itself,
// so that a long-running agent can have several transactions in the mempool
// at once without asking the node for the nonce each time. It is safe for
// concurrent use: broadcasts are serialized, in nonce order.
//
// The next nonce, the chain id and the parameters are read from the node
// on first use. A refusal for a used nonce (another client used the same
// key) re-reads the account and retries once; a refusal for the fee
// re-reads the parameters and retries once; any other refusal leaves the
// nonce unused.
//
// A nonce the node took is never signed again with other messages while
// the bytes signed under it might still land: a transaction that drops out
// of the mempools unincluded (its reveal window ended while it waited)
// leaves a gap that holds every later transaction of the account back, and
// the Sender closes it with the same bytes if the node takes them again,
// else with a filler (fillGaps). So each signed transaction lands at most
// once, and none waits forever behind a dead one.
type Sender struct {
	c    *Client
	key  *ecdsa.PrivateKey
	addr types.Address

	lock    chan struct{} // held while signing and broadcasting; guards below
	chainID string
	params  *genesis.Params
	next    uint64
	synced  bool // next was read from the account (or advanced from it)
	// sent holds the bytes the node took under each nonce not yet known
	// to be in a block (the newest maxSent at least, 2*maxSent at most):
	// fillGaps hands them to the node again before it fills a gap.
	sent map[uint64][]byte

	// RebroadcastEvery is how often Send (and Pending.Wait) hands the node
	// a transaction no block has included yet again; 0 means 3 s. Set it
	// before the first use.
	RebroadcastEvery time.Duration
}

// NewSender returns a sender for key's account through c.
func NewSender(c *Client, key *ecdsa.PrivateKey) *Sender {
	s := &Sender{c: c, key: key, lock: make(chan struct{}, 1), sent: map[uint64][]byte{}}
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
	s     *Sender
	nonce uint64
}

// Wait waits for a block to include p, handing the node its bytes again
// while it waits, as Send does. If the node keeps refusing them as ahead
// of the account's nonce (an earlier transaction of the sender dropped
// out unincluded), the Sender fills the gap (fillGaps).
func (p *Pending) Wait(ctx context.Context) (*ctypes.ResultTx, error) {
	fill := func(ctx context.Context) error { return p.s.fillGaps(ctx, p.nonce) }
	res, err := p.c.waitTx(ctx, p.Hash, p.bz, p.every, fill)
	if err == nil {
		p.s.landed(p.nonce)
	}
	return res, err
}

// Post is Send in two steps: it signs and broadcasts msgs (as Submit) and
// returns the pending transaction, whose Wait the caller may run later or
// elsewhere.
func (s *Sender) Post(ctx context.Context, msgs ...types.RawMsg) (*Pending, error) {
	hash, bz, nonce, err := s.submit(ctx, msgs)
	if err != nil {
		return nil, err
	}
	every := s.RebroadcastEvery
	if every <= 0 {
		every = rebroadcastEvery
	}
	return &Pending{Hash: hash, bz: bz, c: s.c, every: every, s: s, nonce: nonce}, nil
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
	hash, _, _, err := s.submit(ctx, msgs)
	return hash, err
}

// submit is Submit, also returning the signed bytes it broadcast and
// their nonce.
func (s *Sender) submit(ctx context.Context, msgs []types.RawMsg) ([]byte, []byte, uint64, error) {
	if s.key == nil {
		return nil, nil, 0, errors.New("sender has no key")
	}
	if len(msgs) == 0 {
		return nil, nil, 0, errors.New("nothing to send: a transaction needs at least one message")
	}
	if err := s.acquire(ctx); err != nil {
		return nil, nil, 0, fmt.Errorf("not submitted: %w", err)
	}
	defer s.release()

	if err := s.load(ctx); err != nil {
		return nil, nil, 0, err
	}
	nonce := s.next
	hash, bz, err := s.broadcast(ctx, msgs)
	var te *TxError
	if !errors.As(err, &te) {
		return hash, bz, nonce, err
	}
	switch te.Code {
	case types.ErrNonceUsed.Code:
		// The account answers from the last block, so it misses this
		// sender's transactions still in the mempool: the mempool is
		// past s.next too (another client of the key).
		acct, qerr := s.c.Account(ctx, s.addr)
		if qerr != nil {
			s.synced = false
			return hash, bz, nonce, errors.Join(err, qerr)
		}
		s.next = max(acct.Nonce, s.next+1)
	case types.ErrNonceAhead.Code:
		// The mempool dropped some of this sender's transactions: the
		// nonces under s.next are handed to it again or filled, never
		// signed over with these messages (their old bytes may still
		// land elsewhere).
		if ferr := s.fillLocked(ctx, s.next, false); ferr != nil {
			s.synced = false
			return hash, bz, nonce, errors.Join(err, ferr)
		}
	case types.ErrFeeTooLow.Code:
		params, perr := s.c.Params(ctx)
		if perr != nil {
			return hash, bz, nonce, errors.Join(err, perr)
		}
		s.params = params
	default:
		return hash, bz, nonce, err
	}
	nonce = s.next
	hash, bz, err = s.broadcast(ctx, msgs)
	if errors.As(err, &te) && (te.Code == types.ErrNonceUsed.Code || te.Code == types.ErrNonceAhead.Code) {
		s.synced = false // read the account again next time
	}
	return hash, bz, nonce, err
}

func (s *Sender) acquire(ctx context.Context) error {
	select {
	case s.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Sender) release() { <-s.lock }

// maxSent bounds Sender.sent: a sender that never waits (Submit only)
// keeps the newest.
const maxSent = 256

// landed forgets the bytes sent under nonce and every nonce before it: a
// block included them. It never waits for the lock (a broadcast to a
// paused node may hold it): if busy, a later sweep forgets them.
func (s *Sender) landed(nonce uint64) {
	select {
	case s.lock <- struct{}{}:
	default:
		return
	}
	defer s.release()
	s.forgetBelow(nonce + 1)
}

func (s *Sender) forgetBelow(n uint64) {
	for k := range s.sent {
		if k < n {
			delete(s.sent, k)
		}
	}
}

// fillGaps closes the gaps under nonce that hold this sender's later
// transactions back: every nonce from the account's (as of the last
// block) up to nonce whose transaction the node does not hold gets it
// again, the bytes this Sender signed under it if the node takes them,
// else a filler (fill). A nonce the node refuses as used is taken
// (another transaction of the key, or the bytes are in the mempool).
func (s *Sender) fillGaps(ctx context.Context, nonce uint64) error {
	if s.key == nil {
		return nil
	}
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.release()
	if err := s.load(ctx); err != nil {
		return err
	}
	return s.fillLocked(ctx, nonce, true)
}

// fillLocked closes the gaps from the account's nonce up to below. With
// tail false (the node refused s.next as ahead), the nonces after the last
// one this Sender holds bytes for are not filled: s.next goes back to the
// first of them (nothing known was signed there).
func (s *Sender) fillLocked(ctx context.Context, below uint64, tail bool) error {
	acct, err := s.c.Account(ctx, s.addr)
	if err != nil {
		return err
	}
	s.forgetBelow(acct.Nonce)
	end := below
	if !tail {
		end = acct.Nonce
		for n := range s.sent {
			if n < below {
				end = max(end, n+1)
			}
		}
	}
	for n := acct.Nonce; n < end; n++ {
		if bz := s.sent[n]; bz != nil {
			res, err := s.c.RPC.BroadcastTxSync(ctx, bz)
			code, _ := refusal(res, err)
			if err != nil && code == 0 && !inMempoolCache(err) {
				return fmt.Errorf("cannot hand nonce %d to the node again: %w", n, err)
			}
			if code == 0 || code == types.ErrNonceUsed.Code {
				s.c.handOn(bz)
				continue
			}
			// Refused for what it says (its window ended): it can never
			// land, and its nonce holds the later ones back.
		}
		if err := s.fill(ctx, n); err != nil {
			return err
		}
	}
	if tail {
		s.next = max(s.next, below)
	} else {
		s.next = end
	}
	return nil
}

// fill signs and broadcasts the smallest transaction under nonce n: one
// base unit sent to the sender itself (its fee is all it costs). It is an
// ordinary transaction: while the mempool is busy it pays more, up to
// maxFillMultiple times the minimum fee.
func (s *Sender) fill(ctx context.Context, n uint64) error {
	msg := (&escrow.MsgSend{To: s.addr, Amount: uint256.NewInt(1)}).Raw()
	for multiple := uint64(1); ; multiple *= 2 {
		tx := &types.Tx{Body: types.TxBody{ChainID: s.chainID, From: s.addr, Nonce: n, Msgs: []types.RawMsg{msg}}}
		tx.Body.Fee = new(uint256.Int).Mul(RequiredFee(s.params, tx), uint256.NewInt(multiple))
		if err := tx.Sign(s.key); err != nil {
			return err
		}
		bz, err := tx.Encode()
		if err != nil {
			return err
		}
		res, err := s.c.RPC.BroadcastTxSync(ctx, bz)
		code, log := refusal(res, err)
		switch {
		case code == types.ErrFeeTooLow.Code && multiple < maxFillMultiple:
			continue
		case code == types.ErrNonceUsed.Code:
			return nil // no gap: the mempool holds a transaction under n
		case code != 0:
			return fmt.Errorf("cannot fill the gap at nonce %d: refused (code %d): %s", n, code, log)
		case err != nil && code == 0 && !inMempoolCache(err):
			return fmt.Errorf("cannot fill the gap at nonce %d: %w", n, err)
		}
		s.sent[n] = bz
		s.c.handOn(bz)
		return nil
	}
}

// maxFillMultiple bounds what a filler pays while the mempool is busy.
const maxFillMultiple = 64

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
	case err != nil:
		return hash, bz, s.c.broadcastError(ctx, bz, err)
	case res.Code != 0:
		return res.Hash, bz, &TxError{Hash: res.Hash, Code: res.Code, Log: res.Log}
	}
	s.sent[s.next] = bz
	if len(s.sent) > 2*maxSent { // amortized: one sweep per maxSent sends
		s.forgetBelow(s.next - maxSent + 1)
	}
	s.next++
	s.c.handOn(bz)
	return hash, bz, nil
}

// inMempoolCache reports whether a broadcast was refused because the node
// has these very bytes already.
func inMempoolCache(err error) bool {
	return strings.Contains(err.Error(), "tx already exists in cache")
}
