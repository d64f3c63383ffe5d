package devnet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/node/pricing"
	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/types"
)

// SplitReport is what the split round did.
type SplitReport struct {
	// Result is the client's split job; Whole the whole model's greedy
	// text for the same prompt and token budget, computed in-process.
	Result *agent.SplitResult
	Whole  string
	// Liar is the stage-0 provider that nudged its residuals, LiarChain
	// the replica chain it held and LiarTombstoned whether the chain
	// tombstoned it.
	Liar           types.Address
	LiarChain      uint16
	LiarTombstoned bool
	// Downstream is the stage-1 provider of the liar's chain: it computed
	// faithfully on what it was given. DownstreamOutcome is how its slot
	// settled (its split_slot_settled event), DownstreamPaid what that
	// event paid it and DownstreamGain its balance after the round less
	// before.
	Downstream        types.Address
	DownstreamOutcome string
	DownstreamPaid    *uint256.Int
	DownstreamGain    *uint256.Int
}

// splitStages is how many stages the split round cuts the model into.
const splitStages = 2

// splitRound cuts the devnet's model into 2 slices, starts four slice
// providers (prov4 and prov5 hold stage 0, prov6 and prov7 stage 1;
// prov5 lies) and runs alice's 2-stage × 2-chain split job. The text
// must be the whole model's, stage 0 is disputed and settles by the
// validator's re-execution, the liar is slashed and tombstoned, and the
// honest stage 1 of the liar's chain is paid.
func (d *devnet) splitRound(report *Report) error {
	ctx, w := d.ctx, d.w
	n := d.beginRound("split inference: 2 stages × 2 replica chains, a lying stage-0 provider")
	fmt.Fprintln(w, "split inference is NOT confidential: stage 0 reads the prompt's tokens, stage 1 reads residuals from which the prompt can be recovered")
	fmt.Fprintln(w, "and every generated token, and so does a validator that re-executes a stage in a dispute. Only the CKKS pipeline (the round before this one) hides the data.")

	// The cut. Slicing is a deterministic copy: whoever cuts the same
	// model the same way gets the same files and hashes, so a slice is a
	// content-addressed blob like a model.
	dir := filepath.Join(d.home, "slices")
	fmt.Fprintf(w, "$ ogpu model split %s --stages %d --out slices\n", filepath.Base(d.modelPath), splitStages)
	info, err := llm.Inspect(d.modelPath)
	if err != nil {
		return err
	}
	ranges, err := llm.Cuts(info.Layers, splitStages, nil)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files, err := llm.WriteSlices(d.modelPath, dir, ranges)
	if err != nil {
		return err
	}
	manifest := llm.NewSplitManifest(info, files)
	ctxSize, batch := d.llm.ContextSize, d.llm.BatchSize
	whole := llm.EstimateStageMemory(info, llm.LayerRange{From: 0, To: info.Layers, Of: info.Layers}, ctxSize, batch)
	fmt.Fprintf(w, "-> %s: %s, %d layers, n_embd %d, vocabulary %d, %d bytes, sha256 %x...\n",
		filepath.Base(d.modelPath), info.Architecture, info.Layers, info.NEmbd, info.NVocab, info.Size, info.Hash[:6])
	fmt.Fprintf(w, "-> memory of the whole model (context %d, batch %d): %s\n", ctxSize, batch, memText(whole))
	for i, f := range files {
		m := llm.EstimateStageMemory(info, f.Range, ctxSize, batch)
		fmt.Fprintf(w, "-> stage %d: layers %d..%d, %s, %d bytes, sha256 %x; memory %s (%d%% of the whole)\n",
			i, f.Range.From, f.Range.To-1, filepath.Base(f.Path), f.Size, f.Hash, memText(m), 100*m.Total/max(whole.Total, 1))
	}

	// Four slice providers: two per stage; prov5 nudges the residuals it
	// sends, too little to change a token.
	fmt.Fprintln(w, "prov4 and prov5 start serving stage 0's slice, prov6 and prov7 stage 1's (each runs it in a supervised worker process), 200ogpu bonded each;")
	fmt.Fprintln(w, "prov5 starts with --devnet-lie: it nudges the residuals it sends, too little to change a token, so only the transcripts show it")
	provs := make([]*provider, 4)
	for i := range provs {
		acct := d.accts[6+i]
		stage := i / 2
		nodeKey, err := p2p.LoadOrCreateKey(filepath.Join(d.home, "p2p", acct.name, "node_key"))
		if err != nil {
			return err
		}
		p := &provider{acct: acct, price: pricing.PerToken{Base: milliOGPU(100), PerToken: milliOGPU(40 + 5*uint64(i))}}
		if p.host, p.store, err = d.newHost(acct.name, nodeKey, agent.NewAccess(d.c), d.boot); err != nil {
			return err
		}
		d.onStop(func() { p.host.Close() })
		d.onStop(func() {
			if p.agent != nil {
				p.agent.Close()
			}
		})
		slice, err := p.store.PutFile(files[stage].Path)
		if err != nil {
			return err
		}
		if slice != files[stage].Hash {
			return fmt.Errorf("%s: the slice's blob id %x is not its sha256 %x", acct.name, slice, files[stage].Hash)
		}
		lie := i == 1
		if err := d.startProvider(p, func(c *agent.ProviderConfig) {
			c.Models, c.Want, c.Pipeline, c.Slices, c.Lie = nil, nil, false, []types.Hash{slice}, lie
		}); err != nil {
			return err
		}
		provs[i] = p
	}
	liar := provs[1]

	// The whole model's greedy text: what the split job must print.
	want, err := d.wholeText("Once upon a time", 40)
	if err != nil {
		return err
	}
	vocab, err := llm.LoadVocab(d.modelPath)
	if err != nil {
		return err
	}
	defer vocab.Close()
	job := agent.SplitJob{
		Manifest: manifest, Vocab: vocab, Prompt: "Once upon a time", MaxTokens: 40, Redundancy: 2,
		MaxPrice: types.OGPU(5), Req: market.Requirements{MinStake: types.OGPU(100)},
		Windows:     market.Windows{Bid: 4, Reveal: 3, Execute: 40, Verify: 15},
		ContextSize: ctxSize, Chunk: batch,
	}
	before := map[types.Address]*uint256.Int{}
	for _, p := range provs {
		v, err := d.c.Account(ctx, p.acct.addr)
		if err != nil {
			return err
		}
		before[p.acct.addr] = v.Balance
	}

	fmt.Fprintf(w, "alice: ogpu job run --model %s --stages %d --prompt %q --max-tokens %d --redundancy 2 --max-price 5ogpu\n",
		filepath.Base(d.modelPath), splitStages, job.Prompt, job.MaxTokens)
	watch, err := d.watchSplit(d.accts[0].addr, provs)
	if err != nil {
		return err
	}
	names := d.names()
	var started atomic.Bool
	res, err := d.client.RunSplit(ctx, job, func(f string, a ...any) {
		d.println("-> " + names.Replace(fmt.Sprintf(f, a...)))
	}, func(piece string) {
		if !started.Swap(true) {
			piece = "-> streamed through the replica chains in lockstep: " + job.Prompt + piece
		}
		fmt.Fprint(w, piece)
	})
	settled := watch.wait(err == nil)
	if err != nil {
		return err
	}
	sr := &SplitReport{Result: res, Whole: want.Text, Liar: liar.acct.addr}
	report.Split = sr
	d.println(fmt.Sprintf("text: %q", res.Text))
	if res.Text != want.Text || len(res.Tokens) != len(want.Tokens) {
		fmt.Fprintf(w, "the whole model's greedy text, computed here: %q\n", want.Text)
		return fmt.Errorf("the split job's text (%d tokens) differs from the whole model's (%d tokens)", len(res.Tokens), len(want.Tokens))
	}
	fmt.Fprintf(w, "= the whole model's greedy text, computed here in one llama.cpp context (%d tokens, identical)\n", len(want.Tokens))

	// Who held what, and how each slot ended.
	j, err := d.c.Job(ctx, res.Job)
	if err != nil {
		return err
	}
	if len(j.Tasks) != splitStages {
		return fmt.Errorf("job %d has %d tasks, want %d", res.Job, len(j.Tasks), splitStages)
	}
	found := false
	for c, s := range j.Tasks[0].Slots {
		if s.Provider == liar.acct.addr && c < len(j.Tasks[1].Slots) {
			sr.LiarChain, sr.Downstream, found = uint16(c), j.Tasks[1].Slots[c].Provider, true
		}
	}
	if !found {
		return fmt.Errorf("prov5 holds no slot of stage 0 of job %d", res.Job)
	}
	if e, ok := settled[slotKey{1, sr.LiarChain}]; ok {
		sr.DownstreamOutcome, sr.DownstreamPaid = e.Outcome, e.Paid
	}
	pv, err := d.c.Provider(ctx, liar.acct.addr)
	if err != nil {
		return err
	}
	sr.LiarTombstoned = pv.Tombstoned
	after, err := d.c.Account(ctx, sr.Downstream)
	if err != nil {
		return err
	}
	sr.DownstreamGain = new(uint256.Int)
	if after.Balance.Gt(before[sr.Downstream]) {
		sr.DownstreamGain.Sub(after.Balance, before[sr.Downstream])
	}
	fmt.Fprintf(w, "job %d: stages settled %v; providers paid %s, alice refunded %s, compensated %s; %d blocks from post to payment, %s (first token %s after the award, then %s)\n",
		res.Job, res.Outcomes, types.FormatAmount(res.Paid), types.FormatAmount(res.Refunded), types.FormatAmount(res.Compensated),
		res.Completed-res.Posted, res.Elapsed.Round(time.Millisecond), res.TTFT.Round(time.Millisecond), res.Decode.Round(time.Millisecond))
	fmt.Fprintf(w, "prov5 held replica chain %d of stage 0: tombstoned %v, reputation %d/1000, bonded %s\n",
		sr.LiarChain, pv.Tombstoned, pv.Score, types.FormatAmount(pv.Bonded))
	fmt.Fprintf(w, "%s, stage 1 of the same chain, computed faithfully on the nudged residuals: held until stage 0's verdict, then settled %s, paid %s\n"+
		"   (its input was the lie, so nobody vouches for its work: unpaid, not slashed); stage 1 of the honest chain, alone, was audited: %s\n",
		d.name(sr.Downstream), sr.DownstreamOutcome, formatOr0(sr.DownstreamPaid), outcomeOf(res.Outcomes, 1))
	switch {
	case len(res.Outcomes) == 0 || res.Outcomes[0] != "verdict":
		return fmt.Errorf("stage 0 settled %v, want verdict", res.Outcomes)
	case !pv.Tombstoned:
		return errors.New("the lying stage-0 provider was not tombstoned")
	case sr.DownstreamOutcome != market.SplitDownstreamOfLoser || (sr.DownstreamPaid != nil && !sr.DownstreamPaid.IsZero()):
		return fmt.Errorf("stage 1 of the liar's chain (%s) settled %q, paid %s: want %s, unpaid (nothing checked its input)",
			d.name(sr.Downstream), sr.DownstreamOutcome, formatOr0(sr.DownstreamPaid), market.SplitDownstreamOfLoser)
	case outcomeOf(res.Outcomes, 1) != market.OutcomeAudited:
		return fmt.Errorf("stage 1 settled %q, want %s: the honest chain's lone slot is audited before it is paid", outcomeOf(res.Outcomes, 1), market.OutcomeAudited)
	}
	// Let the providers' last transactions land before the agents stop.
	if err := d.c.WaitHeight(ctx, res.Completed+2); err != nil {
		return err
	}
	return d.printBalances(fmt.Sprintf("after round %d", n))
}

