package chain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	abci "github.com/cometbft/cometbft/abci/types"
	cmtproto "github.com/cometbft/cometbft/api/cometbft/types/v1"
	"github.com/cometbft/cometbft/crypto/ed25519"
	cmttypes "github.com/cometbft/cometbft/types"
	"github.com/ethereum/go-ethereum/rlp"

	"github.com/ogpu-network/ogpu/beacon"
	"github.com/ogpu-network/ogpu/bridge"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// Vote extensions: how the beacon's reveals (package beacon) and the
// bridge's attestations and signatures (package bridge) reach the state
// machine. An extension is a VoteExtension envelope holding either part;
// a bare bridge extension (its version byte first) is a bridge part alone.
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

// WithExtender makes the app ask e for its vote extensions' bridge part.
func WithExtender(e Extender) Option { return func(a *App) { a.extender = e } }

// BeaconSigner makes this validator's beacon reveal for the block at
// height (node.BeaconSeed): a registration until committed holds its
// record, then its chain's value of the height; nil when it has none
// (not a validator, its seed unreadable). committed is the last
// committed state, read-only.
type BeaconSigner interface {
	Reveal(height int64, committed store.KV) *beacon.Reveal
}

// WithBeacon makes the app add s's reveals to its vote extensions.
func WithBeacon(s BeaconSigner) Option { return func(a *App) { a.beacon = s } }

// VoteExtension is the envelope of a vote extension: the beacon reveal
// (beacon.Reveal encoded, empty for none) and the bridge part
// (bridge.Extension encoded, empty for none). Its RLP list starts with a
// byte ≥ 0xc0, which a bare bridge extension (version 1) never does.
type VoteExtension struct {
	Beacon []byte
	Bridge []byte
}

// Bounds of an extension's parts.
const (
	maxBeaconPart = 128
)

// decodeVoteExtension splits an extension into its parts (either nil),
// checking each; bridgeOn says whether a bridge part may be present.
func decodeVoteExtension(bz []byte, bridgeOn bool) (*beacon.Reveal, *bridge.Extension, error) {
	if len(bz) == 0 {
		return nil, nil, nil
	}
	var env VoteExtension
	if bz[0] < 0xc0 {
		env.Bridge = bz // a bare bridge extension
	} else {
		if err := rlp.DecodeBytes(bz, &env); err != nil {
			return nil, nil, fmt.Errorf("vote extension does not decode: %w", err)
		}
		if enc, _ := rlp.EncodeToBytes(&env); !bytes.Equal(enc, bz) {
			return nil, nil, errors.New("vote extension is not in canonical form")
		}
	}
	var rv *beacon.Reveal
	if len(env.Beacon) > 0 {
		if len(env.Beacon) > maxBeaconPart {
			return nil, nil, fmt.Errorf("beacon part of %d bytes, at most %d", len(env.Beacon), maxBeaconPart)
		}
		var err error
		if rv, err = beacon.DecodeReveal(env.Beacon); err != nil {
			return nil, nil, err
		}
	}
	var ext *bridge.Extension
	if len(env.Bridge) > 0 {
		if !bridgeOn {
			return nil, nil, errors.New("a bridge part while the bridge is off")
		}
		var err error
		if ext, err = bridge.DecodeExtension(env.Bridge); err != nil {
			return nil, nil, err
		}
	}
	return rv, ext, nil
}

