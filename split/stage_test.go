package split

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/types"
)

func waitStages(t *testing.T, p *pipeline) {
	t.Helper()
	for j := range p.r {
		for s := range p.k {
			if err := p.stages[j][s].Wait(testCtx(t)); err != nil {
				t.Fatalf("stage %d of chain %d: %v", s, j, err)
			}
		}
	}
}

// TestSplitMatchesWhole: K stages × 2 replica chains on separate real
// hosts give, token for token, what the composed model gives in one
// process; honest chains commit equal transcripts; every receiver's kept
// signature proves exactly what its upstream committed to having sent,
// and the stored transcript verifies to it.
func TestSplitMatchesWhole(t *testing.T) {
	for _, k := range []int{2, 3} {
		t.Run(fmt.Sprintf("stages=%d", k), func(t *testing.T) {
			const maxTokens = 12
			want := wholeModel(k, testPrompt, maxTokens, nil)
			if len(slices.Compact(slices.Clone(want))) < 3 {
				t.Fatalf("reference output %v is too uniform to tell anything apart", want)
			}
			p := newPipeline(t, k, 2)
			var streamed []int32
			c := p.clientConfig(maxTokens)
			c.OnToken = func(tok int32) { streamed = append(streamed, tok) }
			res, err := Generate(testCtx(t), p.csrv, c, testPrompt)
			if err != nil {
				t.Fatal(err)
			}
			if res.Divergence != nil {
				t.Fatalf("honest chains diverged: %v", res.Divergence)
			}
			if !slices.Equal(res.Tokens, want) || !slices.Equal(streamed, want) {
				t.Fatalf("split gave %v (streamed %v), the whole model %v", res.Tokens, streamed, want)
			}
			if !res.Agreed() {
				t.Fatal("client records differ between honest chains")
			}
			waitStages(t, p)
			// 3 prefill chunks, 11 fed-back tokens, 1 close.
			const frames = 3 + maxTokens - 1 + 1
			for s := range k {
				c0 := p.stages[0][s].Commitment()
				if c0.T != frames || p.stages[0][s].Sent() != frames {
					t.Fatalf("stage %d: T %d, sent %d, want %d", s, c0.T, p.stages[0][s].Sent(), frames)
				}
				for j := 1; j < p.r; j++ {
					if cj := p.stages[j][s].Commitment(); cj != c0 {
						t.Fatalf("stage %d: chain %d commits %+v, chain 0 %+v", s, j, cj, c0)
					}
				}
			}
			for j := range p.r {
				rec := res.Chains[j]
				if rec.SentSteps != frames || rec.SentRun != p.stages[j][0].Commitment().Hin {
					t.Fatalf("chain %d: the client sent (%d, %x), stage 0 received %+v", j, rec.SentSteps, rec.SentRun, p.stages[j][0].Commitment())
				}
				last := p.stages[j][k-1].Commitment()
				if rec.Received.Steps != frames || rec.Received.Hrun != last.Hout {
					t.Fatalf("chain %d: the client received (%d, %x), the last stage sent %+v", j, rec.Received.Steps, rec.Received.Hrun, last)
				}
				if who, err := rec.Received.Signer(); err != nil || who != addrOf(t, p.nodes[j][k-1]) {
					t.Fatalf("chain %d: the client's evidence recovers %s, %v", j, who, err)
				}
				for s := range k {
					st := p.stages[j][s]
					up, upHout := p.client, res.Chains[j].SentRun
					if s > 0 {
						up, upHout = p.nodes[j][s-1], p.stages[j][s-1].Commitment().Hout
					}
					ev, ok := st.Evidence()
					if !ok {
						t.Fatalf("stage %d chain %d kept no evidence", s, j)
					}
					// What MsgProveHandoff will check.
					signer, err := market.HandoffSigner(market.HandoffDigest(testChainID, testJob, uint16(j), ev.Link.From, ev.Steps, ev.Hrun), ev.Sig)
					if err != nil || signer != addrOf(t, up) || ev.Hrun != upHout || ev.Steps != frames {
						t.Fatalf("stage %d chain %d: evidence (%d, %x) by %s (%v); upstream %s committed %x", s, j, ev.Steps, ev.Hrun, signer, err, addrOf(t, up), upHout)
					}
					var buf bytes.Buffer
					if _, err := st.Transcript().WriteTo(&buf); err != nil {
						t.Fatal(err)
					}
					from, carries := uint16(s-1), KindActivations
					if s == 0 {
						from, carries = market.ClientStage, KindTokens
					}
					ve, err := VerifyTranscript(&buf, ReceiverConfig{Link: Link{ChainID: testChainID, Job: testJob, Chain: uint16(j), From: from}, Signer: addrOf(t, up), Limits: splitLimits, Carries: carries})
					if err != nil || ve.Hrun != st.Commitment().Hin {
						t.Fatalf("stage %d chain %d: stored transcript verifies to %x, %v; committed Hin %x", s, j, ve.Hrun, err, st.Commitment().Hin)
					}
				}
			}
			// Equal work in two chains is equal bytes (P7: any holder
			// may publish the transcript).
			for s := range k {
				a, b := p.stages[0][s].Transcript().Frames(), p.stages[1][s].Transcript().Frames()
				for i := range a {
					if !bytes.Equal(a[i][:len(a[i])-SigSize], b[i][:len(b[i])-SigSize]) {
						t.Fatalf("stage %d frame %d differs between honest chains", s, i+1)
					}
				}
			}
		})
	}
}

