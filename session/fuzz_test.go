package session

import (
	"bytes"
	"maps"
	"slices"
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/types/msgtest"
)

// fuzzSessionDecoders are every message decoder of the package, selected
// by the first byte of a fuzz input (modulo their number).
var fuzzSessionDecoders = []msgtest.Decoder{
	{Name: "redeem-voucher", Type: types.MsgTypeRedeemVoucher, Dec: msgtest.Raw(DecodeMsgRedeemVoucher)},
	{Name: "close-session", Type: types.MsgTypeCloseSession, Dec: msgtest.Raw(DecodeMsgCloseSession)},
	{Name: "dispute-session", Type: types.MsgTypeDisputeSession, Dec: msgtest.Raw(DecodeMsgDisputeSession)},
	{Name: "seal-session-vote", Type: types.MsgTypeSealSessionVote, Dec: msgtest.Raw(DecodeMsgSealSessionVote)},
	{Name: "open-session-vote", Type: types.MsgTypeOpenSessionVote, Dec: msgtest.Raw(DecodeMsgOpenSessionVote)},
}

// fuzzSessionSeeds are a valid encoding of every message and near misses,
// each prefixed with its decoder's index.
func fuzzSessionSeeds() map[string][]byte {
	enc := func(i int, m interface{ Raw() types.RawMsg }) []byte {
		return append([]byte{byte(i)}, m.Raw().Data...)
	}
	sig := bytes.Repeat([]byte{1}, 65)
	provider := types.BytesToAddress([]byte{0xb0})
	q := Request{ChainID: "c", Session: 3, Provider: provider, Seq: 1, Prompt: types.Hash{1}, MaxTokens: 8}
	r := Receipt{ChainID: "c", Session: 3, Provider: provider, Seq: 1, Request: q.Hash(), Output: types.Hash{2}, NIn: 1, NOut: 2}
	one := &MsgDisputeSession{Session: 3, Requests: []SignedRequest{{q, sig}}, Receipts: []SignedReceipt{{r, sig}}, Addrs: []string{"/ip4/127.0.0.1/tcp/1"}}
	two := &MsgDisputeSession{Session: 3, Requests: []SignedRequest{{q, sig}, {q, sig}}, Receipts: []SignedReceipt{{r, sig}, {r, sig}}, Addrs: []string{"/a", "/b"}}
	noAddr := &MsgDisputeSession{Session: 3, Requests: one.Requests, Receipts: one.Receipts}
	shortSig := &MsgDisputeSession{Session: 3, Requests: []SignedRequest{{q, sig[:64]}}, Receipts: one.Receipts, Addrs: one.Addrs}
	oneBz := enc(2, one)
	return map[string][]byte{
		"voucher":           enc(0, &MsgRedeemVoucher{Voucher: Voucher{ChainID: "c", Session: 3, Provider: provider, Cumulative: uint256.NewInt(5), Seq: 2}, Sig: sig}),
		"voucher_zero":      enc(0, &MsgRedeemVoucher{Voucher: Voucher{ChainID: "c", Cumulative: new(uint256.Int)}, Sig: sig}),
		"close":             enc(1, &MsgCloseSession{Session: 3}),
		"dispute_audit":     oneBz,
		"dispute_pair":      enc(2, two),
		"dispute_no_addr":   enc(2, noAddr),
		"dispute_short_sig": enc(2, shortSig),
		"dispute_trailing":  append(bytes.Clone(oneBz), 0x00),
		"seal":              enc(3, &MsgSealSessionVote{Session: 3, Dispute: 1, Commitment: types.Hash{9}}),
		"seal_empty":        enc(3, &MsgSealSessionVote{Session: 3}),
		"open":              enc(4, &MsgOpenSessionVote{Session: 3, Dispute: 1, Verdict: VerdictNoData, Salt: types.Hash{3}}),
		"open_bad_verdict":  enc(4, &MsgOpenSessionVote{Session: 3, Verdict: 7}),
		"open_noncanonical": {4, 0xc4, 0x03, 0x01, 0x81, 0x00},
		"empty":             {},
		"garbage":           []byte("\x02\xf8\xff not a message"),
	}
}

// FuzzDecodeSessionMsg runs arbitrary bytes through a session message
// decoder chosen by the first byte: no panic, refusals are ErrInvalidMsg,
// and what is accepted is canonical and accepted again.
func FuzzDecodeSessionMsg(f *testing.F) {
	seeds := fuzzSessionSeeds()
	for _, name := range slices.Sorted(maps.Keys(seeds)) {
		f.Add(seeds[name])
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		msgtest.Check(t, fuzzSessionDecoders[int(in[0])%len(fuzzSessionDecoders)], in[1:])
	})
}

// The seeds decode (or are refused) as their names say.
func TestFuzzSessionSeeds(t *testing.T) {
	refused := map[string]bool{
		"voucher_zero": true, "dispute_no_addr": true, "dispute_short_sig": true, "dispute_trailing": true,
		"seal_empty": true, "open_bad_verdict": true, "open_noncanonical": true, "garbage": true,
	}
	for name, in := range fuzzSessionSeeds() {
		if len(in) == 0 {
			continue
		}
		d := fuzzSessionDecoders[int(in[0])%len(fuzzSessionDecoders)]
		_, err := d.Dec(in[1:])
		if got := err != nil; got != refused[name] {
			t.Errorf("seed %s (%s): refused = %v (%v), want %v", name, d.Name, got, err, refused[name])
		}
		msgtest.Check(t, d, in[1:])
	}
}
