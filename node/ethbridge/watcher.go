package ethbridge

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sync"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/bridge"
	"github.com/ogpu-network/ogpu/contracts"
)

const (
	// DefaultMaxLag is the default WatcherOptions.MaxLag, in blocks. On
	// mainnet the finalized block is normally 64 to 95 blocks behind the
	// head; a non-archive geth keeps the state of the last 128 blocks only,
	// so reading the contract at a finalized block further back fails
	// anyway.
	DefaultMaxLag = 128
	// MaxDepositsPerObserve caps the deposits one Observe returns (and the
	// nonce topics of one eth_getLogs query; nodes limit those).
	MaxDepositsPerObserve = 256
	// maxTopicsPerQuery caps the withdrawal nonces of one eth_getLogs query.
	maxTopicsPerQuery = 256
)

// ErrFinalityLag is returned (inside a *FinalityLagError) by Observe when
// the node's finalized block is more than MaxLag blocks behind its head:
// inbound stalls rather than reading blocks that are not final.
var ErrFinalityLag = errors.New("ethereum finality lags")

// FinalityLagError reports the node's head and finalized block when their
// distance exceeds MaxLag. errors.Is(err, ErrFinalityLag) holds.
type FinalityLagError struct {
	Latest, Finalized, MaxLag uint64
}

// Error gives the head, the finalized block and the limit.
func (e *FinalityLagError) Error() string {
	return fmt.Sprintf("%v: the node's finalized block %d is %d blocks behind its head %d (at most %d allowed); reporting nothing until finality catches up",
		ErrFinalityLag, e.Finalized, e.Latest-e.Finalized, e.Latest, e.MaxLag)
}

// Is makes errors.Is(err, ErrFinalityLag) true.
func (e *FinalityLagError) Is(target error) bool { return target == ErrFinalityLag }

// NotYetError: the node's finalized block is before the bridge's
// deployment block, as after a launch: nothing to observe yet.
type NotYetError struct{ Finalized, Deployed uint64 }

func (e *NotYetError) Error() string {
	return fmt.Sprintf("the finalized block %d is before the bridge's deployment block %d: nothing to observe yet", e.Finalized, e.Deployed)
}

// WatcherOptions configures a Watcher. Zero fields take the documented
// defaults.
type WatcherOptions struct {
	// StartBlock is the bridge's deployment block: logs are searched from
	// here on. Default 0 (the whole chain: correct, but slow on mainnet).
	StartBlock uint64
	// MaxLag is the largest head − finalized distance, in blocks, at which
	// Observe still reports. Default DefaultMaxLag.
	MaxLag uint64
	// MaxLogRange splits eth_getLogs queries into ranges of at most this
	// many blocks, for providers that limit them. Default 0: one query.
	MaxLogRange uint64
	// ChainID, when non-zero, is the Ethereum chain id the node must report
	// (NewWatcher refuses a node on another chain).
	ChainID uint64
	// AppChainID, when non-empty, is the app-chain id the contract must
	// serve (NewWatcher compares its appChainIdHash).
	AppChainID string
}

// Watcher reads the OGPUBridge contract at its Ethereum node's finalized
// block. It is safe for concurrent use; calls are serialized.
type Watcher struct {
	c      Client
	addr   common.Address
	token  common.Address
	domain [32]byte
	bc, tc *bind.BoundContract
	opts   WatcherOptions

	mu sync.Mutex
	// depBlock[n] is the (finalized) block of deposit n: deposit n+1 is in
	// that block or a later one, so a later search starts there.
	depBlock map[uint64]uint64
	// wdScanned[n] is the last finalized block searched for withdrawal n's
	// Withdrawn event without finding it; wdFound holds those found.
	wdScanned map[uint64]uint64
	wdFound   map[uint64]bridge.Executed
}

