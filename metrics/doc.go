// Package metrics exports the ogpu_* Prometheus series of the node, the
// provider agent and the gateway (docs/metrics.md has the table).
//
// Every series lives on Prometheus' default registry, beside CometBFT's
// cometbft_* and libp2p's libp2p_*, so one /metrics endpoint per process
// shows them all. Registration happens once per process and is
// idempotent: many nodes, agents or gateways in one test process share
// the series and never panic on a second registration.
//
// App series (ogpu_app_*) are derived from committed block events by one
// subscription in the node process (App, Follow); WithState adds the open
// jobs by state and the escrow and stake totals from the cheap /stats
// query at each block, and TimeFinalizeBlock times block execution
// between CometBFT and the app. They are a write-only side channel:
// nothing here is read back into chain state, and no clock is read
// inside it, so it stays deterministic. Provider series come from the blocks' events that name
// the provider (ProviderTracker) plus what the agent measures itself
// (ObserveGeneration, ObserveHEStage). Blob transfers are counted by the
// libp2p host's hook (ObserveBlobBytes). Gateway series come from an HTTP
// middleware (Gateway), the gateway's spending ledger (AddGatewaySpent)
// and its session backend (WatchGatewaySessions).
//
// Labels are low-cardinality by construction: never a job id, a session
// or an address; free-text reasons are folded into a fixed set of
// classes.
package metrics