func addrOf(t testing.TB, n node) types.Address {
	t.Helper()
	a, err := p2p.AddressOf(n.id())
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestSplitEndToken: generation stops at an end token, which is kept
// (as the whole-model Generate keeps its end-of-generation token).
func TestSplitEndToken(t *testing.T) {
	want := wholeModel(2, testPrompt, 12, nil)
	end := want[4]
	cut := slices.Index(want, end) + 1
	p := newPipeline(t, 2, 2)
	c := p.clientConfig(12)
	c.End = func(tok int32) bool { return tok == end }
	res, err := Generate(testCtx(t), p.csrv, c, testPrompt)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Tokens, want[:cut]) {
		t.Fatalf("tokens %v, want %v", res.Tokens, want[:cut])
	}
	waitStages(t, p)
}

// TestLyingStageHalts: a stage that perturbs its output in one chain
// makes the client halt at the first token on which the chains differ,
// with the agreed prefix; the commitments then single out the liar as
// the first stage whose outputs differ on equal inputs, while the honest
// stage downstream of it has an established input (it equals its
// upstream's committed output) and so is paid, not blamed (P15).
func TestLyingStageHalts(t *testing.T) {
	const k, liar, lieFrom, maxTokens = 3, 1, 13, 12
	lie := func(pos int, row []float32) {
		if pos >= lieFrom {
			row[0] += 0.75
		}
	}
	honest := wholeModel(k, testPrompt, maxTokens, nil)
	lying := wholeModel(k, testPrompt, maxTokens, map[int]func(int, []float32){liar: lie})
	d := 0
	for d < maxTokens && honest[d] == lying[d] {
		d++
	}
	if d == maxTokens || d == 0 {
		t.Fatalf("the perturbation must change a generated token after the first: honest %v lying %v", honest, lying)
	}
	p := newPipeline(t, k, 2, func(_ *pipeline, chain, stage int, c *StageConfig) {
		if chain == 1 && stage == liar {
			c.Forwarder.(*fakeStage).lie = lie
		}
	})
	var streamed []int32
	c := p.clientConfig(maxTokens)
	c.OnToken = func(tok int32) { streamed = append(streamed, tok) }
	res, err := Generate(testCtx(t), p.csrv, c, testPrompt)
	if err != nil {
		t.Fatal(err)
	}
	div := res.Divergence
	if div == nil {
		t.Fatalf("no divergence; tokens %v", res.Tokens)
	}
	if !slices.Equal(res.Tokens, honest[:d]) || !slices.Equal(streamed, honest[:d]) {
		t.Fatalf("agreed tokens %v (streamed %v), want the prefix %v", res.Tokens, streamed, honest[:d])
	}
	wantPos := uint32(len(testPrompt) + d)
	wantStep := uint32(3 + d) // 3 prefill chunks, then one step per fed-back token
	if div.Pos != wantPos || div.Step != wantStep || !slices.Equal(div.Tokens, []int32{honest[d], lying[d]}) {
		t.Fatalf("divergence %+v, want step %d position %d tokens [%d %d]", div, wantStep, wantPos, honest[d], lying[d])
	}
	waitStages(t, p)
	// The chain's rule, on the commitments: scan stages from 0; the
	// first with equal inputs and different outputs is disputed.
	first := -1
	for s := range k {
		a, b := p.stages[0][s].Commitment(), p.stages[1][s].Commitment()
		if a.Hin == b.Hin && a.Hout != b.Hout {
			first = s
			break
		}
		if a != b {
			t.Fatalf("stage %d: inputs differ before any stage diverged", s)
		}
	}
	if first != liar {
		t.Fatalf("the rule disputes stage %d, the liar is stage %d", first, liar)
	}
	for j := range p.r {
		for s := 1; s < k; s++ {
			if p.stages[j][s].Commitment().Hin != p.stages[j][s-1].Commitment().Hout {
				t.Fatalf("chain %d stage %d: input not established by its upstream's output", j, s)
			}
		}
	}
}

