package chain

import (
	"bytes"
	"context"
	"fmt"

	abci "github.com/cometbft/cometbft/abci/types"
	cmtproto "github.com/cometbft/cometbft/api/cometbft/types/v1"
	"github.com/cometbft/cometbft/crypto/ed25519"
	cmttypes "github.com/cometbft/cometbft/types"

	"github.com/ogpu-network/ogpu/bridge"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// Vote extensions: how the bridge's attestations and signatures reach the
// state machine (package bridge says what they contain).
//
// CometBFT asks each validator for an extension before it precommits a
// block (ExtendVote: may read the validator's Ethereum node, so it is not
// deterministic), checks it on receipt (VerifyVoteExtension: deterministic,
// only the form), and hands the extensions of height h-1 to the proposer of
// h alone (PrepareProposal's local_last_commit). The state machine must
// not depend on what one node saw, so the proposer injects that extended
// commit as the block's first transaction (InjectedPrefix + its protobuf),
// and every node checks it against the real last commit CometBFT gives it
// (ProcessProposal's proposed_last_commit, FinalizeBlock's
// decided_last_commit): the same round, the same validators in the same
// order with the same power and flag, and for every validator that
// precommitted the block a valid ed25519 extension signature by its
// consensus key over CometBFT's canonical extension sign bytes. A proposer
// therefore cannot forge, alter or strip a validator's extension, invent a
// vote, or change a power; it can only leave the whole commit out, which
// delays the bridge by one block (every validator reports again at the
// next height) and steals nothing. FinalizeBlock repeats the check (a
// node catching up by block sync never ran ProcessProposal) and ignores
// an injected commit that fails it.

// InjectedPrefix starts the injected extended commit. It can never start
// a transaction (those are RLP lists: first byte ≥ 0xc0).
var InjectedPrefix = []byte("ogpu/extended-commit/v1\x00")

// Extender makes this validator's vote extension for the block at height:
// the bridge sidecar (node/ethbridge), which reads the validator's own
// Ethereum node. committed is the last committed state, read-only. It must
// answer quickly and return nil when it has nothing or cannot tell
// (its Ethereum node is down): an empty extension is always valid.
type Extender interface {
	Extension(ctx context.Context, height int64, committed store.Reader) []byte
}

// WithExtender makes the app ask e for its vote extensions.
func WithExtender(e Extender) Option { return func(a *App) { a.extender = e } }

// ExtendVote returns this validator's extension: empty unless the bridge
// is on and an Extender is set.
func (a *App) ExtendVote(ctx context.Context, req *abci.ExtendVoteRequest) (*abci.ExtendVoteResponse, error) {
	// Before the first Commit there is no committed state to report on.
	if a.extender == nil || a.tree.Version() == 0 || getParams(a.tree).Bridge == nil {
		return &abci.ExtendVoteResponse{}, nil
	}
	snap, err := a.tree.Snapshot(0)
	if err != nil || snap.Version() == 0 {
		return &abci.ExtendVoteResponse{}, nil
	}
	ext := a.extend(ctx, req.Height, snap)
	if _, err := bridge.DecodeExtension(ext); err != nil {
		a.logger.Error("own vote extension is malformed: sending none", "err", err)
		ext = nil
	}
	return &abci.ExtendVoteResponse{VoteExtension: ext}, nil
}

// extend asks the extender, which talks to an Ethereum node: whatever goes
// wrong there (a panic included) costs this validator its extension, never
// its precommit.
func (a *App) extend(ctx context.Context, height int64, snap store.KV) (ext []byte) {
	defer func() {
		if r := recover(); r != nil {
			a.logger.Error("vote extender panicked: sending none", "panic", r)
			ext = nil
		}
	}()
	return a.extender.Extension(ctx, height, snap)
}

// VerifyVoteExtension accepts an empty extension always and a non-empty
// one when the bridge is on and it decodes within the limits. It looks at
// nothing else: what an extension claims is judged when a block carries
// it, and refusing too eagerly would cost liveness.
func (a *App) VerifyVoteExtension(_ context.Context, req *abci.VerifyVoteExtensionRequest) (*abci.VerifyVoteExtensionResponse, error) {
	accept := &abci.VerifyVoteExtensionResponse{Status: abci.VERIFY_VOTE_EXTENSION_STATUS_ACCEPT}
	if len(req.VoteExtension) == 0 {
		return accept, nil
	}
	if getParams(a.tree).Bridge == nil {
		return &abci.VerifyVoteExtensionResponse{Status: abci.VERIFY_VOTE_EXTENSION_STATUS_REJECT}, nil
	}
	if _, err := bridge.DecodeExtension(req.VoteExtension); err != nil {
		return &abci.VerifyVoteExtensionResponse{Status: abci.VERIFY_VOTE_EXTENSION_STATUS_REJECT}, nil
	}
	return accept, nil
}

// injection returns the transaction carrying the proposer's extended
// commit, or nil when it carries no extension (or the bridge is off).
func injection(params bool, info abci.ExtendedCommitInfo) []byte {
	if !params {
		return nil
	}
	any := false
	for _, v := range info.Votes {
		any = any || len(v.VoteExtension) > 0
	}
	if !any {
		return nil
	}
	bz, err := info.Marshal()
	if err != nil {
		return nil
	}
	return append(append([]byte(nil), InjectedPrefix...), bz...)
}

// isInjected reports whether tx is an injected extended commit.
func isInjected(tx []byte) bool { return bytes.HasPrefix(tx, InjectedPrefix) }

// checkInjected decodes an injected extended commit and checks it against
// the real last commit of the block at height (see the file comment). It
// returns the votes resolved for the bridge and the commit's total power.
func checkInjected(r store.KV, chainID string, height int64, tx []byte, last abci.CommitInfo) ([]bridge.Vote, int64, error) {
	var info abci.ExtendedCommitInfo
	if err := info.Unmarshal(tx[len(InjectedPrefix):]); err != nil {
		return nil, 0, fmt.Errorf("injected commit does not decode: %w", err)
	}
	if info.Round != last.Round || len(info.Votes) != len(last.Votes) {
		return nil, 0, fmt.Errorf("injected commit has round %d and %d votes, the last commit round %d and %d votes", info.Round, len(info.Votes), last.Round, len(last.Votes))
	}
	ek := escrow.NewKeeper(r)
	ops := operatorsByConsAddress(ek)
	votes := make([]bridge.Vote, len(info.Votes))
	var total int64
	for i, v := range info.Votes {
		w := last.Votes[i]
		if !bytes.Equal(v.Validator.Address, w.Validator.Address) || v.Validator.Power != w.Validator.Power || v.BlockIdFlag != w.BlockIdFlag {
			return nil, 0, fmt.Errorf("injected vote %d (%X, power %d, flag %d) is not the last commit's (%X, power %d, flag %d)",
				i, v.Validator.Address, v.Validator.Power, v.BlockIdFlag, w.Validator.Address, w.Validator.Power, w.BlockIdFlag)
		}
		total += v.Validator.Power
		votes[i] = bridge.Vote{Power: v.Validator.Power, Ext: &bridge.Extension{}}
		if v.BlockIdFlag != cmtproto.BlockIDFlagCommit {
			if len(v.VoteExtension) > 0 || len(v.ExtensionSignature) > 0 {
				return nil, 0, fmt.Errorf("injected vote %d did not precommit the block but carries an extension", i)
			}
			continue
		}
		op, ok := ops[[20]byte(padAddr(v.Validator.Address))]
		if !ok {
			return nil, 0, fmt.Errorf("injected vote %d: validator %X is unknown", i, v.Validator.Address)
		}
		val, _ := ek.GetValidator(op)
		sign := cmttypes.VoteExtensionSignBytes(chainID, &cmtproto.Vote{Extension: v.VoteExtension, Height: height - 1, Round: info.Round})
		if len(val.PubKey) != ed25519.PubKeySize || !ed25519.PubKey(val.PubKey).VerifySignature(sign, v.ExtensionSignature) {
			return nil, 0, fmt.Errorf("injected vote %d: the extension signature of %s is not valid", i, val.Name)
		}
		ext, err := bridge.DecodeExtension(v.VoteExtension)
		if err != nil {
			return nil, 0, fmt.Errorf("injected vote %d (%s): %w", i, val.Name, err)
		}
		votes[i] = bridge.Vote{Operator: op, Known: true, Power: v.Validator.Power, Ext: ext}
	}
	return votes, total, nil
}

// applyInjected checks the block's injected commit again and hands its
// votes to the bridge. A commit that fails the check (which
// ProcessProposal would have refused) changes nothing.
func (a *App) applyInjected(kv store.KV, params genesis.Params, env blockEnv, tx []byte, last abci.CommitInfo) *abci.ExecTxResult {
	if params.Bridge == nil {
		return &abci.ExecTxResult{Code: 1, Codespace: "bridge", Log: "injected commit while the bridge is off"}
	}
	chainID := string(kv.Get(ChainIDKey()))
	votes, total, err := checkInjected(kv, chainID, int64(env.height), tx, last)
	if err != nil {
		return &abci.ExecTxResult{Code: 1, Codespace: "bridge", Log: err.Error()}
	}
	var evs types.Events
	bridge.NewKeeper(bridge.Context{KV: kv, Params: params, ChainID: chainID, Height: env.height, Events: &evs}).ApplyVotes(votes, total)
	return &abci.ExecTxResult{Events: evs}
}
