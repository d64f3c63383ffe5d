package market

import (
	"bytes"
	"maps"
	"slices"
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/types/msgtest"
)

// fuzzMarketDecoders are every message decoder of the package, selected by
// the first byte of a fuzz input (modulo their number).
var fuzzMarketDecoders = []msgtest.Decoder{
	{Name: "register-provider", Type: types.MsgTypeRegisterProvider, Dec: msgtest.Raw(DecodeMsgRegisterProvider)},
	{Name: "update-provider", Type: types.MsgTypeUpdateProvider, Dec: msgtest.Raw(DecodeMsgUpdateProvider)},
	{Name: "unjail-provider", Type: types.MsgTypeUnjailProvider, Dec: msgtest.Raw(DecodeMsgUnjailProvider)},
	{Name: "post-job", Type: types.MsgTypePostJob, Dec: msgtest.Raw(DecodeMsgPostJob)},
	{Name: "cancel-job", Type: types.MsgTypeCancelJob, Dec: msgtest.Raw(DecodeMsgCancelJob)},
	{Name: "commit-bid", Type: types.MsgTypeCommitBid, Dec: msgtest.Raw(DecodeMsgCommitBid)},
	{Name: "reveal-bid", Type: types.MsgTypeRevealBid, Dec: msgtest.Raw(DecodeMsgRevealBid)},
	{Name: "claim-task", Type: types.MsgTypeClaimTask, Dec: msgtest.Raw(DecodeMsgClaimTask)},
	{Name: "reveal-transcript", Type: types.MsgTypeRevealTranscript, Dec: msgtest.Raw(DecodeMsgRevealTranscript)},
	{Name: "prove-handoff", Type: types.MsgTypeProveHandoff, Dec: msgtest.Raw(DecodeMsgProveHandoff)},
	{Name: "replace-stage", Type: types.MsgTypeReplaceStage, Dec: msgtest.Raw(DecodeMsgReplaceStage)},
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
		Seal:    fuzzHash(0x34),
	}
	pool := job
	pool.Mode, pool.Kind, pool.Windows.Reveal, pool.Req = ModePool, KindPipeline, 0, Requirements{MinStake: new(uint256.Int)}
	canary := job
	canary.Stages, canary.Seal = 1, fuzzHash(0x44)
	lowRedundancy := job
	lowRedundancy.Redundancy = 1
	badReq := job
	badReq.Req.Attributes = []string{"ram>=lots"}
	split := job
	split.Kind, split.Slices, split.MaxTokens, split.PromptTokens = KindSplit, []types.Hash{fuzzHash(0x61), fuzzHash(0x62)}, 64, 16
	splitDup := split
	splitDup.Slices = []types.Hash{fuzzHash(0x61), fuzzHash(0x61)}
	slicesOnInference := job
	slicesOnInference.Slices = split.Slices
	sig := bytes.Repeat([]byte{0x01}, 65)
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
		"post_job_split":     enc(3, &split),
		"post_job_split_dup": enc(3, &splitDup),
		"post_job_slices":    enc(3, &slicesOnInference),
		"reveal_transcript":  enc(8, &MsgRevealTranscript{Job: 1, Stage: 1, Steps: 40, Hin: fuzzHash(0x71), Hout: fuzzHash(0x72), Salt: salt}),
		"prove_handoff":      enc(9, &MsgProveHandoff{Job: 1, Stage: 1, Chain: 1, Steps: 40, Hin: fuzzHash(0x71), Sig: sig}),
		"prove_handoff_64":   enc(9, &MsgProveHandoff{Job: 1, Stage: 1, Chain: 1, Steps: 40, Hin: fuzzHash(0x71), Sig: sig[:64]}),
		"prove_handoff_0":    enc(9, &MsgProveHandoff{Job: 1, Stage: 1, Chain: 1, Hin: fuzzHash(0x71), Sig: sig}),
		"replace_stage":      enc(10, &MsgReplaceStage{Job: 1, Stage: 1, Chain: 1}),
		"replace_stage_long": append(enc(10, &MsgReplaceStage{Job: 1, Stage: 1, Chain: 1}), 0x01),
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
		msgtest.Check(t, fuzzMarketDecoders[int(in[0])%len(fuzzMarketDecoders)], in[1:])
	})
}

// The seeds decode (or are refused) as their names say, so the fuzz target
// starts from every message and every refusal path named.
func TestFuzzMarketSeeds(t *testing.T) {
	refused := map[string]bool{
		"register_bad_attr": true, "register_no_peer": true, "post_job_r1": true, "post_job_bad_req": true,
		"post_job_truncated": true, "post_job_trailing": true, "cancel_leading_0": true,
		"commit_bid_empty": true, "reveal_bid_zero": true, "garbage": true,
		"post_job_split_dup": true, "post_job_slices": true, "prove_handoff_64": true, "prove_handoff_0": true,
		"replace_stage_long": true,
	}
	for name, in := range fuzzMarketSeeds() {
		if len(in) == 0 {
			continue
		}
		d := fuzzMarketDecoders[int(in[0])%len(fuzzMarketDecoders)]
		_, err := d.Dec(in[1:])
		if got := err != nil; got != refused[name] {
			t.Errorf("seed %s (%s): refused = %v (%v), want %v", name, d.Name, got, err, refused[name])
		}
		msgtest.Check(t, d, in[1:])
	}
}
