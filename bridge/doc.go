// Package bridge is the app-chain side of the oGPU bridge to Ethereum: a
// deterministic state machine, like escrow and market, that moves oGPU
// between the bridge reserve and accounts on the word of the validators.
//
// Nothing is minted on either chain. The Ethereum contract (contracts/
// OGPUBridge.sol) locks oGPU on deposit and releases it on withdrawals
// signed by more than 2/3 of its stored validator set; this module credits
// a deposit from the bridge reserve once validators holding more than 2/3 of
// the power reported the identical deposit at the next nonce, and debits a
// withdrawal at once into the outbound escrow, which the supply invariant
// counts, until the validators report Ethereum's Withdrawn event for it.
//
// The validators' reports and signatures travel in CometBFT vote
// extensions (extension.go), not in transactions: the proposer of the next
// block injects the extended commit it received as the block's first
// transaction and every node checks it against the real last commit
// (chain/voteext.go). The rules, each in the file named after it:
//
//   - digest.go: the digests validators sign, byte for byte the contract's.
//   - keys.go: validator bridge keys (secp256k1, proof of possession).
//   - deposit.go: crediting deposits (2/3 of the same tuple, next nonce).
//   - withdraw.go: withdrawals (debit, outbound escrow, signatures, Withdrawn).
//   - valset.go: the validator set the contract should hold and its updates.
package bridge
