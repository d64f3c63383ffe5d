package split

import (
	"bytes"
	"crypto/ecdsa"
	"strings"
	"testing"

	ethcrypto "github.com/ethereum/go-ethereum/crypto"
)

// TestReplayFindsTheLiar: a validator replays a disputed stage on its
// input transcript and gets the honest stage's commitment, not the
// liar's, for every stage of both chains; a tampered transcript or one
// checked against the wrong upstream is refused.
func TestReplayFindsTheLiar(t *testing.T) {
	const k, liar = 3, 1
	lie := func(pos int, row []float32) {
		if pos >= 6 {
			row[0] += 1e-3 // small: tokens agree, transcripts do not (P14)
		}
	}
	p := newPipeline(t, k, 2, func(_ *pipeline, chain, stage int, c *StageConfig) {
		if chain == 1 && stage == liar {
			c.Forwarder.(*fakeStage).lie = lie
		}
	})
	if _, err := Generate(testCtx(t), p.csrv, p.clientConfig(10), testPrompt); err != nil {
		t.Fatal(err)
	}
	waitStages(t, p)
	upstream := func(j, s int) *ecdsa.PrivateKey {
		if s == 0 {
			return p.client.key
		}
		return p.nodes[j][s-1].key
	}
	for j := range p.r {
		for s := range k {
			var tr bytes.Buffer
			if _, err := p.stages[j][s].Transcript().WriteTo(&tr); err != nil {
				t.Fatal(err)
			}
			c := ReplayConfig{ChainID: testChainID, Job: testJob, Chain: uint16(j), Stage: uint16(s), Stages: k,
				Upstream: ethcrypto.PubkeyToAddress(upstream(j, s).PublicKey), Limits: splitLimits}
			got, err := Replay(bytes.NewReader(tr.Bytes()), c, newFakeStage(s, k))
			if err != nil {
				t.Fatalf("chain %d stage %d: %v", j, s, err)
			}
			claimed := p.stages[j][s].Commitment()
			if lying := j == 1 && s == liar; (got == claimed) == lying {
				t.Fatalf("chain %d stage %d (liar %v): replay %+v, committed %+v", j, s, lying, got, claimed)
			}
			if j == 1 && s == liar && (got.Hin != claimed.Hin || got != p.stages[0][s].Commitment()) {
				t.Fatalf("the liar's replay %+v should equal the honest chain's %+v", got, p.stages[0][s].Commitment())
			}
			// Checked against another signer, or tampered: refused.
			c.Upstream = ethcrypto.PubkeyToAddress(p.nodes[1-j][0].key.PublicKey)
			if _, err := Replay(bytes.NewReader(tr.Bytes()), c, newFakeStage(s, k)); err == nil || !strings.Contains(err.Error(), "transcript frame 1") {
				t.Fatalf("wrong upstream: %v", err)
			}
		}
	}
	var tr bytes.Buffer
	p.stages[0][1].Transcript().WriteTo(&tr)
	bad := bytes.Clone(tr.Bytes())
	bad[len(bad)/2] ^= 0x40
	c := ReplayConfig{ChainID: testChainID, Job: testJob, Chain: 0, Stage: 1, Stages: k,
		Upstream: ethcrypto.PubkeyToAddress(p.nodes[0][0].key.PublicKey), Limits: splitLimits}
	if _, err := Replay(bytes.NewReader(bad), c, newFakeStage(1, k)); err == nil {
		t.Fatal("a tampered transcript replayed")
	}
}
