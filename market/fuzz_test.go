package market

import (
	"bytes"
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/types"
)

// fuzzMsgDecoder is one message decoder under FuzzDecodeMarketMsg: its
// message type, and the decoder returning the decoded message re-encoded.
type fuzzMsgDecoder struct {
	name string
	typ  types.MsgType
	dec  func([]byte) (types.RawMsg, error)
}

func fuzzRaw[M interface{ Raw() types.RawMsg }](dec func([]byte) (M, error)) func([]byte) (types.RawMsg, error) {
	return func(bz []byte) (types.RawMsg, error) {
		m, err := dec(bz)
		if err != nil {
			return types.RawMsg{}, err
		}
		return m.Raw(), nil
	}
}

// fuzzMarketDecoders are every message decoder of the package, selected by
// the first byte of a fuzz input (modulo their number).
var fuzzMarketDecoders = []fuzzMsgDecoder{
	{"register-provider", types.MsgTypeRegisterProvider, fuzzRaw(DecodeMsgRegisterProvider)},
	{"update-provider", types.MsgTypeUpdateProvider, fuzzRaw(DecodeMsgUpdateProvider)},
	{"unjail-provider", types.MsgTypeUnjailProvider, fuzzRaw(DecodeMsgUnjailProvider)},
	{"post-job", types.MsgTypePostJob, fuzzRaw(DecodeMsgPostJob)},
	{"cancel-job", types.MsgTypeCancelJob, fuzzRaw(DecodeMsgCancelJob)},
	{"commit-bid", types.MsgTypeCommitBid, fuzzRaw(DecodeMsgCommitBid)},
	{"reveal-bid", types.MsgTypeRevealBid, fuzzRaw(DecodeMsgRevealBid)},
	{"claim-task", types.MsgTypeClaimTask, fuzzRaw(DecodeMsgClaimTask)},
}

// checkDecoded is the property every decoder must have: refused input is an
// ErrInvalidMsg; accepted input is the canonical encoding of what it decodes
// to (Raw gives back exactly the input), and that encoding decodes again.
func checkDecoded(t *testing.T, d fuzzMsgDecoder, data []byte) {
	t.Helper()
	raw, err := d.dec(data)
	if err != nil {
		var e *types.Error
		if !errors.As(err, &e) || e.Code != types.ErrInvalidMsg.Code {
			t.Fatalf("%s: refusal %q is not an ErrInvalidMsg (code %d)", d.name, err, types.CodeOf(err))
		}
		return
	}
	if raw.Type != d.typ {
		t.Fatalf("%s: Raw() has type %d, want %d", d.name, raw.Type, d.typ)
	}
	if !bytes.Equal(raw.Data, data) {
		t.Fatalf("%s: accepted %x but re-encodes to %x: not canonical", d.name, data, raw.Data)
	}
	again, err := d.dec(raw.Data)
	if err != nil {
		t.Fatalf("%s: own encoding %x refused: %v", d.name, raw.Data, err)
	}
	if !bytes.Equal(again.Data, data) {
		t.Fatalf("%s: second round trip gives %x, want %x", d.name, again.Data, data)
	}
}

func fuzzHash(b byte) types.Hash { return types.Hash(bytes.Repeat([]byte{b}, 32)) }

