package chain

import (
	"fmt"

	abci "github.com/cometbft/cometbft/abci/types"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
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
}

func fail(stage txStage, gas uint64, err error) txResult {
	return txResult{stage: stage, code: types.CodeOf(err), codespace: types.Codespace, log: err.Error(), gas: gas}
}

// handler applies one decoded message.
type handler func(kv store.KV, from types.Address) ([]abci.Event, error)

// decodeMsg turns a raw message into its handler, checking everything that
// can be checked without state.
func decodeMsg(m types.RawMsg) (handler, error) {
	switch m.Type {
	case types.MsgTypeSend:
		msg, err := escrow.DecodeMsgSend(m.Data)
		if err != nil {
			return nil, err
		}
		return func(kv store.KV, from types.Address) ([]abci.Event, error) {
			if err := escrow.NewKeeper(kv).Send(from, msg.To, msg.Amount); err != nil {
				return nil, err
			}
			return []abci.Event{EventTransfer{From: from, To: msg.To, Amount: msg.Amount}.ABCI()}, nil
		}, nil
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
func (a *App) runTx(kv store.KV, bz []byte, atomic bool) txResult {
	params := getParams(kv)
	if uint64(len(bz)) > params.MaxTxBytes {
		return fail(stageRejected, 0, types.ErrTxTooLarge.Wrapf("%d bytes, the limit is %d", len(bz), params.MaxTxBytes))
	}
	tx, err := types.DecodeTx(bz)
	if err != nil {
		return fail(stageRejected, 0, err)
	}
	body := &tx.Body
	gas := params.Gas(len(bz), len(body.Msgs))
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
	for i, m := range body.Msgs {
		if handlers[i], err = decodeMsg(m); err != nil {
			return fail(stageRejected, gas, fmt.Errorf("message %d: %w", i, err))
		}
	}
	if err := tx.VerifySignature(); err != nil {
		return fail(stageRejected, gas, err)
	}
	next := getNonce(kv, body.From)
	switch {
	case body.Nonce < next:
		return fail(stageRejected, gas, types.ErrNonceUsed.Wrapf("nonce %d of %s was already used; the next nonce is %d", body.Nonce, body.From, next))
	case body.Nonce > next:
		return fail(stageRejected, gas, types.ErrNonceAhead.Wrapf("nonce %d of %s is ahead; the next nonce is %d: send the missing nonces first", body.Nonce, body.From, next))
	}
	if required := params.RequiredFee(len(bz), len(body.Msgs)); body.Fee.Lt(required) {
		return fail(stageRejected, gas, types.ErrFeeTooLow.Wrapf("fee %s is below the required %s (%d gas at %s per gas)",
			types.FormatAmount(body.Fee), types.FormatAmount(required), gas, params.MinGasPrice.Dec()))
	}

	ante := store.NewCache(kv)
	if err := escrow.NewKeeper(ante).CollectFee(body.From, body.Fee); err != nil {
		return fail(stageRejected, gas, fmt.Errorf("cannot pay the fee: %w", err))
	}
	setNonce(ante, body.From, next+1)
	events := []abci.Event{EventTx{From: body.From, Nonce: body.Nonce, Fee: body.Fee}.ABCI()}

	msgs := store.NewCache(ante)
	for i, h := range handlers {
		ev, err := h(msgs, body.From)
		if err != nil {
			err = fmt.Errorf("message %d: %w", i, err)
			if atomic {
				return fail(stageRejected, gas, err)
			}
			ante.Write()
			res := fail(stageFailed, gas, err)
			res.events = events
			return res
		}
		events = append(events, ev...)
	}
	msgs.Write()
	ante.Write()
	return txResult{stage: stageOK, gas: gas, events: events, log: ""}
}