// NewWatcher binds a watcher to the bridge at addr on c's chain. It reads
// the token address and the domain from the contract once, and checks the
// chain id and app-chain id when the options name them.
func NewWatcher(ctx context.Context, c Client, addr common.Address, opts WatcherOptions) (*Watcher, error) {
	if c == nil {
		return nil, errors.New("ethbridge: no Ethereum client")
	}
	if opts.MaxLag == 0 {
		opts.MaxLag = DefaultMaxLag
	}
	if opts.ChainID != 0 {
		id, err := c.ChainID(ctx)
		if err != nil {
			return nil, fmt.Errorf("cannot read the Ethereum chain id: %w", err)
		}
		if !id.IsUint64() || id.Uint64() != opts.ChainID {
			return nil, fmt.Errorf("the Ethereum node is on chain %s, the bridge is configured for chain %d: point the RPC URL at the right network", id, opts.ChainID)
		}
	}
	code, err := c.CodeAt(ctx, addr, nil)
	if err != nil {
		return nil, fmt.Errorf("cannot read the bridge contract's code: %w", err)
	}
	if len(code) == 0 {
		return nil, fmt.Errorf("no contract at %s on this Ethereum node: check the bridge address and the network", addr)
	}
	w := &Watcher{c: c, addr: addr, opts: opts, bc: bridgeABI.Instance(c, addr),
		depBlock: map[uint64]uint64{}, wdScanned: map[uint64]uint64{}, wdFound: map[uint64]bridge.Executed{}}
	latest := &bind.CallOpts{Context: ctx}
	if w.token, err = bind.Call(w.bc, latest, bridgeABI.PackToken(), bridgeABI.UnpackToken); err != nil {
		return nil, fmt.Errorf("cannot read the bridge's token (is %s an OGPUBridge?): %w", addr, err)
	}
	if w.domain, err = bind.Call(w.bc, latest, bridgeABI.PackDomain(), bridgeABI.UnpackDomain); err != nil {
		return nil, fmt.Errorf("cannot read the bridge's domain: %w", err)
	}
	if opts.AppChainID != "" {
		h, err := bind.Call(w.bc, latest, bridgeABI.PackAppChainIdHash(), bridgeABI.UnpackAppChainIdHash)
		if err != nil {
			return nil, fmt.Errorf("cannot read the bridge's app-chain id: %w", err)
		}
		if h != bridge.AppChainIDHash(opts.AppChainID) {
			return nil, fmt.Errorf("the bridge at %s serves another app chain (appChainIdHash %x), not %q", addr, h, opts.AppChainID)
		}
	}
	w.tc = tokenABI.Instance(c, w.token)
	return w, nil
}

// Address is the bridge contract's address.
func (w *Watcher) Address() common.Address { return w.addr }

// Token is the address of the token the bridge locks.
func (w *Watcher) Token() common.Address { return w.token }

// Domain is the contract's domain, the first word of every signed digest.
func (w *Watcher) Domain() [32]byte { return w.domain }