// fuzzMarketSeeds are a valid encoding of every message and near misses,
// each prefixed with its decoder's index.
func fuzzMarketSeeds() map[string][]byte {
	info := ProviderInfo{
		PeerID:     "12D3KooWQYhTNQdmr3ArTeUHRYzFg94BKyTkoWBDWez9kSCVe2Xo",
		Addrs:      []string{"/ip4/10.0.0.7/tcp/4001", "/ip6/::1/udp/4001/quic-v1"},
		Attributes: []string{"gpu/vendor/nvidia/model/h100/ram/80Gi", "cpu/cores/32", "ram/256Gi"},
		Runtimes:   []string{"llama.cpp", "ckks"},
		Models:     []types.Hash{fuzzHash(0x11)},
		Class:      "cuda12.4/llama.cpp-b3447/batch1",
	}
	job := MsgPostJob{
		Kind: KindInference, Mode: ModeAuction, Model: fuzzHash(0x22), ModelSize: 4 << 30,
		Stages: 2, Redundancy: 3, MaxPrice: types.OGPU(5),
		Req: Requirements{MinStake: types.OGPU(100), MinReputation: 500,
			Attributes: []string{"gpu/vendor/nvidia", "gpu/*/*/*/*/ram>=40Gi"}, Runtime: "llama.cpp", Class: "cuda12.4/llama.cpp-b3447/batch1"},
		Input:   fuzzHash(0x33),
		Windows: Windows{Bid: 10, Reveal: 5, Execute: 30, Verify: 10},
	}
	pool := job
	pool.Mode, pool.Kind, pool.Windows.Reveal, pool.Req = ModePool, KindPipeline, 0, Requirements{MinStake: new(uint256.Int)}
	canary := job
	canary.Stages, canary.Canary = 1, fuzzHash(0x44)
	lowRedundancy := job
	lowRedundancy.Redundancy = 1
	badReq := job
	badReq.Req.Attributes = []string{"ram>=lots"}
	price := types.OGPU(3)
	salt := fuzzHash(0x55)
	provider := types.BytesToAddress([]byte{0xb0})

	enc := func(i int, m interface{ Raw() types.RawMsg }) []byte {
		return append([]byte{byte(i)}, m.Raw().Data...)
	}
	valid := enc(3, &job)
	return map[string][]byte{
		"register":           enc(0, &MsgRegisterProvider{Info: info}),
		"register_minimal":   enc(0, &MsgRegisterProvider{Info: ProviderInfo{PeerID: "p"}}),
		"register_bad_attr":  enc(0, &MsgRegisterProvider{Info: ProviderInfo{PeerID: "p", Attributes: []string{"gpu//x"}}}),
		"register_no_peer":   enc(0, &MsgRegisterProvider{}),
		"update":             enc(1, &MsgUpdateProvider{Info: info}),
		"unjail":             enc(2, &MsgUnjailProvider{}),
		"post_job":           valid,
		"post_job_pool":      enc(3, &pool),
		"post_job_canary":    enc(3, &canary),
		"post_job_r1":        enc(3, &lowRedundancy),
		"post_job_bad_req":   enc(3, &badReq),
		"post_job_truncated": valid[:len(valid)-1],
		"post_job_trailing":  append(bytes.Clone(valid), 0x80),
		"cancel":             enc(4, &MsgCancelJob{Job: 1}),
		"cancel_leading_0":   {4, 0xc3, 0x82, 0x00, 0x01},
		"commit_bid":         enc(5, &MsgCommitBid{Job: 1, Stage: 1, Commitment: BidCommitment(1, 1, price, salt, provider)}),
		"commit_bid_empty":   enc(5, &MsgCommitBid{Job: 1}),
		"reveal_bid":         enc(6, &MsgRevealBid{Job: 1, Stage: 1, Price: price, Salt: salt}),
		"reveal_bid_zero":    enc(6, &MsgRevealBid{Job: 1, Price: new(uint256.Int)}),
		"claim":              enc(7, &MsgClaimTask{Job: 7, Stage: 3}),
		"empty":              {},
		"garbage":            []byte("\x03\xf8\xff not a message"),
	}
}

// FuzzDecodeMarketMsg runs arbitrary bytes through a market message decoder
// chosen by the first byte: no panic, refusals are ErrInvalidMsg, and what
// is accepted is canonical and accepted again.
func FuzzDecodeMarketMsg(f *testing.F) {
	seeds := fuzzMarketSeeds()
	for _, name := range slices.Sorted(maps.Keys(seeds)) {
		f.Add(seeds[name])
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		checkDecoded(t, fuzzMarketDecoders[int(in[0])%len(fuzzMarketDecoders)], in[1:])
	})
}

// The seeds decode (or are refused) as their names say, so the fuzz target
// starts from every message and every refusal path named.
func TestFuzzMarketSeeds(t *testing.T) {
	refused := map[string]bool{
		"register_bad_attr": true, "register_no_peer": true, "post_job_r1": true, "post_job_bad_req": true,
		"post_job_truncated": true, "post_job_trailing": true, "cancel_leading_0": true,
		"commit_bid_empty": true, "reveal_bid_zero": true, "garbage": true,
	}
	for name, in := range fuzzMarketSeeds() {
		if len(in) == 0 {
			continue
		}
		d := fuzzMarketDecoders[int(in[0])%len(fuzzMarketDecoders)]
		_, err := d.dec(in[1:])
		if got := err != nil; got != refused[name] {
			t.Errorf("seed %s (%s): refused = %v (%v), want %v", name, d.name, got, err, refused[name])
		}
		checkDecoded(t, d, in[1:])
	}
}