// println writes line on a line of its own: after a streamed text that
// left its line open, on the next.
func (d *devnet) println(line string) {
	if lw, ok := d.w.(lineWriter); ok {
		_, _ = lw.WriteLine([]byte(line + "\n"))
		return
	}
	fmt.Fprintln(d.w, line)
}

// wholeText is the whole model's greedy text for prompt, in one llama.cpp
// context with the providers' options.
func (d *devnet) wholeText(prompt string, maxTokens int) (*llm.Output, error) {
	m, err := llm.Load(d.modelPath, d.llm)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	return m.Generate(d.ctx, llm.Request{Prompt: prompt, MaxTokens: maxTokens}, nil)
}

// slotKey is a split slot: its stage and replica chain.
type slotKey struct{ stage, chain uint16 }

// splitWatch prints the split job's chain events that the client's
// progress does not (transcripts, the divergence, slots settled on their
// own, the liar's tombstone, the voters' pay) and keeps the
// split_slot_settled events.
type splitWatch struct {
	stop    context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	settled map[slotKey]market.EventSplitSlotSettled
}

// watchSplit follows the chain from the next block for the first split
// job client posts, until it completes (or wait stops it).
func (d *devnet) watchSplit(client types.Address, provs []*provider) (*splitWatch, error) {
	sctx, stop := context.WithCancel(d.ctx)
	blocks, err := d.c.Subscribe(sctx, 0)
	if err != nil {
		stop()
		return nil, err
	}
	sw := &splitWatch{stop: stop, done: make(chan struct{}), settled: map[slotKey]market.EventSplitSlotSettled{}}
	ours := map[types.Address]bool{}
	for _, p := range provs {
		ours[p.acct.addr] = true
	}
	names := d.names()
	say := func(f string, a ...any) { d.println("-> " + names.Replace(fmt.Sprintf(f, a...))) }
	d.goAgent(func() {
		defer close(sw.done)
		var job uint64
		posted := false
		for b := range blocks {
			for _, ev := range b.Events {
				switch ev.Type {
				case market.EventJobPosted{}.EventType():
					var e market.EventJobPosted
					if !posted && types.DecodeEvent(ev, &e) == nil && e.Client == client && e.Kind == market.KindSplit {
						job, posted = e.Job, true
					}
				case market.EventTranscriptRevealed{}.EventType():
					var e market.EventTranscriptRevealed
					if posted && types.DecodeEvent(ev, &e) == nil && e.Job == job {
						say("stage %d chain %d: %s revealed its transcript: %d frames, received %x..., sent %x...", e.Stage, e.Chain, e.Provider.Hex(), e.Steps, e.Hin[:6], e.Hout[:6])
					}
				case market.EventSplitInputsPending{}.EventType():
					var e market.EventSplitInputsPending
					if posted && types.DecodeEvent(ev, &e) == nil && e.Job == job {
						say("inputs to prove by height %d (stage/chain): %v", e.ProveBy, e.Slots)
					}
				case market.EventHandoffProven{}.EventType():
					var e market.EventHandoffProven
					if posted && types.DecodeEvent(ev, &e) == nil && e.Job == job {
						say("stage %d chain %d: %s proved its input with %s's hand-off signature", e.Stage, e.Chain, e.Provider.Hex(), e.Signer.Hex())
					}
				case market.EventSplitDiverged{}.EventType():
					var e market.EventSplitDiverged
					if posted && types.DecodeEvent(ev, &e) == nil && e.Job == job {
						say("split_diverged: stage %d is the first stage whose chains received the same input (%d frames, %x...) and sent different outputs: it is disputed; later stages are not compared", e.Stage, e.Steps, e.Hin[:6])
					}
				case market.EventSplitSlotSettled{}.EventType():
					var e market.EventSplitSlotSettled
					if posted && types.DecodeEvent(ev, &e) == nil && e.Job == job {
						sw.mu.Lock()
						sw.settled[slotKey{e.Stage, e.Chain}] = e
						sw.mu.Unlock()
						say("stage %d chain %d: %s settled on its own: %s, paid %s", e.Stage, e.Chain, e.Provider.Hex(), e.Outcome, formatOr0(e.Paid))
					}
				case market.EventProviderJailed{}.EventType():
					var e market.EventProviderJailed
					if posted && types.DecodeEvent(ev, &e) == nil && ours[e.Provider] {
						what := fmt.Sprintf("jailed until height %d", e.Until)
						if e.Tombstoned {
							what = "tombstoned (never eligible again)"
						}
						say("%s %s: %s", e.Provider.Hex(), what, e.Reason)
					}
				case market.EventVotersPaid{}.EventType():
					var e market.EventVotersPaid
					if posted && types.DecodeEvent(ev, &e) == nil && e.Job == job {
						say("stage %d: %d voting validator(s) paid %s", e.Stage, e.Voters, types.FormatAmount(e.Amount))
					}
				case market.EventJobCompleted{}.EventType():
					var e market.EventJobCompleted
					if posted && types.DecodeEvent(ev, &e) == nil && e.Job == job {
						stop()
					}
				}
			}
		}
	})
	return sw, nil
}

