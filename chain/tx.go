package chain

import (
	"crypto/sha256"
	"fmt"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/bridge"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/finetune"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/session"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// txStage says how far a transaction got.
type txStage int

const (
	// stageRejected: refused before any state change (malformed, bad
	// signature, wrong chain, nonce, fee). Not includable.
	stageRejected txStage = iota
	// stageFailed: fee paid and nonce used, but a message failed and its
	// effects were reverted.
	stageFailed
	// stageOK: everything applied.
	stageOK
)

type txResult struct {
	stage     txStage
	code      uint32
	codespace string
	log       string
	gas       uint64
	events    []abci.Event
	// fee is what the sender paid (nil: nothing), for the fee pool
	// (runTx).
	fee *uint256.Int
}

func fail(stage txStage, gas uint64, err error) txResult {
	return txResult{stage: stage, code: types.CodeOf(err), codespace: types.Codespace, log: err.Error(), gas: gas}
}

// blockEnv is what a message handler knows of the block it runs in. In
// CheckTx it is the next block (the last committed height + 1, no hash).
type blockEnv struct {
	height uint64
	hash   []byte
}

// handler applies one decoded message.
type handler func(kv store.KV, env blockEnv, from types.Address) ([]abci.Event, error)

// marketHandler adapts a market keeper method to a handler.
func marketHandler(fn func(k *market.Keeper, from types.Address) error) handler {
	return func(kv store.KV, env blockEnv, from types.Address) ([]abci.Event, error) {
		var evs types.Events
		k := market.NewKeeper(market.Context{KV: kv, Height: env.height, BlockHash: env.hash, Params: getParams(kv), Events: &evs, ChainID: string(kv.Get(ChainIDKey()))})
		if err := fn(k, from); err != nil {
			return nil, err
		}
		return evs, nil
	}
}

// escrowHandler adapts a staking operation to a handler.
func escrowHandler(fn func(k escrow.Keeper, p genesis.Params, env blockEnv, from types.Address, evs *types.Events) error) handler {
	return func(kv store.KV, env blockEnv, from types.Address) ([]abci.Event, error) {
		var evs types.Events
		if err := fn(escrow.NewKeeper(kv), getParams(kv), env, from, &evs); err != nil {
			return nil, err
		}
		return evs, nil
	}
}

// decode runs a message decoder and wraps its result in a handler.
func decode[M any](data []byte, dec func([]byte) (M, error), h func(M) handler) (handler, error) {
	m, err := dec(data)
	if err != nil {
		return nil, err
	}
	return h(m), nil
}

// MsgWorks is the work of each message for the fee (genesis.Params.Gas),
// from the messages alone: what a client computes its fee with. A message
// that does not decode counts as a plain one (the transaction is refused).
func MsgWorks(msgs []types.RawMsg) []genesis.MsgWork {
	out := make([]genesis.MsgWork, len(msgs))
	for i, m := range msgs {
		_, out[i], _ = decodeMsg(m)
	}
	return out
}

// decodeMsg turns a raw message into its handler and the work it causes,
// checking everything that can be checked without state.
func decodeMsg(m types.RawMsg) (handler, genesis.MsgWork, error) {
	var work genesis.MsgWork
	h, err := decodeHandler(m, &work)
	return h, work, err
}

// bidWork is a bid's or claim's: its eligibility check compares up to every
// requirement of the job with every attribute of the provider, in CheckTx
// and again at the close. It is charged at the bound (genesis.WorkGas).
var bidWork = genesis.MsgWork{Matches: genesis.MaxWorkMatches}

// revealWork is a sealed bid's reveal: the auction ranks at the reveal
// (market's leaders list), so the reveal checks its provider's
// eligibility, charged like a bid's matching at the bound, and inserts
// the bid into its stage's leaders list (at most 3r + 1 entries, r <=
// max_redundancy; a split job's r more per other stage, at most
// max_bids_per_stage), pushing out and refunding at most one bid: one
// slot's gas (slot_gas) for that, as the close paid per slot before.
var revealWork = genesis.MsgWork{Matches: genesis.MaxWorkMatches, Slots: 1}

// claimWork is a pool claim's: a bid's matching, and the award of its task
// if it is the r-th eligible claim (market.fillTask: the eligibility checks
// of the r-1 earlier claims and the task's r slots). Every claim pays the
// award at its bound (max_redundancy), computed from the message alone:
// whether a claim awards depends on the state, and CheckTx, FinalizeBlock
// and the client must agree on the fee.
var claimWork = genesis.MsgWork{Matches: genesis.MaxWorkMatches, Awards: 1}

// handoffWork is a hand-off proof's: one secp256k1 recovery, the cost the
// transaction's own signature has (tx_base_gas), charged like a bid's
// matching at the bound (4,096 × match_gas ≈ tx_base_gas by default)
// rather than with a parameter of its own.
var handoffWork = genesis.MsgWork{Matches: genesis.MaxWorkMatches}

// replaceWork is a split stage replacement's: the eligibility check of
// the backup that takes the slot, charged like a bid's matching at the
// bound. Backups passed over are mostly refused by the cheap checks
// before the matching (jailed, a slot held), and there are at most
// max_bids_per_stage of them; the deadlines it moves are the job's own
// (the post paid stage_gas for them), at most MaxSplitReplacements times.
var replaceWork = genesis.MsgWork{Matches: genesis.MaxWorkMatches}

// keyProofWork is a bridge key's proof of possession: one secp256k1
// recovery, charged like a hand-off proof.
var keyProofWork = genesis.MsgWork{Matches: genesis.MaxWorkMatches}

// bridgeHandler adapts a bridge keeper method to a handler.
func bridgeHandler(fn func(k *bridge.Keeper, from types.Address) error) handler {
	return func(kv store.KV, env blockEnv, from types.Address) ([]abci.Event, error) {
		var evs types.Events
		k := bridge.NewKeeper(bridge.Context{KV: kv, Params: getParams(kv), ChainID: string(kv.Get(ChainIDKey())), Height: env.height, Events: &evs})
		if err := fn(k, from); err != nil {
			return nil, err
		}
		return evs, nil
	}
}

// sessionContext is the session keeper's context: the chain's parameters,
// and the market's provider records for a proven fraud (jail and
// tombstone).
func sessionContext(kv store.KV, env blockEnv, evs *types.Events) session.Context {
	chainID, p := string(kv.Get(ChainIDKey())), getParams(kv)
	return session.Context{KV: kv, ChainID: chainID, Height: env.height, Events: evs, Params: p,
		Fraud: func(provider types.Address, reason string) {
			market.NewKeeper(market.Context{KV: kv, Height: env.height, BlockHash: env.hash, Params: p, Events: evs, ChainID: chainID}).SessionFraud(provider, reason)
		},
		Pruned: func(id uint64) bool { return market.Pruned(kv, id) }}
}

// disputeWork is a session dispute's: two secp256k1 recoveries (the
// request's and the receipt's signatures) per receipt.
func disputeWork(receipts int) genesis.MsgWork {
	return genesis.MsgWork{Sigs: 2 * uint64(receipts)}
}

// sessionHandler adapts a session keeper method to a handler.
func sessionHandler(fn func(k *session.Keeper, from types.Address) error) handler {
	return func(kv store.KV, env blockEnv, from types.Address) ([]abci.Event, error) {
		var evs types.Events
		k := session.NewKeeper(sessionContext(kv, env, &evs))
		if err := fn(k, from); err != nil {
			return nil, err
		}
		return evs, nil
	}
}

func decodeHandler(m types.RawMsg, work *genesis.MsgWork) (handler, error) {
	switch m.Type {
	case types.MsgTypeSend:
		return decode(m.Data, escrow.DecodeMsgSend, func(msg *escrow.MsgSend) handler {
			return func(kv store.KV, _ blockEnv, from types.Address) ([]abci.Event, error) {
				if err := escrow.NewKeeper(kv).Send(from, msg.To, msg.Amount); err != nil {
					return nil, err
				}
				return []abci.Event{EventTransfer{From: from, To: msg.To, Amount: msg.Amount}.ABCI()}, nil
			}
		})
	case types.MsgTypeCreateValidator:
		return decode(m.Data, escrow.DecodeMsgCreateValidator, func(msg *escrow.MsgCreateValidator) handler {
			return escrowHandler(func(k escrow.Keeper, p genesis.Params, _ blockEnv, from types.Address, evs *types.Events) error {
				if err := k.CreateValidator(p.Staking, from, msg.Name, msg.PubKey, msg.SelfBond); err != nil {
					return err
				}
				evs.Emit(escrow.EventValidatorCreated{Operator: from, Name: msg.Name, PubKey: fmt.Sprintf("%X", msg.PubKey), SelfBond: msg.SelfBond})
				return nil
			})
		})
	case types.MsgTypeUnjailValidator:
		return decode(m.Data, escrow.DecodeMsgUnjailValidator, func(*escrow.MsgUnjailValidator) handler {
			return escrowHandler(func(k escrow.Keeper, p genesis.Params, env blockEnv, from types.Address, evs *types.Events) error {
				if err := k.Unjail(p.Staking, from, env.height); err != nil {
					return err
				}
				evs.Emit(escrow.EventValidatorUnjailed{Operator: from})
				return nil
			})
		})
	case types.MsgTypeBond:
		return decode(m.Data, escrow.DecodeMsgBond, func(msg *escrow.MsgBond) handler {
			return escrowHandler(func(k escrow.Keeper, p genesis.Params, _ blockEnv, from types.Address, evs *types.Events) error {
				if err := k.CheckBondSlot(p.Staking, from, msg.Amount); err != nil {
					return err
				}
				if err := k.Bond(from, msg.Amount); err != nil {
					return err
				}
				evs.Emit(escrow.EventBonded{Account: from, Amount: msg.Amount, Bonded: k.Bonded(from)})
				return nil
			})
		})
	case types.MsgTypeUnbond:
		return decode(m.Data, escrow.DecodeMsgUnbond, func(msg *escrow.MsgUnbond) handler {
			return escrowHandler(func(k escrow.Keeper, p genesis.Params, env blockEnv, from types.Address, evs *types.Events) error {
				matures := env.height + p.Staking.UnbondingBlocks
				if err := lastValidatorGuard(k, p, from, msg.Amount); err != nil {
					return err
				}
				if err := k.Unbond(from, msg.Amount, matures); err != nil {
					return err
				}
				evs.Emit(escrow.EventUnbonding{Account: from, Amount: msg.Amount, Matures: matures})
				return nil
			})
		})
	case types.MsgTypeRegisterProvider:
		return decode(m.Data, market.DecodeMsgRegisterProvider, func(msg *market.MsgRegisterProvider) handler {
			return marketHandler(func(k *market.Keeper, from types.Address) error { return k.RegisterProvider(from, &msg.Info, false) })
		})
	case types.MsgTypeUpdateProvider:
		return decode(m.Data, market.DecodeMsgUpdateProvider, func(msg *market.MsgUpdateProvider) handler {
			return marketHandler(func(k *market.Keeper, from types.Address) error { return k.RegisterProvider(from, &msg.Info, true) })
		})
	case types.MsgTypeUnjailProvider:
		return decode(m.Data, market.DecodeMsgUnjailProvider, func(*market.MsgUnjailProvider) handler {
			return marketHandler(func(k *market.Keeper, from types.Address) error { return k.UnjailProvider(from) })
		})
	case types.MsgTypePostJob:
		return decode(m.Data, market.DecodeMsgPostJob, func(msg *market.MsgPostJob) handler {
			*work = genesis.MsgWork{Stages: uint64(msg.Stages), Slots: uint64(msg.Stages) * uint64(msg.Redundancy), Requirements: uint64(len(msg.Req.Attributes))}
			return marketHandler(func(k *market.Keeper, from types.Address) error { _, err := k.PostJob(from, msg); return err })
		})
	case types.MsgTypeCancelJob:
		return decode(m.Data, market.DecodeMsgCancelJob, func(msg *market.MsgCancelJob) handler {
			return marketHandler(func(k *market.Keeper, from types.Address) error { return k.CancelJob(from, msg.Job) })
		})
	case types.MsgTypeCommitBid:
		return decode(m.Data, market.DecodeMsgCommitBid, func(msg *market.MsgCommitBid) handler {
			*work = bidWork
			return marketHandler(func(k *market.Keeper, from types.Address) error { return k.CommitBid(from, msg) })
		})
	case types.MsgTypeRevealBid:
		return decode(m.Data, market.DecodeMsgRevealBid, func(msg *market.MsgRevealBid) handler {
			*work = revealWork
			return marketHandler(func(k *market.Keeper, from types.Address) error { return k.RevealBid(from, msg) })
		})
	case types.MsgTypeClaimTask:
		return decode(m.Data, market.DecodeMsgClaimTask, func(msg *market.MsgClaimTask) handler {
			*work = claimWork
			return marketHandler(func(k *market.Keeper, from types.Address) error { return k.ClaimTask(from, msg) })
		})
	case types.MsgTypeCommitResult:
		return decode(m.Data, verifier.DecodeMsgCommitResult, func(msg *verifier.MsgCommitResult) handler {
			return marketHandler(func(k *market.Keeper, from types.Address) error { return k.CommitResult(from, msg) })
		})
	case types.MsgTypeRevealResult:
		return decode(m.Data, verifier.DecodeMsgRevealResult, func(msg *verifier.MsgRevealResult) handler {
			return marketHandler(func(k *market.Keeper, from types.Address) error { return k.RevealResult(from, msg) })
		})
	case types.MsgTypeVoteDispute:
		return decode(m.Data, verifier.DecodeMsgVoteDispute, func(msg *verifier.MsgVoteDispute) handler {
			return marketHandler(func(k *market.Keeper, from types.Address) error { return k.VoteDispute(from, msg) })
		})
	case types.MsgTypeRevealCanary:
		return decode(m.Data, verifier.DecodeMsgRevealCanary, func(msg *verifier.MsgRevealCanary) handler {
			return marketHandler(func(k *market.Keeper, from types.Address) error { return k.RevealCanary(from, msg) })
		})
	case types.MsgTypeCommitVote:
		return decode(m.Data, verifier.DecodeMsgCommitVote, func(msg *verifier.MsgCommitVote) handler {
			return marketHandler(func(k *market.Keeper, from types.Address) error { return k.CommitVote(from, msg) })
		})
	case types.MsgTypeReportInput:
		return decode(m.Data, verifier.DecodeMsgReportInput, func(msg *verifier.MsgReportInput) handler {
			return marketHandler(func(k *market.Keeper, from types.Address) error { return k.ReportInput(from, msg) })
		})
	case types.MsgTypeRevealTranscript:
		return decode(m.Data, market.DecodeMsgRevealTranscript, func(msg *market.MsgRevealTranscript) handler {
			return marketHandler(func(k *market.Keeper, from types.Address) error { return k.RevealTranscript(from, msg) })
		})
	case types.MsgTypeProveHandoff:
		return decode(m.Data, market.DecodeMsgProveHandoff, func(msg *market.MsgProveHandoff) handler {
			*work = handoffWork
			return marketHandler(func(k *market.Keeper, from types.Address) error { return k.ProveHandoff(from, msg) })
		})
	case types.MsgTypeReplaceStage:
		return decode(m.Data, market.DecodeMsgReplaceStage, func(msg *market.MsgReplaceStage) handler {
			*work = replaceWork
			return marketHandler(func(k *market.Keeper, from types.Address) error { return k.ReplaceStage(from, msg) })
		})
	case types.MsgTypeSetBridgeKey:
		return decode(m.Data, bridge.DecodeMsgSetBridgeKey, func(msg *bridge.MsgSetBridgeKey) handler {
			*work = keyProofWork
			return bridgeHandler(func(k *bridge.Keeper, from types.Address) error { return k.SetKey(from, msg.Key, msg.Proof) })
		})
	case types.MsgTypeBridgeWithdraw:
		return decode(m.Data, bridge.DecodeMsgBridgeWithdraw, func(msg *bridge.MsgBridgeWithdraw) handler {
			return bridgeHandler(func(k *bridge.Keeper, from types.Address) error {
				_, err := k.Withdraw(from, msg.To, msg.Amount)
				return err
			})
		})
	case types.MsgTypeRedeemVoucher:
		return decode(m.Data, session.DecodeMsgRedeemVoucher, func(msg *session.MsgRedeemVoucher) handler {
			*work = keyProofWork // one secp256k1 recovery
			return sessionHandler(func(k *session.Keeper, _ types.Address) error { _, err := k.Redeem(&msg.Voucher, msg.Sig); return err })
		})
	case types.MsgTypeCloseSession:
		return decode(m.Data, session.DecodeMsgCloseSession, func(msg *session.MsgCloseSession) handler {
			return sessionHandler(func(k *session.Keeper, from types.Address) error { return k.Close(from, msg.Session) })
		})
	case types.MsgTypeDisputeSession:
		return decode(m.Data, session.DecodeMsgDisputeSession, func(msg *session.MsgDisputeSession) handler {
			*work = disputeWork(len(msg.Receipts))
			return sessionHandler(func(k *session.Keeper, from types.Address) error { _, err := k.Dispute(from, msg); return err })
		})
	case types.MsgTypeSealSessionVote:
		return decode(m.Data, session.DecodeMsgSealSessionVote, func(msg *session.MsgSealSessionVote) handler {
			return sessionHandler(func(k *session.Keeper, from types.Address) error { return k.SealVote(from, msg) })
		})
	case types.MsgTypeOpenSessionVote:
		return decode(m.Data, session.DecodeMsgOpenSessionVote, func(msg *session.MsgOpenSessionVote) handler {
			return sessionHandler(func(k *session.Keeper, from types.Address) error { return k.OpenVote(from, msg) })
		})
	case types.MsgTypeRevealFinetune:
		return decode(m.Data, market.DecodeMsgRevealFinetune, func(msg *market.MsgRevealFinetune) handler {
			*work = genesis.MsgWork{Matches: msg.Hashes()} // a sha256 priced as a matching comparison
			return marketHandler(func(k *market.Keeper, from types.Address) error { return k.RevealFinetune(from, msg) })
		})
	case types.MsgTypeOpenCheckpoints:
		return decode(m.Data, finetune.DecodeMsgOpenCheckpoints, func(msg *finetune.MsgOpenCheckpoints) handler {
			*work = genesis.MsgWork{Matches: msg.Hashes()}
			return marketHandler(func(k *market.Keeper, from types.Address) error { return k.OpenCheckpoints(from, msg) })
		})
	case types.MsgTypeSealGameVote:
		return decode(m.Data, finetune.DecodeMsgSealGameVote, func(msg *finetune.MsgSealGameVote) handler {
			return marketHandler(func(k *market.Keeper, from types.Address) error { return k.SealGameVote(from, msg) })
		})
	case types.MsgTypeOpenGameVote:
		return decode(m.Data, finetune.DecodeMsgOpenGameVote, func(msg *finetune.MsgOpenGameVote) handler {
			return marketHandler(func(k *market.Keeper, from types.Address) error { return k.OpenGameVote(from, msg) })
		})
	default:
		return nil, types.ErrUnknownMsg.Wrapf("type %d", m.Type)
	}
}

// runTx runs one transaction over kv. In the mempool (atomic == true) a
// failing message refuses the whole transaction. In a block the fee and nonce
// stay spent when a message fails, so that a failing transaction still pays
// for the block space it used, and the messages' writes are dropped.
//
// Every check here runs in CheckTx, PrepareProposal and FinalizeBlock alike.
func (a *App) runTx(kv store.KV, env blockEnv, bz []byte, atomic bool) txResult {
	res := a.execTx(kv, env, bz, atomic)
	escrow.NewKeeper(kv).AddFee(res.fee)
	return res
}

// execTx is runTx but for the fee pool: the fee it charged is in its
// result, and the caller credits it (escrow.Keeper.ChargeFee says why).
func (a *App) execTx(kv store.KV, env blockEnv, bz []byte, atomic bool) txResult {
	params := a.params(kv)
	if uint64(len(bz)) > params.MaxTxBytes {
		return fail(stageRejected, 0, types.ErrTxTooLarge.Wrapf("%d bytes, the limit is %d", len(bz), params.MaxTxBytes))
	}
	// A transaction seen before on this node (the mempool, a proposal) is
	// decoded and verified already (sigcache.go).
	key := sha256.Sum256(bz)
	tx, verified := a.sigs.get(key)
	var err error
	if tx == nil {
		if tx, err = types.DecodeTx(bz); err != nil {
			return fail(stageRejected, 0, err)
		}
	}
	body := &tx.Body
	// Until the messages are decoded, a refusal reports their plain gas.
	gas := params.Gas(len(bz), make([]genesis.MsgWork, len(body.Msgs)))
	if chainID := string(kv.Get(ChainIDKey())); body.ChainID != chainID {
		return fail(stageRejected, gas, types.ErrWrongChainID.Wrapf("transaction is for chain %q, this is %q", body.ChainID, chainID))
	}
	if len(body.Msgs) == 0 {
		return fail(stageRejected, gas, types.ErrNoMsgs)
	}
	if uint64(len(body.Msgs)) > params.MaxMsgs {
		return fail(stageRejected, gas, types.ErrTooManyMsgs.Wrapf("%d messages, the limit is %d", len(body.Msgs), params.MaxMsgs))
	}
	handlers := make([]handler, len(body.Msgs))
	work := make([]genesis.MsgWork, len(body.Msgs))
	for i, m := range body.Msgs {
		if handlers[i], work[i], err = decodeMsg(m); err != nil {
			return fail(stageRejected, gas, fmt.Errorf("message %d: %w", i, err))
		}
	}
	gas = params.Gas(len(bz), work)
	// Cheap stateful checks before the signature (a secp256k1 recovery is
	// the costliest check a refused tx can make a node do for free): the
	// nonce, the fee, and a balance that can pay it. They read the
	// claimed sender's state only to refuse; nothing is written before
	// the signature is verified.
	next := getNonce(kv, body.From)
	switch {
	case body.Nonce < next:
		return fail(stageRejected, gas, types.ErrNonceUsed.Wrapf("nonce %d of %s was already used; the next nonce is %d", body.Nonce, body.From, next))
	case body.Nonce > next:
		return fail(stageRejected, gas, types.ErrNonceAhead.Wrapf("nonce %d of %s is ahead; the next nonce is %d: send the missing nonces first", body.Nonce, body.From, next))
	}
	// The fee is checked before any message runs: cheap checks first.
	if required := params.RequiredFee(len(bz), work); body.Fee.Lt(required) {
		return fail(stageRejected, gas, types.ErrFeeTooLow.Wrapf("fee %s is below the required %s (%d gas at %s per gas)",
			types.FormatAmount(body.Fee), types.FormatAmount(required), gas, params.MinGasPrice.Dec()))
	}
	if bal := escrow.NewKeeper(kv).Balance(body.From); bal.Lt(body.Fee) {
		return fail(stageRejected, gas, fmt.Errorf("cannot pay the fee: %w", types.ErrInsufficientFunds.Wrapf("%s has %s, the fee is %s", body.From, types.FormatAmount(bal), types.FormatAmount(body.Fee))))
	}
	if !verified {
		if err := tx.VerifySignature(); err != nil {
			return fail(stageRejected, gas, err)
		}
		a.sigs.add(key, len(bz), tx)
	}

	ante := store.NewCache(kv)
	if err := escrow.NewKeeper(ante).ChargeFee(body.From, body.Fee); err != nil {
		return fail(stageRejected, gas, fmt.Errorf("cannot pay the fee: %w", err))
	}
	setNonce(ante, body.From, next+1)
	events := []abci.Event{EventTx{From: body.From, Nonce: body.Nonce, Fee: body.Fee}.ABCI()}

	msgs := store.NewCache(ante)
	for i, h := range handlers {
		ev, err := h(msgs, env, body.From)
		if err != nil {
			err = fmt.Errorf("message %d: %w", i, err)
			if atomic {
				return fail(stageRejected, gas, err)
			}
			ante.Write()
			res := fail(stageFailed, gas, err)
			res.events = events
			res.fee = body.Fee
			return res
		}
		events = append(events, ev...)
	}
	msgs.Write()
	ante.Write()
	return txResult{stage: stageOK, gas: gas, events: events, log: "", fee: body.Fee}
}

// lastValidatorGuard refuses an unbond that would leave no validator with
// power: CometBFT halts on an empty set. It judges the set this block will
// report, not the one last reported: every validator's power as its stake
// and jail flag give it now (after beginBlock's jailing and the block's
// earlier transactions), with this unbond applied. Two validators
// unbonding in one block are judged one after the other, so the second is
// refused. endBlock re-checks (escrow.EndBlockPower keeps the last set
// when none would have power), for what no transaction decides: slashes
// at the end of the block.
func lastValidatorGuard(k escrow.Keeper, p genesis.Params, from types.Address, amt *uint256.Int) error {
	v, ok := k.GetValidator(from)
	if !ok || k.Power(p.Staking, from, v) == 0 {
		return nil // it gives no power now: unbonding cannot take any away
	}
	bonded := k.Bonded(from)
	if !bonded.Lt(amt) && !new(uint256.Int).Sub(bonded, amt).Lt(p.Staking.MinValidatorStake) {
		return nil // it keeps power
	}
	others := false
	k.IterateValidators(func(op types.Address, o *escrow.Validator) bool {
		others = op != from && k.Power(p.Staking, op, o) > 0
		return others
	})
	if !others {
		return types.ErrInsufficientStake.Wrapf("validator %s is the last one with power: unbonding below %s would leave the chain without validators", v.Name, types.FormatAmount(p.Staking.MinValidatorStake))
	}
	return nil
}