// Observe reads, all at the node's finalized block and never above it:
//
//   - the deposits with nonces nextDeposit, nextDeposit+1, ... (at most
//     maxDeposits, capped at MaxDepositsPerObserve), consecutive: the list
//     stops before the first nonce the node does not show;
//   - the Withdrawn events of the withdrawal nonces in pending, in
//     increasing nonce order (those not yet paid are absent);
//   - the bridge's token balance (Locked) and its valset nonce.
//
// Deposits are found by their indexed nonce, never by transaction hash or
// log index, so a deposit that a reorg moved to another block is the same
// deposit. When the finalized block lags the head by more than MaxLag it
// returns a *FinalityLagError; when any RPC call fails, or the node returns
// logs that contradict each other, it returns an error and no observation.
func (w *Watcher) Observe(ctx context.Context, nextDeposit uint64, maxDeposits int, pending []uint64) (*bridge.Observation, error) {
	if nextDeposit == 0 {
		return nil, errors.New("deposit nonces start at 1: nextDeposit must be at least 1")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	fin, err := w.finalized(ctx)
	if err != nil {
		return nil, err
	}
	f := fin.Number.Uint64()
	if f < w.opts.StartBlock {
		return nil, &NotYetError{Finalized: f, Deployed: w.opts.StartBlock}
	}
	at := &bind.CallOpts{Context: ctx, BlockNumber: fin.Number}
	locked, err := bind.Call(w.tc, at, tokenABI.PackBalanceOf(w.addr), tokenABI.UnpackBalanceOf)
	if err != nil {
		return nil, fmt.Errorf("cannot read the bridge's balance at block %d: %w", f, err)
	}
	vnonce, err := bind.Call(w.bc, at, bridgeABI.PackValsetNonce(), bridgeABI.UnpackValsetNonce)
	if err != nil {
		return nil, fmt.Errorf("cannot read the valset nonce at block %d: %w", f, err)
	}
	last, err := bind.Call(w.bc, at, bridgeABI.PackLastDepositNonce(), bridgeABI.UnpackLastDepositNonce)
	if err != nil {
		return nil, fmt.Errorf("cannot read the last deposit nonce at block %d: %w", f, err)
	}
	lockedU, overflow := uint256.FromBig(locked)
	if overflow || locked.Sign() < 0 {
		return nil, fmt.Errorf("bridge balance %s does not fit 256 bits", locked)
	}
	deps, depBlocks, err := w.deposits(ctx, f, nextDeposit, maxDeposits, last)
	if err != nil {
		return nil, err
	}
	execs, scanned, err := w.withdrawn(ctx, f, pending)
	if err != nil {
		return nil, err
	}
	// Everything was read: only now update the search hints.
	for n := range w.depBlock {
		if n+1 < nextDeposit {
			delete(w.depBlock, n)
		}
	}
	for n, b := range depBlocks {
		w.depBlock[n] = b
	}
	keep := make(map[uint64]bool, len(pending))
	for _, n := range pending {
		keep[n] = true
	}
	for n := range w.wdScanned {
		if !keep[n] {
			delete(w.wdScanned, n)
		}
	}
	for n := range w.wdFound {
		if !keep[n] {
			delete(w.wdFound, n)
		}
	}
	for n := range scanned {
		w.wdScanned[n] = f
	}
	for _, x := range execs {
		w.wdFound[x.Nonce] = x
		delete(w.wdScanned, x.Nonce)
	}
	return &bridge.Observation{Finalized: f, Locked: lockedU, Deposits: deps, Executed: execs, ValsetNonce: vnonce}, nil
}

// finalized returns the node's finalized header, or a *FinalityLagError.
func (w *Watcher) finalized(ctx context.Context) (*types.Header, error) {
	fin, err := w.c.HeaderByNumber(ctx, big.NewInt(int64(rpc.FinalizedBlockNumber)))
	if err != nil {
		return nil, fmt.Errorf("cannot read the finalized block: %w", err)
	}
	head, err := w.c.HeaderByNumber(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("cannot read the latest block: %w", err)
	}
	if fin == nil || head == nil || fin.Number == nil || head.Number == nil {
		return nil, errors.New("the node returned no finalized or latest header")
	}
	f, h := fin.Number.Uint64(), head.Number.Uint64()
	if h > f && h-f > w.opts.MaxLag {
		return nil, &FinalityLagError{Latest: h, Finalized: f, MaxLag: w.opts.MaxLag}
	}
	return fin, nil
}

// deposits finds deposits next.. (at most max, none above last, the
// contract's deposit count at block f) in blocks up to f, consecutive from
// next. It returns them with their blocks.
func (w *Watcher) deposits(ctx context.Context, f, next uint64, max int, last uint64) ([]bridge.Deposit, map[uint64]uint64, error) {
	if max <= 0 || next > last {
		return nil, nil, nil
	}
	if max > MaxDepositsPerObserve {
		max = MaxDepositsPerObserve
	}
	hi := min(next+uint64(max)-1, last)
	from := w.opts.StartBlock
	for n, b := range w.depBlock {
		if n <= next && b > from {
			from = b // deposit next is in this block or a later one
		}
	}
	nonces := make([]common.Hash, 0, hi-next+1)
	for n := next; n <= hi; n++ {
		nonces = append(nonces, nonceTopic(n))
	}
	id := bridgeABI.GetABI().Events["Deposited"].ID
	logs, err := w.filter(ctx, [][]common.Hash{{id}, nonces}, from, f, len(nonces))
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read Deposited events: %w", err)
	}
	got := make(map[uint64]bridge.Deposit, len(logs))
	blocks := make(map[uint64]uint64, len(logs))
	for i := range logs {
		ev, err := bridgeABI.UnpackDepositedEvent(&logs[i])
		if err != nil {
			return nil, nil, fmt.Errorf("undecodable Deposited event in block %d: %w", logs[i].BlockNumber, err)
		}
		amt, overflow := uint256.FromBig(ev.Amount)
		if ev.Nonce < next || ev.Nonce > hi || overflow || amt.IsZero() {
			return nil, nil, fmt.Errorf("the node returned a Deposited event (nonce %d, amount %s) that the query excludes", ev.Nonce, ev.Amount)
		}
		d := bridge.Deposit{Nonce: ev.Nonce, From: ev.From, Recipient: ev.Recipient, Amount: amt}
		if prev, ok := got[d.Nonce]; ok && !prev.Equal(d) {
			return nil, nil, fmt.Errorf("the node returned two different deposits with nonce %d", d.Nonce)
		}
		got[d.Nonce] = d
		blocks[d.Nonce] = logs[i].BlockNumber
	}
	var out []bridge.Deposit
	for n := next; n <= hi; n++ {
		d, ok := got[n]
		if !ok {
			break // a gap: the node lacks a log the contract counts; report up to it
		}
		out = append(out, d)
	}
	for n := range blocks {
		if n >= next+uint64(len(out)) {
			delete(blocks, n) // beyond a gap: not a trusted hint
		}
	}
	return out, blocks, nil
}

