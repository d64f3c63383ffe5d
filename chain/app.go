// Package chain is the oGPU ABCI 2.0 application: it decodes and
// authenticates transactions, routes their messages to the state machines,
// runs the block lifecycle, commits the Merkle state and answers queries.
//
// The application is deterministic: its state after a block is a function of
// its state before and the block's transactions. It reads no clock, no
// randomness and no network, and never ranges over a map to write state.
package chain

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/cometbft/cometbft/libs/log"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/bridge"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/finetune"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/session"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// AppVersion is the version of the state machine's rules, reported to
// CometBFT. Any change that can change an app hash bumps it.
//
// 6 (issue 17): an auction closes at the end of the block in which its
// last sealed bid is revealed, and one without a sealed bid at the end of
// its bid window; jobs count their revealed bids (market.Job.Opened).
//
// 7 (issue 17): an auction ranks its bids as they are revealed. Each
// stage keeps its 3r + 1 best revealed bids (market.Leaders); a reveal
// checks its provider's eligibility and returns the deposit of the bid it
// pushes out; the close checks and awards the leaders only, and auctions
// no longer write order-book keys. The last tie-break is seeded by the
// block of the job's first reveal, and reputation is read at the reveal.
// Also 7 (issue 17, merged under the same version): a final job is pruned
// params.market.retain_blocks after its end (market prune.go; the prune
// queue under 0x2b).
//
// 8 (issue 30): a stage with fewer than r agreeing results is never paid
// as verified: the client's short-stage policy (market.Job.Short) audits
// it by a validator vote ("audited"), refunds it ("unverified") or bids
// again for one more window ("rebid"); an
// auction stage with no more eligible bidders than slots clears at its
// highest winning bid, not the cap (market short.go, leaders.go).
const AppVersion uint64 = 8

// Version is the software version.
const Version = "0.1.0"

// App is the ABCI application.
//
// Concurrency: CometBFT may call CheckTx (the mempool connection) beside
// every other call, and must serialize the others (consensus, query and
// snapshot connections) among themselves; node.NewClientCreator does
// both. CheckTx touches only what checkMu guards (the mempool's view, its
// height and counts), reads the state through the tree's reader
// (store.Tree.ReadSnapshot: nodes of its own, so a block being written
// beside it cannot race), and shares only the signature cache (its own
// mutex) and the decoded params (atomic) with the rest. With
// proxy.NewLocalClientCreator (one mutex for all calls) it works as well.
type App struct {
	abci.BaseApplication

	tree   *store.Tree
	logger log.Logger

	// checkMu guards check, checkHeight and ordinary, and orders CheckTx
	// against writes to the tree: CheckTx holds it throughout; Commit,
	// InitChain, a restored snapshot and FinalizeBlock's writing of the
	// block take it.
	checkMu sync.Mutex
	// treeMu orders PreverifyTx's reads of the saved version (read lock),
	// which take no checkMu, against the writes into the IAVL tree (write
	// lock: FinalizeBlock's writing of the block, Commit), which hold
	// checkMu too. A read of a saved version beside an IAVL write races
	// (see the FinalizeBlock comment and docs/design-notes.md).
	treeMu sync.RWMutex
	// check is the mempool's view: the last committed state plus the
	// transactions CheckTx accepted since.
	check *store.Cache
	// checkHeight is the height CheckTx assumes: the next block's.
	checkHeight uint64
	// pending holds the height FinalizeBlock ran for, until Commit.
	pending int64

	invariants bool

	// Block space (mempool.go): the admission policy's limits (zero: off),
	// what the mempool holds since the last Commit, and the block gas
	// limit (zero: none).
	pool        MempoolLimits
	ordinary    poolCount
	maxBlockGas uint64
	// proposalBudget (zero: none) bounds PrepareProposal's time, read
	// with now (WithProposalBudget).
	proposalBudget time.Duration
	now            func() time.Time

	// extender makes this validator's vote extensions' bridge part and
	// beacon their beacon part (voteext.go).
	extender Extender
	beacon   BeaconSigner

	// committed is the last saved version, through the tree's reader, for
	// PreverifyTx's cheap checks without checkMu (sigcache.go); nil until
	// the first Commit (or a restored snapshot): the genesis state is
	// read under checkMu then.
	committed atomic.Pointer[store.Snapshot]

	// sigs are the transactions whose signature verified (sigcache.go).
	sigs *sigCache
	// execs are the recorded runs of transactions (execrecord.go).
	execs *ringMap[*execRecord]
	// paramsCache is the last params record runTx decoded (App.params).
	paramsCache atomic.Pointer[decodedParams]

	// snapshots takes and serves state sync snapshots (snapshot.go; nil:
	// none); restore is a snapshot being restored.
	snapshots SnapshotStore
	restore   *restoring
	// keepRecent: the saved versions kept (0: all); older ones are pruned
	// after each Commit (a node's choice: no hash depends on it).
	keepRecent int64
}

