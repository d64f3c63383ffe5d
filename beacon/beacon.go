// Package beacon is the chain's randomness beacon: one 32-byte value per
// height that no provider can know before the height is decided, that no
// proposer can choose, and that a validator can at most delay. Market
// audits are drawn from it (market/audit.go) after the results they
// check are revealed.
//
// How it works (docs/design-notes.md, "The randomness beacon"):
//
//   - Each validator keeps a secret seed s and registers the end of a
//     hash chain, Tip = H^N(s), in its vote extension (Reveal.Register).
//     Registered at height h, its value for height h+i (1 ≤ i ≤ N) is
//     x(h+i) = H^(N−i)(s): H(x(h+i)) = x(h+i−1), and x(h) = Tip.
//   - Every later vote extension at height h' reveals x(h'). The chain
//     checks it by hashing it forward to the last value it knows (at most
//     MaxGap hashes), so a value is unique: for each height a validator
//     either reveals the one value its registration fixed or nothing,
//     and a later reveal discloses every earlier one.
//   - The value of height d is final once every active registered
//     validator has revealed a value at or past d, or Timeout blocks after
//     d: Value(d) = sha256("ogpu/beacon/v1" | d | (operator | x(d) or
//     zeros) in operator order).
//
// A proposer that leaves extensions out only delays a value: the next
// reveal discloses the omitted one. A validator that withholds its value
// for d must stay silent for Timeout blocks, in view of everyone, and
// then chooses between two values of d (its x(d) or zeros) without
// knowing the others' values when it registered: at most one bit of
// bias, bought with Timeout blocks of visible absence. A registration's
// first value is the height after it (Start), so a validator that saw
// the other validators' values of h cannot pick a chain that steers h.
//
// The package is a pure state machine: no clocks, files, network or
// randomness; map iteration never reaches state. Reveals arrive in the
// injected extended commit (chain/voteext.go); Finalize runs at the end of
// every block.
package beacon

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/ethereum/go-ethereum/rlp"

	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// Bounds of the beacon. They are rules of the state machine (changing one
// changes app hashes).
const (
	// Timeout is how many blocks after height d its value waits for a
	// missing validator's reveal before it is final without it.
	Timeout = 8
	// MaxGap is how far a reveal may be ahead of the validator's last
	// known value (the hashes the chain spends checking it). A validator
	// silent for longer registers a new chain.
	MaxGap = 64
	// MaxFinalizePerBlock bounds the heights one block finalizes (after a
	// stall, the rest follow in later blocks).
	MaxFinalizePerBlock = 16
	// Retain is how many heights of final values are kept for readers.
	Retain = 1024
	// MaxChainLength bounds a registration's declared length N.
	MaxChainLength = 1 << 32
)

// Store keys: 0x70-0x7f are the beacon's.
const (
	prefixRecord byte = 0x70 // 0x70 | operator(20) -> rlp(Record)
	prefixValue  byte = 0x71 // 0x71 | height(8) -> value(32)
	keyNext      byte = 0x72 // 0x72 -> the next height to finalize (8)
)

// RecordKey is the store key of a validator's beacon record.
func RecordKey(op types.Address) []byte { return append([]byte{prefixRecord}, op[:]...) }

// ValueKey is the store key of height's final value.
func ValueKey(height uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixValue}, height)
}

// NextKey is the store key of the next height to finalize.
func NextKey() []byte { return []byte{keyNext} }

// Record is a validator's registered hash chain and how far it has been
// revealed.
type Record struct {
	// Start is the first height the chain gives a value for; End the
	// last (Start − 1 + N).
	Start, End uint64
	// Last is the height of Value, the latest value known: the tip (at
	// Start − 1) until the first reveal.
	Last  uint64
	Value types.Hash
}

// Reveal is a validator's beacon part of its vote extension at a height:
// the chain's value for that height, or, with Register, a new chain's tip
// and length.
type Reveal struct {
	Value    types.Hash
	Register bool
	Length   uint64
}

// Hash is the chain's hash function: H(x) = sha256(x).
func Hash(x types.Hash) types.Hash { return sha256.Sum256(x[:]) }