// withdrawn finds the Withdrawn events of the pending nonces in blocks up
// to f. It returns them in nonce order, and the nonces searched up to f
// without a result.
func (w *Watcher) withdrawn(ctx context.Context, f uint64, pending []uint64) ([]bridge.Executed, map[uint64]bool, error) {
	ps := slices.Clone(pending)
	slices.Sort(ps)
	ps = slices.Compact(ps)
	var out []bridge.Executed
	var todo []uint64
	from := f + 1
	for _, n := range ps {
		if x, ok := w.wdFound[n]; ok {
			out = append(out, x)
			continue
		}
		todo = append(todo, n)
		start := w.opts.StartBlock
		if s, ok := w.wdScanned[n]; ok && s+1 > start {
			start = s + 1
		}
		from = min(from, start)
	}
	scanned := make(map[uint64]bool, len(todo))
	id := bridgeABI.GetABI().Events["Withdrawn"].ID
	for i := 0; i < len(todo) && from <= f; i += maxTopicsPerQuery {
		chunk := todo[i:min(i+maxTopicsPerQuery, len(todo))]
		want := make(map[uint64]bool, len(chunk))
		topics := make([]common.Hash, len(chunk))
		for j, n := range chunk {
			topics[j] = nonceTopic(n)
			want[n] = true
		}
		logs, err := w.filter(ctx, [][]common.Hash{{id}, topics}, from, f, len(chunk))
		if err != nil {
			return nil, nil, fmt.Errorf("cannot read Withdrawn events: %w", err)
		}
		found := map[uint64]bridge.Executed{}
		for k := range logs {
			ev, err := bridgeABI.UnpackWithdrawnEvent(&logs[k])
			if err != nil {
				return nil, nil, fmt.Errorf("undecodable Withdrawn event in block %d: %w", logs[k].BlockNumber, err)
			}
			amt, overflow := uint256.FromBig(ev.Amount)
			if !want[ev.Nonce] || overflow {
				return nil, nil, fmt.Errorf("the node returned a Withdrawn event (nonce %d) that the query excludes", ev.Nonce)
			}
			x := bridge.Executed{Nonce: ev.Nonce, To: ev.To, Amount: amt}
			if prev, ok := found[x.Nonce]; ok && (prev.To != x.To || !prev.Amount.Eq(x.Amount)) {
				return nil, nil, fmt.Errorf("the node returned two different Withdrawn events for withdrawal %d", x.Nonce)
			}
			found[x.Nonce] = x
		}
		for _, n := range chunk {
			if x, ok := found[n]; ok {
				out = append(out, x)
			} else {
				scanned[n] = true
			}
		}
	}
	if from > f {
		for _, n := range todo {
			scanned[n] = true // nothing new to search
		}
	}
	slices.SortFunc(out, func(a, b bridge.Executed) int { return cmp.Compare(a.Nonce, b.Nonce) })
	return out, scanned, nil
}

// nonceTopic is an indexed uint64 as a log topic.
func nonceTopic(n uint64) common.Hash { return common.BigToHash(new(big.Int).SetUint64(n)) }

// filter runs eth_getLogs for the bridge's logs matching topics in blocks
// from..to, in ranges of at most MaxLogRange blocks (ascending), and stops
// early once it has want logs (0: never). A log the node returns outside
// the query is an error.
func (w *Watcher) filter(ctx context.Context, topics [][]common.Hash, from, to uint64, want int) ([]types.Log, error) {
	var out []types.Log
	for lo := from; lo <= to; {
		hi := to
		if w.opts.MaxLogRange > 0 && to-lo >= w.opts.MaxLogRange {
			hi = lo + w.opts.MaxLogRange - 1
		}
		logs, err := w.getLogs(ctx, topics, lo, hi)
		if err != nil {
			return nil, err
		}
		out = append(out, logs...)
		if hi == to || (want > 0 && len(out) >= want) {
			break
		}
		lo = hi + 1
	}
	return out, nil
}

