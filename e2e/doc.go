// Package e2e is a multi-process testnet harness in the spirit of
// CometBFT's e2e runner: it starts a 4-validator testnet of `ogpud start`
// processes on loopback, provider processes (`ogpud provider run` with the
// real llama.cpp on the shared tiny model, and encrypted CKKS pipeline
// stages) and a bounded client load of LLM and encrypted pipeline jobs
// (`ogpu job run`), then perturbs the network while the load
// runs: kill -9 and restart a validator, kill a provider mid-generation
// and restart it from its state dir, SIGSTOP/SIGCONT a validator past its
// commit deadlines, partition a validator and heal it (every validator's
// P2P traffic goes through a loopback TCP proxy the harness owns), and
// fill blocks with transfers at the minimum fee.
//
// After each perturbation and at the end it checks what an operator must
// be able to rely on: every node agrees on the app hash at every height,
// the supply adds up to the cap, every posted job ended (settled,
// refunded, or disputed and decided), no honest provider was slashed,
// and restarted or healed nodes catch up.
//
// TestPerturbationShort applies each perturbation once (part of make
// test); TestSoak (make soak, OGPU_SOAK=30m) cycles them for a duration
// and prints a summary.
package e2e