// Keeper reads and writes beacon state.
type Keeper struct {
	kv  store.KV
	evs *types.Events
}

// NewKeeper returns a keeper over kv emitting into evs (may be nil).
func NewKeeper(kv store.KV, evs *types.Events) Keeper { return Keeper{kv: kv, evs: evs} }

func (k Keeper) emit(e types.Event) {
	if k.evs != nil {
		k.evs.Emit(e)
	}
}

// GetRecord reads op's record.
func GetRecord(r store.Reader, op types.Address) (*Record, bool) {
	bz := r.Get(RecordKey(op))
	if bz == nil {
		return nil, false
	}
	var rec Record
	if err := rlp.DecodeBytes(bz, &rec); err != nil {
		panic(fmt.Errorf("beacon: stored record of %s unreadable: %w", op, err))
	}
	return &rec, true
}

func (k Keeper) setRecord(op types.Address, rec *Record) {
	bz, err := rlp.EncodeToBytes(rec)
	if err != nil {
		panic(err)
	}
	k.kv.Set(RecordKey(op), bz)
}

// Apply takes op's reveal from its vote extension at height h (carried by
// block h+1). It reports why a reveal was not taken ("" when it was); a
// reveal not taken changes nothing (a validator that lost its seed
// registers a new chain once its old one is stale).
func (k Keeper) Apply(op types.Address, h uint64, rv *Reveal) string {
	rec, ok := GetRecord(k.kv, op)
	if rv.Register {
		switch {
		case rv.Length == 0 || rv.Length > MaxChainLength:
			return fmt.Sprintf("chain length %d: want 1..%d", rv.Length, uint64(MaxChainLength))
		case ok && rec.Value == rv.Value && rec.Start == rec.Last+1:
			return "registered already" // sent again before the first one was committed
		case ok && rec.Last+Timeout >= h && h < rec.End:
			return fmt.Sprintf("a chain is active (last value at %d, ends at %d): a new one registers once it is exhausted or silent for %d blocks", rec.Last, rec.End, Timeout)
		}
		rec = &Record{Start: h + 1, End: h + rv.Length, Last: h, Value: rv.Value}
		k.setRecord(op, rec)
		k.emit(EventRegistered{Validator: op, Start: rec.Start, End: rec.End})
		return ""
	}
	switch {
	case !ok:
		return "no chain registered"
	case h <= rec.Last:
		return fmt.Sprintf("height %d is not after the last value (%d)", h, rec.Last)
	case h > rec.End:
		return fmt.Sprintf("height %d is past the chain's end (%d): register a new one", h, rec.End)
	case h-rec.Last > MaxGap:
		return fmt.Sprintf("height %d is %d past the last value (%d), more than %d: register a new chain", h, h-rec.Last, rec.Last, MaxGap)
	}
	x := rv.Value
	for i := rec.Last; i < h; i++ {
		x = Hash(x)
	}
	if x != rec.Value {
		return fmt.Sprintf("the value does not hash to the value of height %d", rec.Last)
	}
	rec.Last, rec.Value = h, rv.Value
	k.setRecord(op, rec)
	return ""
}

// valueAt is op's value for height d from rec (known: d ≤ rec.Last and
// d ≥ rec.Start).
func valueAt(rec *Record, d uint64) types.Hash {
	x := rec.Value
	for i := d; i < rec.Last; i++ {
		x = Hash(x)
	}
	return x
}