// wait returns the slots settled on their own once the watch has seen the
// job complete; with ok false (the job failed) it stops the watch first.
func (sw *splitWatch) wait(ok bool) map[slotKey]market.EventSplitSlotSettled {
	if !ok {
		sw.stop()
	}
	select {
	case <-sw.done:
	case <-time.After(10 * time.Second): // the client saw the completion: so will the watch
		sw.stop()
		<-sw.done
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.settled
}

// memText formats a stage's memory estimate.
func memText(m llm.StageMemory) string {
	return fmt.Sprintf("%s (weights %s, KV cache %s, output %s)", kib(m.Total), kib(m.Weights), kib(m.KV), kib(m.Output))
}

func kib(b uint64) string {
	if b < 1<<20 {
		return fmt.Sprintf("%.1f KiB", float64(b)/1024)
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

func milliOGPU(n uint64) *uint256.Int {
	return new(uint256.Int).Div(types.OGPU(n), uint256.NewInt(1000))
}

func formatOr0(a *uint256.Int) string {
	if a == nil {
		return "0ogpu"
	}
	return types.FormatAmount(a)
}

// outcomeOf is outcomes[i], or "" when there is none.
func outcomeOf(outcomes []string, i int) string {
	if i < len(outcomes) {
		return outcomes[i]
	}
	return ""
}
