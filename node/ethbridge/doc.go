// Package ethbridge is the Ethereum side of the oGPU bridge as a validator
// (or any relayer) runs it: a watcher that reads the OGPUBridge contract at
// its Ethereum node's finalized block, a relayer that submits withdrawals
// and validator-set updates signed by the app-chain's validators, and the
// deployment helpers that tests, the devnet and the end-to-end test use.
//
// It talks to an Ethereum node over JSON-RPC (the Client interface, which
// both *ethclient.Client and the simulated backend's client satisfy). It is
// not part of the app-chain's state machine: what the watcher reads becomes
// a validator's vote extension, which the bridge module (package bridge)
// checks against the other validators' before anything is credited.
//
// What it must never do:
//
//   - read anything above the finalized block for an observation: a deposit
//     that a reorg can still remove is never reported, and deposits are
//     keyed by the contract's deposit nonce, never by transaction hash or
//     log index, so a deposit re-included in another block is the same
//     deposit;
//   - guess: when the node's finality lags (ErrFinalityLag) or any RPC call
//     fails, Observe returns an error and nothing else, and the caller sends
//     an empty vote extension;
//   - send a transaction that it knows will revert: the relayer checks the
//     signatures, the power and the contract's state first, and refuses with
//     a clear error without sending.
//
// Relaying is permissionless: any funded key pays the gas, and the contract,
// not the relayer, decides what is valid.
package ethbridge