// Finalize runs at the end of block h: it makes final every height from
// the next one on (at most MaxFinalizePerBlock, never h itself, whose
// values are revealed with its precommits) whose value no longer waits
// for anyone: every active validator with a chain covering it revealed
// at or past it, or h ≥ d + Timeout. active reports whether an operator
// is an active validator (only those count, in operator order). Final
// values older than Retain heights are deleted.
func (k Keeper) Finalize(h uint64, active func(types.Address) bool) {
	next := max(decodeU64(k.kv.Get(NextKey())), 1)
	type member struct {
		op  types.Address
		rec *Record
	}
	var members []member
	var gone []types.Address
	store.IteratePrefix(k.kv, []byte{prefixRecord}, func(key, value []byte) bool {
		op := types.BytesToAddress(key[1:])
		var rec Record
		if err := rlp.DecodeBytes(value, &rec); err != nil {
			panic(fmt.Errorf("beacon: stored record unreadable: %w", err))
		}
		if !active(op) {
			// An inactive validator counts for nothing; once silent past
			// Timeout its record goes (it registers anew if it comes back),
			// so the records stay as many as the recent validators.
			if rec.Last+Timeout < h {
				gone = append(gone, op)
			}
			return false
		}
		members = append(members, member{op, &rec})
		return false
	})
	for _, op := range gone {
		k.kv.Delete(RecordKey(op))
	}
	for n := 0; next < h && n < MaxFinalizePerBlock; n++ {
		d := next
		waiting := false
		for _, m := range members {
			if m.rec.Start <= d && d <= m.rec.End && m.rec.Last < d {
				waiting = true
			}
		}
		if waiting && h < d+Timeout {
			break
		}
		hh := sha256.New()
		hh.Write([]byte("ogpu/beacon/v1"))
		hh.Write(binary.BigEndian.AppendUint64(nil, d))
		var contributors, missing uint64
		for _, m := range members {
			if d < m.rec.Start || d > m.rec.End {
				continue
			}
			hh.Write(m.op[:])
			if m.rec.Last >= d {
				x := valueAt(m.rec, d)
				hh.Write(x[:])
				contributors++
			} else {
				hh.Write(make([]byte, 32))
				missing++
			}
		}
		v := types.Hash(hh.Sum(nil))
		k.kv.Set(ValueKey(d), v[:])
		if d > Retain {
			k.kv.Delete(ValueKey(d - Retain))
		}
		if missing > 0 {
			k.emit(EventFinalized{Height: d, Value: v, Contributors: contributors, Missing: missing})
		}
		next = d + 1
	}
	k.kv.Set(NextKey(), binary.BigEndian.AppendUint64(nil, next))
}

// Value returns the final value of height d (ok false: not final yet, or
// deleted).
func Value(r store.Reader, d uint64) (types.Hash, bool) {
	bz := r.Get(ValueKey(d))
	if len(bz) != 32 {
		return types.Hash{}, false
	}
	return types.Hash(bz), true
}

// Draw maps a final value and a domain (what is drawn for: a job's task)
// to a number in [0, 10,000): the draw selects when it is below a rate in
// basis points. sha256(value | domain), first 8 bytes, mod 10,000 (the
// modulo bias is below 10^-15).
func Draw(value types.Hash, domain []byte) uint64 {
	h := sha256.New()
	h.Write(value[:])
	h.Write(domain)
	return binary.BigEndian.Uint64(h.Sum(nil)[:8]) % 10_000
}

// IterateRecords calls fn for every record in operator order until it
// returns true.
func IterateRecords(r store.Reader, fn func(op types.Address, rec *Record) bool) {
	store.IteratePrefix(r, []byte{prefixRecord}, func(key, value []byte) bool {
		var rec Record
		if err := rlp.DecodeBytes(value, &rec); err != nil {
			panic(fmt.Errorf("beacon: stored record unreadable: %w", err))
		}
		return fn(types.BytesToAddress(key[1:]), &rec)
	})
}

// Next is the next height to finalize (every height before it is final).
func Next(r store.Reader) uint64 { return max(decodeU64(r.Get(NextKey())), 1) }

func decodeU64(bz []byte) uint64 {
	if len(bz) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(bz)
}

// Encode is the wire form of a reveal (RLP).
func (rv *Reveal) Encode() []byte {
	bz, err := rlp.EncodeToBytes(rv)
	if err != nil {
		panic(err)
	}
	return bz
}

// DecodeReveal parses a reveal, refusing trailing bytes.
func DecodeReveal(bz []byte) (*Reveal, error) {
	var rv Reveal
	if err := rlp.DecodeBytes(bz, &rv); err != nil {
		return nil, fmt.Errorf("beacon reveal does not decode: %w", err)
	}
	if !bytes.Equal(rv.Encode(), bz) {
		return nil, fmt.Errorf("beacon reveal is not in canonical form")
	}
	return &rv, nil
}