// ExtendVote returns this validator's extension: its beacon reveal (with
// WithBeacon) and, when the bridge is on and an Extender is set, its
// bridge part; empty when it has neither.
func (a *App) ExtendVote(ctx context.Context, req *abci.ExtendVoteRequest) (*abci.ExtendVoteResponse, error) {
	// Before the first Commit there is no committed state to report on.
	if (a.extender == nil && a.beacon == nil) || a.tree.Version() == 0 {
		return &abci.ExtendVoteResponse{}, nil
	}
	snap, err := a.tree.Snapshot(0)
	if err != nil || snap.Version() == 0 {
		return &abci.ExtendVoteResponse{}, nil
	}
	var env VoteExtension
	bridgeOn := getParams(snap).Bridge != nil
	if a.extender != nil && bridgeOn {
		env.Bridge = a.extend(ctx, req.Height, snap)
		if _, err := bridge.DecodeExtension(env.Bridge); err != nil {
			a.logger.Error("own bridge extension is malformed: sending none", "err", err)
			env.Bridge = nil
		}
	}
	if a.beacon != nil {
		if rv := a.beacon.Reveal(req.Height, snap); rv != nil {
			env.Beacon = rv.Encode()
		}
	}
	if len(env.Beacon) == 0 && len(env.Bridge) == 0 {
		return &abci.ExtendVoteResponse{}, nil
	}
	bz, err := rlp.EncodeToBytes(&env)
	if err != nil {
		return &abci.ExtendVoteResponse{}, nil
	}
	return &abci.ExtendVoteResponse{VoteExtension: bz}, nil
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

// VerifyVoteExtension accepts an empty extension always, and a non-empty
// one whose parts decode within the limits (a bridge part only when the
// bridge is on). It looks at nothing else: what an extension claims is
// judged when a block carries it, and refusing too eagerly would cost
// liveness.
func (a *App) VerifyVoteExtension(_ context.Context, req *abci.VerifyVoteExtensionRequest) (*abci.VerifyVoteExtensionResponse, error) {
	accept := &abci.VerifyVoteExtensionResponse{Status: abci.VERIFY_VOTE_EXTENSION_STATUS_ACCEPT}
	if len(req.VoteExtension) == 0 {
		return accept, nil
	}
	if _, _, err := decodeVoteExtension(req.VoteExtension, getParams(a.tree).Bridge != nil); err != nil {
		return &abci.VerifyVoteExtensionResponse{Status: abci.VERIFY_VOTE_EXTENSION_STATUS_REJECT}, nil
	}
	return accept, nil
}

// injection returns the transaction carrying the proposer's extended
// commit, or nil when it carries no extension.
func injection(info abci.ExtendedCommitInfo) []byte {
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

// IsInjected reports whether a block's transaction is the injected
// extended commit (the validators' vote extensions: beacon values, bridge
// attestations) rather than a signed transaction. Readers of blocks skip
// it: it pays no fee and has no sender.
func IsInjected(tx []byte) bool { return isInjected(tx) }

// beaconVote is one validator's beacon reveal in an injected commit.
type beaconVote struct {
	op     types.Address
	reveal *beacon.Reveal
}

// checkInjected decodes an injected extended commit and checks it against
// the real last commit of the block at height (see the file comment). It
// returns the votes resolved for the bridge, the commit's total power and
// the beacon reveals in the commit's order.
func checkInjected(r store.KV, chainID string, height int64, tx []byte, last abci.CommitInfo) ([]bridge.Vote, int64, []beaconVote, error) {
	bridgeOn := getParams(r).Bridge != nil
	var reveals []beaconVote
	var info abci.ExtendedCommitInfo
	if err := info.Unmarshal(tx[len(InjectedPrefix):]); err != nil {
		return nil, 0, nil, fmt.Errorf("injected commit does not decode: %w", err)
	}
	if info.Round != last.Round || len(info.Votes) != len(last.Votes) {
		return nil, 0, nil, fmt.Errorf("injected commit has round %d and %d votes, the last commit round %d and %d votes", info.Round, len(info.Votes), last.Round, len(last.Votes))
	}
	ek := escrow.NewKeeper(r)
	ops := operatorsByConsAddress(ek)
	votes := make([]bridge.Vote, len(info.Votes))
	var total int64
	for i, v := range info.Votes {
		w := last.Votes[i]
		if !bytes.Equal(v.Validator.Address, w.Validator.Address) || v.Validator.Power != w.Validator.Power || v.BlockIdFlag != w.BlockIdFlag {
			return nil, 0, nil, fmt.Errorf("injected vote %d (%X, power %d, flag %d) is not the last commit's (%X, power %d, flag %d)",
				i, v.Validator.Address, v.Validator.Power, v.BlockIdFlag, w.Validator.Address, w.Validator.Power, w.BlockIdFlag)
		}
		total += v.Validator.Power
		votes[i] = bridge.Vote{Power: v.Validator.Power, Ext: &bridge.Extension{}}
		if v.BlockIdFlag != cmtproto.BlockIDFlagCommit {
			if len(v.VoteExtension) > 0 || len(v.ExtensionSignature) > 0 {
				return nil, 0, nil, fmt.Errorf("injected vote %d did not precommit the block but carries an extension", i)
			}
			continue
		}
		op, ok := ops[[20]byte(padAddr(v.Validator.Address))]
		if !ok {
			return nil, 0, nil, fmt.Errorf("injected vote %d: validator %X is unknown", i, v.Validator.Address)
		}
		val, _ := ek.GetValidator(op)
		sign := cmttypes.VoteExtensionSignBytes(chainID, &cmtproto.Vote{Extension: v.VoteExtension, Height: height - 1, Round: info.Round})
		if len(val.PubKey) != ed25519.PubKeySize || !ed25519.PubKey(val.PubKey).VerifySignature(sign, v.ExtensionSignature) {
			return nil, 0, nil, fmt.Errorf("injected vote %d: the extension signature of %s is not valid", i, val.Name)
		}
		rv, ext, err := decodeVoteExtension(v.VoteExtension, bridgeOn)
		if err != nil {
			return nil, 0, nil, fmt.Errorf("injected vote %d (%s): %w", i, val.Name, err)
		}
		if ext == nil {
			ext = &bridge.Extension{}
		}
		if rv != nil {
			reveals = append(reveals, beaconVote{op, rv})
		}
		votes[i] = bridge.Vote{Operator: op, Known: true, Power: v.Validator.Power, Ext: ext}
	}
	return votes, total, reveals, nil
}

// applyInjected checks the block's injected commit again, applies its
// beacon reveals (of the extensions' height, env.height − 1) and hands its
// votes to the bridge when it is on. A commit that fails the check (which
// ProcessProposal would have refused) changes nothing.
func (a *App) applyInjected(kv store.KV, params genesis.Params, env blockEnv, tx []byte, last abci.CommitInfo) *abci.ExecTxResult {
	chainID := string(kv.Get(ChainIDKey()))
	votes, total, reveals, err := checkInjected(kv, chainID, int64(env.height), tx, last)
	if err != nil {
		return &abci.ExecTxResult{Code: 1, Codespace: "vote_extensions", Log: err.Error()}
	}
	var evs types.Events
	bk := beacon.NewKeeper(kv, &evs)
	var refused []string
	for _, rv := range reveals {
		if why := bk.Apply(rv.op, env.height-1, rv.reveal); why != "" {
			refused = append(refused, rv.op.Hex()+": "+why)
		}
	}
	if params.Bridge != nil {
		bridge.NewKeeper(bridge.Context{KV: kv, Params: params, ChainID: chainID, Height: env.height, Events: &evs}).ApplyVotes(votes, total)
	}
	return &abci.ExecTxResult{Events: evs, Log: strings.Join(refused, "; ")}
}