// Option configures an App.
type Option func(*App)

// WithInvariants makes the app check every invariant after every block and
// refuse to go on (halting the node) if one breaks. Tests turn it on.
func WithInvariants() Option { return func(a *App) { a.invariants = true } }

// WithPruning keeps only the last keepRecent saved versions of the state
// (0: every version): queries at older heights are refused.
func WithPruning(keepRecent int64) Option { return func(a *App) { a.keepRecent = keepRecent } }

// WithLogger sets the logger.
func WithLogger(l log.Logger) Option { return func(a *App) { a.logger = l } }

// NewApp returns the application over tree, which holds the committed state.
func NewApp(tree *store.Tree, opts ...Option) *App {
	a := &App{tree: tree, logger: log.NewNopLogger(), sigs: newSigCache(), execs: newRingMap[*execRecord](execRecordSize)}
	for _, o := range opts {
		o(a)
	}
	a.resetCheckState()
	a.checkHeight = uint64(tree.Version()) + 1
	return a
}

// resetCheckState makes the last saved version the mempool's view, read
// through the tree's reader. a.checkMu is held (or a is not shared yet).
func (a *App) resetCheckState() {
	var snap *store.Snapshot
	var err error
	if v := a.tree.Version(); v > 0 {
		snap, err = a.tree.ReadSnapshot(v)
	} else {
		snap, err = a.tree.Snapshot(0) // nothing saved: empty
	}
	if err != nil {
		panic(err) // the latest version always exists
	}
	a.check = store.NewCache(snap)
	if snap.Version() > 0 {
		a.committed.Store(snap)
	} else {
		a.committed.Store(nil)
	}
}

// AppHash is sha256("ogpu/apphash/v1" | bigEndian(height) | root): it commits
// to all state (the IAVL root) and to the height it was reached at.
func AppHash(height int64, root []byte) []byte {
	h := sha256.New()
	h.Write([]byte("ogpu/apphash/v1"))
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(height)))
	h.Write(root)
	return h.Sum(nil)
}

// Info tells CometBFT where the application is, for the handshake that
// replays any blocks it missed.
func (a *App) Info(context.Context, *abci.InfoRequest) (*abci.InfoResponse, error) {
	res := &abci.InfoResponse{Data: "ogpu", Version: Version, AppVersion: AppVersion}
	if v, h := a.tree.Latest(); v > 0 {
		res.LastBlockHeight = v
		res.LastBlockAppHash = AppHash(v, h)
	}
	return res, nil
}

// InitChain writes the genesis state, runs the genesis transactions
// (create-validator, typically) and hands CometBFT the validator set that
// follows from the bonded stakes. Nothing is saved until the first block's
// Commit, so a crash before it simply runs InitChain again.
func (a *App) InitChain(_ context.Context, req *abci.InitChainRequest) (*abci.InitChainResponse, error) {
	doc, err := genesis.Parse(req.AppStateBytes)
	if err != nil {
		return nil, err
	}
	// CometBFT always passes its consensus params; tests may leave them out.
	if cp := req.ConsensusParams; cp != nil && cp.Evidence != nil {
		if err := doc.Params.Staking.CheckEvidenceAge(cp.Evidence.MaxAgeNumBlocks); err != nil {
			return nil, err
		}
	}
	if req.InitialHeight > 1 {
		a.tree.SetInitialVersion(uint64(req.InitialHeight))
	}
	height := req.InitialHeight - 1
	if height < 0 {
		height = 0
	}
	c := store.NewCache(a.tree)
	if err := initGenesis(c, req.ChainId, doc); err != nil {
		return nil, err
	}
	env := blockEnv{height: uint64(height)}
	for i, tx := range doc.GenTxs {
		if res := a.runTx(c, env, tx, true); res.stage != stageOK {
			return nil, fmt.Errorf("genesis gen_txs[%d]: %s", i, res.log)
		}
	}
	// Validators whose gen_txs set bridge keys make valset 0, the one the
	// contract is deployed with.
	bridge.NewKeeper(bridge.Context{KV: c, Params: doc.Params, ChainID: req.ChainId, Height: uint64(height)}).EndBlock()
	updates := escrow.NewKeeper(c).PowerUpdates(doc.Params.Staking)
	vals := validatorUpdates(updates)
	if len(vals) == 0 {
		return nil, fmt.Errorf("genesis has no validator with power: list validators in app_state or create them with gen_txs (ogpud init and ogpud testnet do)")
	}
	if err := matchValidators(vals, req.Validators); err != nil {
		return nil, err
	}
	c.Write()
	if a.invariants {
		if err := CheckInvariants(a.tree); err != nil {
			return nil, fmt.Errorf("genesis: %w", err)
		}
	}
	// Until the first Commit the mempool checks against the genesis state:
	// a copy, since CheckTx may run beside the first block's writes.
	frozen := store.NewMemTree()
	a.tree.Iterate(nil, nil, func(k, v []byte) bool { frozen.Set(k, v); return false })
	a.checkMu.Lock()
	a.check = store.NewCache(frozen)
	a.committed.Store(nil)
	a.checkHeight = uint64(height) + 1
	a.checkMu.Unlock()
	return &abci.InitChainResponse{AppHash: AppHash(height, a.tree.WorkingHash()), Validators: vals}, nil
}