// TestForwarderErrorReachesClient: a stage whose runtime fails sends an
// error frame down the chain; the client stops with it.
func TestForwarderErrorReachesClient(t *testing.T) {
	p := newPipeline(t, 3, 2, func(_ *pipeline, chain, stage int, c *StageConfig) {
		if chain == 0 && stage == 1 {
			c.Forwarder.(*fakeStage).fail = func(pos int) error {
				if pos == 12 {
					return errors.New("llama_decode returned -3")
				}
				return nil
			}
		}
	})
	_, err := Generate(testCtx(t), p.csrv, p.clientConfig(12), testPrompt)
	if !errors.Is(err, ErrStage) || !strings.Contains(err.Error(), "chain 0") || !strings.Contains(err.Error(), "stage 1 cannot run positions 12–12: llama_decode returned -3") {
		t.Fatalf("client error %v", err)
	}
	if err := p.stages[0][1].Wait(testCtx(t)); err == nil || !strings.Contains(err.Error(), "llama_decode") {
		t.Fatalf("failing stage: %v", err)
	}
	if err := p.stages[0][2].Wait(testCtx(t)); !errors.Is(err, ErrStage) {
		t.Fatalf("downstream of the failing stage: %v", err)
	}
}

// TestLyingStageHaltsInPrefill: a divergence on a prefill chunk's token
// halts before any token is generated; the chunks still in flight are
// drained and every stage closes cleanly with a final transcript.
func TestLyingStageHaltsInPrefill(t *testing.T) {
	p := newPipeline(t, 2, 2, func(_ *pipeline, chain, stage int, c *StageConfig) {
		if chain == 1 && stage == 0 {
			c.Forwarder.(*fakeStage).lie = func(_ int, row []float32) {
				for i := range row {
					row[i] = -row[i]
				}
			}
		}
	})
	res, err := Generate(testCtx(t), p.csrv, p.clientConfig(12), testPrompt)
	if err != nil {
		t.Fatal(err)
	}
	div := res.Divergence
	if div == nil || len(res.Tokens) != 0 || div.Step < 1 || div.Step > 3 || div.Pos != []uint32{4, 8, 10}[div.Step-1] {
		t.Fatalf("divergence %+v, tokens %v: want a prefill step and no token", div, res.Tokens)
	}
	waitStages(t, p)
	for j := range p.r {
		if c := p.stages[j][1].Commitment(); c.T != 4 { // 3 chunks and the close
			t.Fatalf("chain %d last stage: T %d, want 4", j, c.T)
		}
	}
}

// TestClientRefusedByStage0: a client that stage 0 does not admit (not
// the job's client) learns why at once instead of waiting for tokens.
func TestClientRefusedByStage0(t *testing.T) {
	p := newPipeline(t, 2, 1)
	impostor := newNode(t)
	isrv := newServer(t, impostor, p.authorize(func(uint16, uint16) bool { return true }))
	connect(t, impostor, p.nodes[0][0])
	c := p.clientConfig(4)
	c.Key = impostor.key
	_, err := Generate(testCtx(t), isrv, c, testPrompt)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "may not send job 7 chain 0 from the client") {
		t.Fatalf("impostor client: %v", err)
	}
	if n := p.fakes[0][0].Calls(); n != 0 {
		t.Fatalf("stage 0 ran the impostor's prompt %d times", n)
	}
}
