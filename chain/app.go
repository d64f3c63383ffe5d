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

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/cometbft/cometbft/libs/log"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// AppVersion is the version of the state machine's rules, reported to
// CometBFT. Any change that can change an app hash bumps it.
const AppVersion uint64 = 3

// Version is the software version.
const Version = "0.1.0"

// App is the ABCI application. CometBFT's local client serializes every call
// to it, so it needs no locking of its own.
type App struct {
	abci.BaseApplication

	tree   *store.Tree
	logger log.Logger

	// check is the mempool's view: the last committed state plus the
	// transactions CheckTx accepted since.
	check *store.Cache
	// checkHeight is the height CheckTx assumes: the next block's.
	checkHeight uint64
	// pending holds the height FinalizeBlock ran for, until Commit.
	pending int64

	invariants bool
}

// Option configures an App.
type Option func(*App)

// WithInvariants makes the app check every invariant after every block and
// refuse to go on (halting the node) if one breaks. Tests turn it on.
func WithInvariants() Option { return func(a *App) { a.invariants = true } }

// WithLogger sets the logger.
func WithLogger(l log.Logger) Option { return func(a *App) { a.logger = l } }

// NewApp returns the application over tree, which holds the committed state.
func NewApp(tree *store.Tree, opts ...Option) *App {
	a := &App{tree: tree, logger: log.NewNopLogger()}
	for _, o := range opts {
		o(a)
	}
	a.resetCheckState()
	a.checkHeight = uint64(tree.Version()) + 1
	return a
}

func (a *App) resetCheckState() {
	snap, err := a.tree.Snapshot(0)
	if err != nil {
		panic(err) // the latest version always exists
	}
	a.check = store.NewCache(snap)
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
	// Until the first Commit the mempool checks against the genesis state.
	a.check = store.NewCache(a.tree)
	a.checkHeight = uint64(height) + 1
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
func (a *App) CheckTx(_ context.Context, req *abci.CheckTxRequest) (*abci.CheckTxResponse, error) {
	res := a.runTx(a.check, blockEnv{height: a.checkHeight}, req.Tx, true)
	return &abci.CheckTxResponse{
		Code:      res.code,
		Log:       res.log,
		GasWanted: int64(res.gas),
		GasUsed:   int64(res.gas),
		Codespace: res.codespace,
	}, nil
}

// PrepareProposal drops from the proposal the transactions that would be
// refused outright, up to the byte limit.
//
// Proposals are made and checked between one Commit and the next
// FinalizeBlock, so the working tree is the last committed state.
func (a *App) PrepareProposal(_ context.Context, req *abci.PrepareProposalRequest) (*abci.PrepareProposalResponse, error) {
	sim := store.NewCache(a.tree)
	env := blockEnv{height: uint64(req.Height)}
	var txs [][]byte
	var size int64
	for _, tx := range req.Txs {
		if size+int64(len(tx)) > req.MaxTxBytes {
			break
		}
		if res := a.runTx(sim, env, tx, false); res.stage == stageRejected {
			continue
		}
		txs = append(txs, tx)
		size += int64(len(tx))
	}
	return &abci.PrepareProposalResponse{Txs: txs}, nil
}

// ProcessProposal rejects a proposal holding bytes that are not a
// well-formed transaction for this chain. Stateful failures (a spent nonce)
// are not grounds for rejection: FinalizeBlock records them as failed.
func (a *App) ProcessProposal(_ context.Context, req *abci.ProcessProposalRequest) (*abci.ProcessProposalResponse, error) {
	params := getParams(a.tree)
	for _, bz := range req.Txs {
		if uint64(len(bz)) > params.MaxTxBytes {
			return &abci.ProcessProposalResponse{Status: abci.PROCESS_PROPOSAL_STATUS_REJECT}, nil
		}
		if _, err := types.DecodeTx(bz); err != nil {
			return &abci.ProcessProposalResponse{Status: abci.PROCESS_PROPOSAL_STATUS_REJECT}, nil
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
	block := store.NewCache(a.tree)
	env := blockEnv{height: uint64(req.Height), hash: req.Hash}
	params := getParams(block)
	var events types.Events
	beginBlock(block, params, env, req, &events)
	results := make([]*abci.ExecTxResult, len(req.Txs))
	for i, tx := range req.Txs {
		res := a.runTx(block, env, tx, false)
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
	block.Write()
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
		AppHash:          AppHash(req.Height, a.tree.WorkingHash()),
	}, nil
}

// Commit saves the working tree as the block's version and resets the
// mempool's view to it.
func (a *App) Commit(context.Context, *abci.CommitRequest) (*abci.CommitResponse, error) {
	_, v, err := a.tree.SaveVersion()
	if err != nil {
		return nil, fmt.Errorf("cannot save state: %w", err)
	}
	if a.pending != 0 && v != a.pending {
		return nil, fmt.Errorf("saved version %d for block %d", v, a.pending)
	}
	a.pending = 0
	a.resetCheckState()
	a.checkHeight = uint64(v) + 1
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
	return market.StageInvariant(kv)
}