func validatorUpdates(ups []escrow.PowerUpdate) []abci.ValidatorUpdate {
	out := make([]abci.ValidatorUpdate, len(ups))
	for i, u := range ups {
		out[i] = abci.ValidatorUpdate{Power: u.Power, PubKeyType: "ed25519", PubKeyBytes: u.PubKey}
	}
	return out
}

// matchValidators insists that CometBFT's genesis validators, when
// genesis.json lists any, are the set the app's stakes give.
func matchValidators(app, cmt []abci.ValidatorUpdate) error {
	if len(cmt) == 0 {
		return nil
	}
	if len(cmt) != len(app) {
		return fmt.Errorf("genesis.json lists %d validators, the app_state's stakes give %d: leave genesis.json's validators empty or make them agree", len(cmt), len(app))
	}
	// CometBFT passes its validators sorted by power and address: compare as
	// sets (lookups only; nothing is iterated in map order).
	power := make(map[string]int64, len(cmt))
	for _, v := range cmt {
		power[string(v.PubKeyBytes)] = v.Power
	}
	for _, w := range app {
		if p, ok := power[string(w.PubKeyBytes)]; !ok || p != w.Power {
			return fmt.Errorf("validator %X has power %d from its stake, genesis.json says %d", w.PubKeyBytes, w.Power, p)
		}
	}
	return nil
}

// CheckTx admits a transaction to the mempool if it would succeed on top of
// the committed state and the transactions already admitted: every check of
// FinalizeBlock, and its messages too, so a failing send is refused here with
// nothing charged.
//
// With WithMempool, a new ordinary transaction is first refused while the
// mempool's share for ordinary transactions at its fee is full (S1, see
// mempool.go): a local policy on the mempool's capacity, not a rule of
// validity, so FinalizeBlock does not repeat it. Deadline transactions and
// rechecks (what the mempool already holds) are never refused by it.
func (a *App) CheckTx(_ context.Context, req *abci.CheckTxRequest) (*abci.CheckTxResponse, error) {
	a.checkMu.Lock()
	defer a.checkMu.Unlock()
	var class txClass
	classified := false
	if a.pool.Txs > 0 {
		params := getParams(a.check)
		class, classified = classify(params, req.Tx)
		if classified && !class.deadline && class.multiple > 0 && req.Type != abci.CHECK_TX_TYPE_RECHECK {
			if ok, need := a.admit(int64(len(req.Tx)), class.multiple); !ok {
				return a.busy(params, class, need), nil
			}
		}
	}
	res := a.runTxRecorded(a.check, blockEnv{height: a.checkHeight}, req.Tx, true)
	if classified && res.stage == stageOK && !class.deadline {
		a.ordinary.txs++
		a.ordinary.bytes += int64(len(req.Tx))
	}
	return &abci.CheckTxResponse{
		Code:      res.code,
		Log:       res.log,
		GasWanted: int64(res.gas),
		GasUsed:   int64(res.gas),
		Codespace: res.codespace,
	}, nil
}