// filterBack is filter walking the ranges from to down to from, stopping
// once done(logs of one range) says so.
func (w *Watcher) filterBack(ctx context.Context, topics [][]common.Hash, from, to uint64, done func([]types.Log) bool) error {
	for hi := to; hi >= from; {
		lo := from
		if w.opts.MaxLogRange > 0 && hi-from >= w.opts.MaxLogRange {
			lo = hi - w.opts.MaxLogRange + 1
		}
		logs, err := w.getLogs(ctx, topics, lo, hi)
		if err != nil {
			return err
		}
		if done(logs) || lo == from {
			return nil
		}
		hi = lo - 1
	}
	return nil
}

func (w *Watcher) getLogs(ctx context.Context, topics [][]common.Hash, lo, hi uint64) ([]types.Log, error) {
	logs, err := w.c.FilterLogs(ctx, ethereum.FilterQuery{
		FromBlock: new(big.Int).SetUint64(lo), ToBlock: new(big.Int).SetUint64(hi),
		Addresses: []common.Address{w.addr}, Topics: topics,
	})
	if err != nil {
		return nil, fmt.Errorf("eth_getLogs blocks %d..%d: %w", lo, hi, err)
	}
	for _, l := range logs {
		if l.Removed || l.Address != w.addr || l.BlockNumber < lo || l.BlockNumber > hi {
			return nil, fmt.Errorf("eth_getLogs blocks %d..%d: the node returned a log outside the query (block %d, address %s, removed %v)", lo, hi, l.BlockNumber, l.Address, l.Removed)
		}
	}
	return logs, nil
}

// CurrentValset returns the validator set the contract holds now (at the
// node's latest block): the ValsetUpdated event at the contract's
// valsetNonce whose checkpoint is the stored valsetCheckpoint, checked by
// recomputing the checkpoint. It is what Relayer calls need as current.
func (w *Watcher) CurrentValset(ctx context.Context) (bridge.Valset, error) {
	head, err := w.c.HeaderByNumber(ctx, nil)
	if err != nil {
		return bridge.Valset{}, fmt.Errorf("cannot read the latest block: %w", err)
	}
	at := &bind.CallOpts{Context: ctx, BlockNumber: head.Number}
	cp, err := bind.Call(w.bc, at, bridgeABI.PackValsetCheckpoint(), bridgeABI.UnpackValsetCheckpoint)
	if err != nil {
		return bridge.Valset{}, fmt.Errorf("cannot read the valset checkpoint: %w", err)
	}
	n, err := bind.Call(w.bc, at, bridgeABI.PackValsetNonce(), bridgeABI.UnpackValsetNonce)
	if err != nil {
		return bridge.Valset{}, fmt.Errorf("cannot read the valset nonce: %w", err)
	}
	var found *contracts.OGPUBridgeValsetUpdated
	var decodeErr error
	id := bridgeABI.GetABI().Events["ValsetUpdated"].ID
	err = w.filterBack(ctx, [][]common.Hash{{id}, {nonceTopic(n)}}, w.opts.StartBlock, head.Number.Uint64(), func(logs []types.Log) bool {
		for i := len(logs) - 1; i >= 0; i-- {
			ev, err := bridgeABI.UnpackValsetUpdatedEvent(&logs[i])
			if err != nil {
				decodeErr = fmt.Errorf("undecodable ValsetUpdated event in block %d: %w", logs[i].BlockNumber, err)
				return true
			}
			if ev.Checkpoint == cp && ev.Nonce == n {
				found = ev
				return true
			}
		}
		return false
	})
	if err == nil {
		err = decodeErr
	}
	if err != nil {
		return bridge.Valset{}, fmt.Errorf("cannot read ValsetUpdated events: %w", err)
	}
	if found == nil {
		return bridge.Valset{}, fmt.Errorf("no ValsetUpdated event with the stored checkpoint %x (nonce %d) since block %d: is StartBlock after the deployment?", cp, n, w.opts.StartBlock)
	}
	if len(found.Validators) != len(found.Powers) {
		return bridge.Valset{}, fmt.Errorf("ValsetUpdated %d lists %d validators and %d powers", n, len(found.Validators), len(found.Powers))
	}
	vs := bridge.Valset{Nonce: n, Members: make([]bridge.Member, len(found.Validators))}
	for i := range found.Validators {
		vs.Members[i] = bridge.Member{Addr: found.Validators[i], Power: found.Powers[i]}
	}
	if err := vs.Validate(); err != nil {
		return bridge.Valset{}, fmt.Errorf("ValsetUpdated %d: %w", n, err)
	}
	if got := bridge.Checkpoint(w.domain, &vs); got != cp {
		return bridge.Valset{}, fmt.Errorf("the set rebuilt from ValsetUpdated %d hashes to %x, the contract stores %x", n, got, cp)
	}
	return vs, nil
}
