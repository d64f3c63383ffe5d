// Package session is the state machine of session leases: inference paid by
// client-signed cumulative vouchers instead of one on-chain job per request
// (issue 14; research/protocol-threats.md §1 lists the attacks it answers).
//
// One sealed-bid auction (package market) awards a session to r providers
// with per-token prices; from then on requests go straight to the providers
// over libp2p and never touch the chain. Each provider holds a lane: a
// budget locked from the client at the award, and what it has been paid.
// After each response the provider signs a Receipt and the client answers
// with a Voucher for the lane's new cumulative total; the provider redeems
// the latest voucher whenever it likes (MsgRedeemVoucher pays cumulative −
// paid, never per voucher). The client may close early; at expiry, after a
// grace window in which only redemptions count, the end-block refunds what
// no voucher claimed, with no transaction from anyone.
//
// The rules, each in the file named after it:
//
//   - signed.go: the off-chain objects (Request, Receipt, Voucher), their
//     domain tags and signatures.
//   - lanes.go: opening lanes, redemption, close, expiry and refund.
//   - dispute.go: disputes over receipts (audits, comparisons,
//     equivocations), their bonds, the validators' sealed verdicts, slashes
//     and compensation; and each provider's open lane budget (lane caps).
//
// It is deterministic like escrow and market: it reads and writes a
// store.KV and nothing else (a proven fraud is handed to the market, which
// owns provider records, through Context.Fraud).
package session
