// Package contracts holds the oGPU network's Ethereum contracts as Go
// bindings: OGPUToken, the ERC-20 with its fixed 21,000,000 supply and the
// trade tax on registered AMM pairs (src/OGPUToken.sol documents the rules),
// and OGPUBridge, which locks oGPU on deposit and releases it on withdrawals
// signed by more than 2/3 of a checkpointed validator set, with a guardian
// pause, an outflow limit and a valset timelock (src/OGPUBridge.sol documents
// the digests the app-chain's validators sign).
//
// The Solidity sources are in src/, compiled by build.js (solc 0.8.37 as a
// library, evm version and optimizer pinned) into artifacts/*.json; the
// bindings (bindings.go, go-ethereum's abigen v2, with the bytecode embedded)
// are generated from those artifacts by cmd/genbind. Both are committed, so
// building and testing need no node; `make contracts-check` rebuilds both and
// fails on any diff.
package contracts

//go:generate go run ./cmd/genbind
