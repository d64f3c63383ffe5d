package chain

import (
	"testing"

	"github.com/ogpu-network/ogpu/finetune"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/types"
)

// A spammer at the minimum fee pays for the hashing it makes the chain
// do: an opening or a fine-tune reveal is charged one match_gas per
// sha256 of its proofs, so the largest costs more than the smallest by
// exactly that.
func TestFinetuneMessagesPayTheirHashes(t *testing.T) {
	p := genesis.DefaultParams()
	proof := make([]types.Hash, finetune.MaxProofLen)
	small := &finetune.MsgOpenCheckpoints{Job: 1, Round: 1, Root: types.Hash{1}, Openings: []finetune.Opening{{Step: 1}}}
	big := &finetune.MsgOpenCheckpoints{Job: 1, Round: 1, Root: types.Hash{1}}
	for i := range finetune.MaxOpenings {
		big.Openings = append(big.Openings, finetune.Opening{Step: uint64(i), Proof: proof})
	}
	reveal := &market.MsgRevealFinetune{Job: 1, Root: types.Hash{1}, Final: types.Hash{2}, ProofBase: proof, ProofFinal: proof}
	works := MsgWorks([]types.RawMsg{small.Raw(), big.Raw(), reveal.Raw()})
	if works[0].Matches != 2 || works[1].Matches != big.Hashes() || works[1].Matches != uint64(finetune.MaxOpenings*(finetune.MaxProofLen+2)) || works[2].Matches != reveal.Hashes() {
		t.Fatalf("work %+v; want the messages' hash counts", works)
	}
	gs, gb := p.Gas(0, works[:1]), p.Gas(0, works[1:2])
	if gb-gs != (big.Hashes()-small.Hashes())*p.WorkGas.MatchGas {
		t.Fatalf("gas %d and %d: the difference is not the extra hashes at match_gas", gs, gb)
	}
}