// busy refuses an ordinary transaction the mempool has no room for at its
// fee, saying what would get it in.
func (a *App) busy(params genesis.Params, c txClass, need uint64) *abci.CheckTxResponse {
	var err error
	if need > 0 {
		err = types.ErrFeeTooLow.Wrapf("the mempool is busy (%d ordinary transactions, %d bytes, waiting): at %dx the minimum fee there is no room; pay at least %dx the minimum fee (%s per gas), or retry after the next block (result commitments, reveals and votes are always admitted)",
			a.ordinary.txs, a.ordinary.bytes, c.multiple, need, types.FormatAmount(new(uint256.Int).Mul(params.MinGasPrice, uint256.NewInt(need))))
	} else {
		err = types.ErrFeeTooLow.Wrapf("the mempool is busy (%d ordinary transactions, %d bytes, waiting): its space for ordinary transactions is full at any fee; retry after the next block (result commitments, reveals and votes are always admitted)",
			a.ordinary.txs, a.ordinary.bytes)
	}
	return &abci.CheckTxResponse{Code: types.CodeOf(err), Log: err.Error(), Codespace: types.Codespace, GasWanted: int64(c.gas)}
}

// PrepareProposal orders the reaped transactions (deadline transactions
// first, then by fee per gas, each sender's in nonce order: proposalOrder)
// and takes them while they fit the byte limit and, with WithMaxBlockGas,
// the gas limit, dropping those that would be refused outright; with
// WithProposalBudget, only while its time lasts.
//
// Proposals are made and checked between one Commit and the next
// FinalizeBlock, so the working tree is the last committed state.
func (a *App) PrepareProposal(_ context.Context, req *abci.PrepareProposalRequest) (*abci.PrepareProposalResponse, error) {
	a.sigs.prewarm(req.Txs)
	sim := store.NewCache(a.tree)
	env := blockEnv{height: uint64(req.Height)}
	params := getParams(a.tree)
	order, classes := proposalOrder(params, req.Txs)
	// A sender whose transaction is left out loses the rest of its queue:
	// its later nonces cannot run before it (lookups only).
	skipped := make(map[types.Address]bool)
	smallest := params.TxBaseGas + params.MsgGas
	var txs [][]byte
	var size int64
	var gas uint64
	if inj := injection(req.LocalLastCommit); inj != nil && int64(len(inj)) <= req.MaxTxBytes {
		txs = append(txs, inj)
		size += int64(len(inj))
	}
	var start time.Time
	if a.proposalBudget > 0 {
		start = a.now()
	}
	for n, i := range order {
		tx, c := req.Txs[i], classes[i]
		if c.gas > 0 && skipped[c.from] {
			continue
		}
		if a.proposalBudget > 0 && n%16 == 0 && a.now().Sub(start) > a.proposalBudget {
			break // the rest waits for the next block
		}
		if size+int64(len(tx)) > req.MaxTxBytes || (a.maxBlockGas > 0 && gas+c.gas > a.maxBlockGas) {
			if c.gas > 0 {
				skipped[c.from] = true
			}
			if a.maxBlockGas > 0 && a.maxBlockGas-gas < smallest {
				break
			}
			continue
		}
		if res := a.runTxRecorded(sim, env, tx, false); res.stage == stageRejected {
			continue
		}
		txs = append(txs, tx)
		size += int64(len(tx))
		gas += c.gas
	}
	return &abci.PrepareProposalResponse{Txs: txs}, nil
}

// ProcessProposal rejects a proposal holding bytes that are not a
// well-formed transaction for this chain, or, with WithMaxBlockGas, more
// gas than the limit. Any order is accepted, and stateful failures (a spent
// nonce) are not grounds for rejection: FinalizeBlock records them as
// failed.
func (a *App) ProcessProposal(_ context.Context, req *abci.ProcessProposalRequest) (*abci.ProcessProposalResponse, error) {
	a.sigs.prewarm(req.Txs) // for FinalizeBlock, while the votes gather
	params := getParams(a.tree)
	reject := &abci.ProcessProposalResponse{Status: abci.PROCESS_PROPOSAL_STATUS_REJECT}
	var gas uint64
	for i, bz := range req.Txs {
		if isInjected(bz) {
			if i != 0 {
				return reject, nil
			}
			if _, _, _, err := checkInjected(a.tree, string(a.tree.Get(ChainIDKey())), req.Height, bz, req.ProposedLastCommit); err != nil {
				a.logger.Info("proposal rejected: bad injected commit", "height", req.Height, "err", err)
				return reject, nil
			}
			continue
		}
		if uint64(len(bz)) > params.MaxTxBytes {
			return reject, nil
		}
		tx, err := types.DecodeTx(bz)
		if err != nil {
			return reject, nil
		}
		if a.maxBlockGas > 0 {
			// A message that does not decode counts its plain gas (runTx
			// refuses the transaction).
			gas += params.Gas(len(bz), MsgWorks(tx.Body.Msgs))
			if gas > a.maxBlockGas {
				return reject, nil
			}
		}
	}
	return &abci.ProcessProposalResponse{Status: abci.PROCESS_PROPOSAL_STATUS_ACCEPT}, nil
}

