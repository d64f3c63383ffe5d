// Package market is the marketplace state machine: providers and their
// attributes, jobs, sealed-bid reverse auctions (and the continuous-task
// pool mode), awards, and settlement of every stage from the verifier's
// outcome, with all money moved through escrow.
//
// A job's life, all driven by block height in FinalizeBlock (no tx needed
// for any deadline):
//
//	posted ── bid window ──▶ reveal window ──▶ close: award r lowest per stage
//	   │                                         │ (or expire: refund)
//	   └── cancel (before close): refund         ▼
//	                 commit window ──▶ reveal window ──▶ settle or dispute
//	                 (no-show: slash, reassign a backup bid or refund)
//
// The close runs at the end of the reveal window, or earlier at the end of
// the block in which the last sealed bid is revealed (of the bid window
// when there is no sealed bid): Job.AllRevealed.
//
// It is a pure state machine over a store.KV: no clock, no randomness, no
// goroutines, no floats, and no map iteration that reaches state.
package market

import (
	"encoding/binary"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/types"
)

// Store key prefixes owned by this package: 0x20-0x2f.
const (
	prefixProvider byte = 0x20 // 0x20 | provider(20) -> rlp(Provider)
	prefixJob      byte = 0x21 // 0x21 | job(8) -> rlp(Job)
	keyNextJob     byte = 0x22 // 0x22 -> uint64: the next job id
	prefixBid      byte = 0x23 // 0x23 | job(8) | stage(2) | provider(20) -> rlp(Bid)
	prefixBook     byte = 0x24 // 0x24 | job(8) | stage(2) | price(32) | provider(20) -> {}: a pool job's claims by price
	prefixByState  byte = 0x25 // 0x25 | state(1) | job(8) -> {}
	prefixByClient byte = 0x26 // 0x26 | client(20) | job(8) -> {}
	prefixByProv   byte = 0x27 // 0x27 | provider(20) | job(8) -> {}: jobs a provider was assigned
	prefixSchedule byte = 0x28 // 0x28 | height(8) | job(8) | stage(2) | kind(1) -> {}: deadlines
	// 0x29 | job(8) | stage(2) | result(32) -> rlp(FinetuneClaim): the root and final hash behind a revealed fine-tune result
	prefixFinetuneClaim byte = 0x29
	// 0x2a | job(8) | stage(2) -> rlp(Leaders): an auction stage's best revealed bids (RevealBid)
	prefixLeaders byte = 0x2a
	// 0x2c | provider(20) -> uint256: the sum of the prices of its live
	// slots in unsettled tasks (deterrence.go).
	prefixExposure byte = 0x2c
	// 0x2b | height(8) | job(8) -> {}: the prune queue (prune.go, prefixPrune)
)

func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// ProviderKey is the store key of a provider's record.
func ProviderKey(p types.Address) []byte { return cat([]byte{prefixProvider}, p.Bytes()) }

// JobKey is the store key of a job.
func JobKey(id uint64) []byte { return cat([]byte{prefixJob}, be64(id)) }

// NextJobKey holds the next job id.
func NextJobKey() []byte { return []byte{keyNextJob} }

func bidStagePrefix(job uint64, stage uint16) []byte {
	return cat([]byte{prefixBid}, be64(job), be16(stage))
}

// BidKey is the store key of a provider's bid on a stage.
func BidKey(job uint64, stage uint16, p types.Address) []byte {
	return cat(bidStagePrefix(job, stage), p.Bytes())
}

// LeadersKey is the store key of an auction stage's leaders list.
func LeadersKey(job uint64, stage uint16) []byte {
	return cat([]byte{prefixLeaders}, be64(job), be16(stage))
}

func bookStagePrefix(job uint64, stage uint16) []byte {
	return cat([]byte{prefixBook}, be64(job), be16(stage))
}

// BookKey is the order-book key of a revealed bid: iteration is by price,
// then provider address.
func BookKey(job uint64, stage uint16, price *uint256.Int, p types.Address) []byte {
	b := price.Bytes32()
	return cat(bookStagePrefix(job, stage), b[:], p.Bytes())
}

func byStateKey(s JobState, job uint64) []byte {
	return cat([]byte{prefixByState, byte(s)}, be64(job))
}

func byClientKey(c types.Address, job uint64) []byte {
	return cat([]byte{prefixByClient}, c.Bytes(), be64(job))
}

func byProviderKey(p types.Address, job uint64) []byte {
	return cat([]byte{prefixByProv}, p.Bytes(), be64(job))
}

// Deadline kinds in the schedule, in the order they run within a height.
const (
	deadlineBidEnd  byte   = 1      // bid window over: the job enters its reveal window
	deadlineClose   byte   = 2      // reveal window over, or every sealed bid revealed (closeEarly): award or expire
	deadlineCommit  byte   = 3      // a task's commit window over: no-shows
	deadlineReveal  byte   = 4      // a task's reveal window over: no-shows, evaluate
	deadlineDispute byte   = 5      // a vote's window over (dispute or input check)
	deadlineConfirm byte   = 6      // an agreed task's canary window over: settle
	deadlineSplit   byte   = 7      // a split job's reveal window over: no-shows, the scan (or wait for proofs)
	deadlineHandoff byte   = 8      // a split job's hand-off proof window over: the final scan
	stageNone       uint16 = 0xffff // job-level deadlines
)

func scheduleKey(height, job uint64, stage uint16, kind byte) []byte {
	return cat([]byte{prefixSchedule}, be64(height), be64(job), be16(stage), []byte{kind})
}

// ByStatePrefix, ByClientPrefix and ByProviderPrefix are the index
// prefixes listing job ids by state, client and assigned provider.
func ByStatePrefix(s JobState) []byte         { return []byte{prefixByState, byte(s)} }
func ByClientPrefix(c types.Address) []byte   { return cat([]byte{prefixByClient}, c.Bytes()) }
func ByProviderPrefix(p types.Address) []byte { return cat([]byte{prefixByProv}, p.Bytes()) }

// present is the value of index entries (the store refuses empty values).
var present = []byte{1}

// ExposureKey is the store key of addr's open exposure (deterrence.go).
func ExposureKey(addr types.Address) []byte {
	return append([]byte{prefixExposure}, addr[:]...)
}
