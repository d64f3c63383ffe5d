package verifier

import (
	"bytes"
	"maps"
	"slices"
	"testing"

	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/types/msgtest"
)

// fuzzVerifierDecoders are every message decoder of the package, selected
// by the first byte of a fuzz input (modulo their number).
var fuzzVerifierDecoders = []msgtest.Decoder{
	{Name: "commit-result", Type: types.MsgTypeCommitResult, Dec: msgtest.Raw(DecodeMsgCommitResult)},
	{Name: "reveal-result", Type: types.MsgTypeRevealResult, Dec: msgtest.Raw(DecodeMsgRevealResult)},
	{Name: "vote-dispute", Type: types.MsgTypeVoteDispute, Dec: msgtest.Raw(DecodeMsgVoteDispute)},
	{Name: "reveal-canary", Type: types.MsgTypeRevealCanary, Dec: msgtest.Raw(DecodeMsgRevealCanary)},
}

func fuzzHash(b byte) types.Hash { return types.Hash(bytes.Repeat([]byte{b}, 32)) }

// fuzzVerifierSeeds are a valid encoding of every message and near misses,
// each prefixed with its decoder's index.
func fuzzVerifierSeeds() map[string][]byte {
	enc := func(i int, m interface{ Raw() types.RawMsg }) []byte {
		return append([]byte{byte(i)}, m.Raw().Data...)
	}
	provider := types.BytesToAddress([]byte{0xb0})
	result, salt := fuzzHash(0x66), fuzzHash(0x77)
	commit := enc(0, &MsgCommitResult{Job: 1, Stage: 0, Commitment: ResultCommitment(result, salt, provider)})
	return map[string][]byte{
		"commit":                commit,
		"commit_empty":          enc(0, &MsgCommitResult{Job: 1}),
		"commit_short_hash":     {0, 0xc4, 0x01, 0x80, 0x81, 0xff},
		"commit_trailing":       append(bytes.Clone(commit), 0x00),
		"reveal":                enc(1, &MsgRevealResult{Job: 1, Stage: 0, Result: result, Salt: salt}),
		"reveal_zero":           enc(1, &MsgRevealResult{}),
		"vote":                  enc(2, &MsgVoteDispute{Job: 1, Stage: 2, Result: result}),
		"vote_empty":            enc(2, &MsgVoteDispute{Job: 1, Stage: 2}),
		"vote_stage_overflow":   {2, 0xe6, 0x01, 0x83, 0x01, 0x00, 0x00, 0xa0, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66},
		"canary":                enc(3, &MsgRevealCanary{Job: 9, Answer: result, Salt: salt, StageHashes: []types.Hash{CanaryStageHash(result, salt)}}),
		"canary_job_noncanonic": {3, 0xc2, 0x81, 0x05},
		"empty":                 {},
		"garbage":               []byte("\x01\xf8\xff not a message"),
	}
}

// FuzzDecodeVerifierMsg runs arbitrary bytes through a verifier message
// decoder chosen by the first byte: no panic, refusals are ErrInvalidMsg,
// and what is accepted is canonical and accepted again.
func FuzzDecodeVerifierMsg(f *testing.F) {
	seeds := fuzzVerifierSeeds()
	for _, name := range slices.Sorted(maps.Keys(seeds)) {
		f.Add(seeds[name])
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		msgtest.Check(t, fuzzVerifierDecoders[int(in[0])%len(fuzzVerifierDecoders)], in[1:])
	})
}

// The seeds decode (or are refused) as their names say.
func TestFuzzVerifierSeeds(t *testing.T) {
	refused := map[string]bool{
		"commit_empty": true, "commit_short_hash": true, "commit_trailing": true, "vote_empty": true,
		"vote_stage_overflow": true, "canary_job_noncanonic": true, "garbage": true,
	}
	for name, in := range fuzzVerifierSeeds() {
		if len(in) == 0 {
			continue
		}
		d := fuzzVerifierDecoders[int(in[0])%len(fuzzVerifierDecoders)]
		_, err := d.Dec(in[1:])
		if got := err != nil; got != refused[name] {
			t.Errorf("seed %s (%s): refused = %v (%v), want %v", name, d.Name, got, err, refused[name])
		}
		msgtest.Check(t, d, in[1:])
	}
}
