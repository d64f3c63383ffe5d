package finetune

import (
	"bytes"
	"maps"
	"slices"
	"testing"

	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/types/msgtest"
)

// fuzzDecoders are every message decoder of the package, selected by the
// first byte of a fuzz input (modulo their number).
var fuzzDecoders = []msgtest.Decoder{
	{Name: "open-checkpoints", Type: types.MsgTypeOpenCheckpoints, Dec: msgtest.Raw(DecodeMsgOpenCheckpoints)},
	{Name: "seal-game-vote", Type: types.MsgTypeSealGameVote, Dec: msgtest.Raw(DecodeMsgSealGameVote)},
	{Name: "open-game-vote", Type: types.MsgTypeOpenGameVote, Dec: msgtest.Raw(DecodeMsgOpenGameVote)},
}

// fuzzSeeds are a valid encoding of every message and near misses, each
// prefixed with its decoder's index.
func fuzzSeeds() map[string][]byte {
	enc := func(i int, m interface{ Raw() types.RawMsg }) []byte {
		return append([]byte{byte(i)}, m.Raw().Data...)
	}
	hs := checkpoints(9, 1)
	op := func(k uint64) Opening { return Opening{Step: k, Hash: hs[k], Proof: Prove(hs, k)} }
	good := &MsgOpenCheckpoints{Job: 3, Stage: 1, Root: Root(hs), Round: 1, Openings: []Opening{op(0), op(4), op(8)}}
	goodBz := enc(0, good)
	long := &MsgOpenCheckpoints{Job: 3, Round: 2, Openings: []Opening{{Step: 1, Proof: make([]types.Hash, MaxProofLen+1)}}}
	many := &MsgOpenCheckpoints{Job: 3, Round: 2}
	for k := range uint64(MaxOpenings + 1) {
		many.Openings = append(many.Openings, Opening{Step: k})
	}
	return map[string][]byte{
		"open":           goodBz,
		"open_trailing":  append(bytes.Clone(goodBz), 0x00),
		"open_round0":    enc(0, &MsgOpenCheckpoints{Job: 3, Openings: good.Openings}),
		"open_none":      enc(0, &MsgOpenCheckpoints{Job: 3, Round: 1}),
		"open_unordered": enc(0, &MsgOpenCheckpoints{Job: 3, Round: 1, Openings: []Opening{op(4), op(0)}}),
		"open_long":      enc(0, long),
		"open_many":      enc(0, many),
		"seal":           enc(1, &MsgSealGameVote{Job: 3, Stage: 1, Commitment: types.Hash{7}}),
		"seal_empty":     enc(1, &MsgSealGameVote{Job: 3}),
		"vote_open":      enc(2, &MsgOpenGameVote{Job: 3, HStar: types.Hash{1}, Salt: types.Hash{2}}),
		"vote_open_cut":  enc(2, &MsgOpenGameVote{Job: 3})[:10],
		"empty":          {},
		"garbage":        []byte("\x00\xf8\xff not a message"),
	}
}

// FuzzDecodeFinetuneMsg runs arbitrary bytes through a message decoder
// chosen by the first byte: no panic, refusals are ErrInvalidMsg, and
// what is accepted is canonical and accepted again.
func FuzzDecodeFinetuneMsg(f *testing.F) {
	seeds := fuzzSeeds()
	for _, name := range slices.Sorted(maps.Keys(seeds)) {
		f.Add(seeds[name])
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		msgtest.Check(t, fuzzDecoders[int(in[0])%len(fuzzDecoders)], in[1:])
	})
}

// The seeds decode (or are refused) as their names say.
func TestFuzzFinetuneSeeds(t *testing.T) {
	accepted := map[string]bool{"open": true, "seal": true, "vote_open": true}
	for name, in := range fuzzSeeds() {
		if len(in) == 0 {
			continue
		}
		d := fuzzDecoders[int(in[0])%len(fuzzDecoders)]
		_, err := d.Dec(in[1:])
		if got := err == nil; got != accepted[name] {
			t.Errorf("seed %s (%s): accepted = %v (%v), want %v", name, d.Name, got, err, accepted[name])
		}
		msgtest.Check(t, d, in[1:])
	}
	if n := (&MsgOpenCheckpoints{Openings: []Opening{{Proof: make([]types.Hash, 5)}, {}}}).Hashes(); n != 9 {
		t.Fatalf("Hashes() = %d, want 5+2 and 0+2", n)
	}
}