// FinalizeBlock executes the decided block: every transaction in order, each
// repeating all CheckTx checks, then the end-of-block work. Writes go to the
// working tree in sorted key order; the returned app hash is its root and the
// height.
func (a *App) FinalizeBlock(_ context.Context, req *abci.FinalizeBlockRequest) (*abci.FinalizeBlockResponse, error) {
	if want := a.tree.Version() + 1; a.tree.Version() > 0 && req.Height != want {
		return nil, fmt.Errorf("finalize block %d: the application is at height %d", req.Height, a.tree.Version())
	}
	a.sigs.prewarm(req.Txs)
	block := store.NewCache(a.tree)
	env := blockEnv{height: uint64(req.Height), hash: req.Hash}
	params := getParams(block)
	var events types.Events
	beginBlock(block, params, env, req, &events)
	results := make([]*abci.ExecTxResult, len(req.Txs))
	for i, tx := range req.Txs {
		if i == 0 && isInjected(tx) {
			results[i] = a.applyInjected(block, params, env, tx, req.DecidedLastCommit)
			continue
		}
		res := a.runTxRecorded(block, env, tx, false)
		results[i] = &abci.ExecTxResult{
			Code:      res.code,
			Log:       res.log,
			GasWanted: int64(res.gas),
			GasUsed:   int64(res.gas),
			Events:    res.events,
			Codespace: res.codespace,
		}
	}
	updates := endBlock(block, params, env, &events)
	// The block's writes into the IAVL tree. CheckTx reads the saved
	// version beside everything else of a block, not beside these (see
	// store.Tree.ReadSnapshot).
	a.checkMu.Lock()
	a.treeMu.Lock()
	block.Write()
	root := a.tree.WorkingHash()
	a.treeMu.Unlock()
	a.checkMu.Unlock()
	if a.invariants {
		if err := CheckInvariants(a.tree); err != nil {
			return nil, fmt.Errorf("block %d: %w", req.Height, err)
		}
	}
	a.pending = req.Height
	return &abci.FinalizeBlockResponse{
		TxResults:        results,
		Events:           events,
		ValidatorUpdates: validatorUpdates(updates),
		AppHash:          AppHash(req.Height, root),
	}, nil
}

// Commit saves the working tree as the block's version and resets the
// mempool's view to it.
//
// It holds checkMu throughout (CometBFT holds its mempool lock through
// Commit anyway): no CheckTx reads a version while it is saved or pruned.
func (a *App) Commit(context.Context, *abci.CommitRequest) (*abci.CommitResponse, error) {
	a.checkMu.Lock()
	defer a.checkMu.Unlock()
	a.treeMu.Lock()
	defer a.treeMu.Unlock()
	_, v, err := a.tree.SaveVersion()
	if err != nil {
		return nil, fmt.Errorf("cannot save state: %w", err)
	}
	if a.pending != 0 && v != a.pending {
		return nil, fmt.Errorf("saved version %d for block %d", v, a.pending)
	}
	a.pending = 0
	a.resetCheckState()
	a.ordinary = poolCount{} // the recheck that follows counts what stays
	a.checkHeight = uint64(v) + 1
	if a.snapshots != nil {
		a.snapshots.Saved(v)
	}
	if a.keepRecent > 0 && v > a.keepRecent {
		if err := a.tree.PruneTo(v - a.keepRecent); err != nil {
			a.logger.Error("cannot prune old state versions", "to", v-a.keepRecent, "err", err)
		}
	}
	return &abci.CommitResponse{}, nil
}

// CheckInvariants runs every invariant over kv: supply, stake totals and
// validator power, job escrow coverage.
func CheckInvariants(kv store.KV) error {
	if err := escrow.SupplyInvariant(kv); err != nil {
		return err
	}
	if err := escrow.StakeInvariant(kv, getParams(kv).Staking); err != nil {
		return err
	}
	if err := market.EscrowInvariant(kv); err != nil {
		return err
	}
	if err := market.ExposureInvariant(kv); err != nil {
		return err
	}
	if err := bridge.Invariant(kv); err != nil {
		return err
	}
	if err := session.Invariant(kv); err != nil {
		return err
	}
	if err := market.PruneInvariant(kv); err != nil {
		return err
	}
	if err := finetune.Invariant(kv); err != nil {
		return err
	}
	return market.StageInvariant(kv)
}
