package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/holiman/uint256"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/split"
	"github.com/ogpu-network/ogpu/types"
)

// SplitJob is a split inference job to post: one model cut into the
// manifest's stages, run by Redundancy replica chains in lockstep.
type SplitJob struct {
	Manifest *llm.SplitManifest
	// Vocab tokenizes the prompt and renders the tokens (the whole model's
	// or stage 0's slice's vocabulary).
	Vocab      *llm.Vocab
	Prompt     string
	MaxTokens  uint64
	Redundancy uint16
	MaxPrice   *uint256.Int
	Req        market.Requirements
	Windows    market.Windows
	// ContextSize and Chunk bound the hand-offs: the providers' context
	// (default llm.DefaultContextSize) and the prefill chunk per frame
	// (default llm.DefaultBatchSize).
	ContextSize, Chunk int
	// StepTimeout is how long a chain may take for one token before the
	// client looks for a dead stage and replaces it
	// (split.DefaultStepTimeout if 0).
	StepTimeout time.Duration
}

// SplitResult is how a split job ended.
type SplitResult struct {
	Job    uint64
	Tokens []int  // agreed tokens, the end-of-generation token included
	Text   string // their text without it
	// Divergence is set when the replica chains disagreed on a token:
	// generation halted there and the chain disputes the first stage whose
	// outputs differ on equal inputs.
	Divergence *split.Divergence
	// Outcomes are each stage's settlement outcome.
	Outcomes    []string
	Paid        *uint256.Int
	Refunded    *uint256.Int
	Compensated *uint256.Int
	Posted      int64
	Completed   int64
	Elapsed     time.Duration
	// TTFT is the time from the award to the first agreed token; Decode
	// the time of the rest.
	TTFT, Decode time.Duration
}

// splitServer returns the client's split.Server (one per host).
func (c *Client) splitServer(ctx context.Context) (*split.Server, error) {
	c.splitMu.Lock()
	defer c.splitMu.Unlock()
	if c.splitSrv != nil {
		return c.splitSrv, nil
	}
	id, err := c.Chain.ChainID(ctx)
	if err != nil {
		return nil, err
	}
	srv, err := split.NewServer(c.Host.Host(), split.ServerConfig{ChainID: id, Authorize: c.authorizeSplit, Logger: c.Logger})
	if err != nil {
		return nil, err
	}
	c.splitSrv = srv
	return srv, nil
}

// authorizeSplit admits only the last stage of each replica chain of the
// client's own split jobs, each on its own chain's link.
func (c *Client) authorizeSplit(ctx context.Context, remote peer.ID, job uint64, chainIdx, from uint16) (types.Address, error) {
	j, err := c.Chain.Job(ctx, job)
	if err != nil {
		return types.Address{}, err
	}
	if j.Kind != market.KindSplit || j.Client != c.Address() {
		return types.Address{}, fmt.Errorf("job %d is not this client's split job", job)
	}
	if from != j.Stages-1 {
		return types.Address{}, fmt.Errorf("only the last stage sends tokens to the client, not stage %d", from)
	}
	want, addr, err := slotPeer(ctx, c.Chain, j, from, chainIdx)
	if err != nil {
		return types.Address{}, err
	}
	if remote != want {
		return types.Address{}, fmt.Errorf("peer %s does not hold slot %d of the last stage of job %d", remote, chainIdx, job)
	}
	return addr, nil
}

// RunSplit posts j, waits until every stage is awarded, runs the
// generation through the replica chains in lockstep (streaming the text to
// onText), then follows the chain until the job completes. The prompt and
// the output are visible to every stage provider and to dispute
// validators: split inference is not confidential.
func (c *Client) RunSplit(ctx context.Context, j SplitJob, progress Progress, onText func(string)) (*SplitResult, error) {
	if progress == nil {
		progress = func(string, ...any) {}
	}
	if j.Manifest == nil || j.Vocab == nil {
		return nil, errors.New("split job: a manifest and the model's vocabulary are required")
	}
	if err := j.Manifest.Validate(); err != nil {
		return nil, err
	}
	if j.ContextSize == 0 {
		j.ContextSize = llm.DefaultContextSize
	}
	if j.Chunk == 0 {
		j.Chunk = llm.DefaultBatchSize
	}
	start := time.Now()
	toks, err := j.Vocab.Tokenize(j.Prompt)
	if err != nil {
		return nil, err
	}
	if n := len(toks) + int(j.MaxTokens); n > j.ContextSize {
		return nil, fmt.Errorf("the prompt (%d tokens) plus max tokens (%d) exceed the context of %d", len(toks), j.MaxTokens, j.ContextSize)
	}
	srv, err := c.splitServer(ctx)
	if err != nil {
		return nil, err
	}
	model, sliceHashes := j.Manifest.Hashes()
	var slices []types.Hash
	for _, h := range sliceHashes {
		slices = append(slices, h)
	}
	in := &LLMInput{Version: 1, Prompt: j.Prompt}
	msg := &market.MsgPostJob{
		Kind: market.KindSplit, Mode: market.ModeAuction, Model: model, ModelSize: uint64(j.Manifest.ModelSize),
		Stages: uint16(len(slices)), Redundancy: j.Redundancy, MaxPrice: j.MaxPrice, Req: j.Req, Input: in.Hash(),
		Windows: j.Windows, MaxTokens: j.MaxTokens, PromptTokens: uint64(len(toks)), Slices: slices,
	}
	height, posted, err := c.postJob(ctx, msg, Runtime)
	if err != nil {
		return nil, err
	}
	id := posted.Job
	progress("posted split job %d at height %d: %d stages × %d replica chains, %s locked; the prompt and output are visible to every stage provider",
		id, height, len(slices), j.Redundancy, types.FormatAmount(posted.Locked))

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	blocks, err := c.Chain.Subscribe(ctx, height)
	if err != nil {
		return nil, err
	}
	defer func() {
		cancel()
		for range blocks {
		}
	}()
	out := &SplitResult{Job: id, Posted: height, Outcomes: make([]string, len(slices))}
	awarded := 0
	var gen sync.WaitGroup
	var genErr error
	genDone := make(chan struct{})
	for b := range blocks {
		for _, ev := range b.Events {
			reportEvent(ev, id, true, progress)
			switch ev.Type {
			case market.EventJobAwarded{}.EventType():
				var e market.EventJobAwarded
				if types.DecodeEvent(ev, &e) != nil || e.Job != id {
					continue
				}
				progress("stage %d awarded at height %d: replica chains %s at %s each", e.Stage, b.Height, strings.Join(e.Providers, ", "), types.FormatAmount(e.Price))
				awarded++
				if awarded < len(slices) {
					continue
				}
				gen.Add(1)
				go func() {
					defer gen.Done()
					defer close(genDone)
					genErr = c.generateSplit(ctx, srv, id, j, toks, out, progress, onText)
				}()
			case market.EventTaskSettled{}.EventType():
				var e market.EventTaskSettled
				if types.DecodeEvent(ev, &e) == nil && e.Job == id && int(e.Stage) < len(out.Outcomes) {
					out.Outcomes[e.Stage] = e.Outcome
					progress("stage %d settled (%s) at height %d: %s paid", e.Stage, e.Outcome, b.Height, types.FormatAmount(e.Paid))
				}
			case market.EventJobExpired{}.EventType():
				var e market.EventJobExpired
				if types.DecodeEvent(ev, &e) == nil && e.Job == id {
					cancel()
					gen.Wait()
					out.Refunded, out.Completed = e.Refund, b.Height
					return out, fmt.Errorf("split job %d expired: %s; %s refunded (ogpu query why-no-bids %d explains)", id, e.Reason, types.FormatAmount(e.Refund), id)
				}
			case market.EventJobCompleted{}.EventType():
				var e market.EventJobCompleted
				if types.DecodeEvent(ev, &e) != nil || e.Job != id {
					continue
				}
				gen.Wait()
				out.Paid, out.Refunded, out.Compensated, out.Completed = e.Paid, e.Refunded, e.Compensated, b.Height
				out.Elapsed = time.Since(start)
				return out, genErr
			}
		}
		select {
		case <-genDone:
			if genErr != nil {
				progress("generation stopped: %v (the chain settles what the stages committed)", genErr)
			}
			genDone = nil
		default:
		}
	}
	gen.Wait()
	return out, ctx.Err()
}

// generateSplit runs the lockstep generation of job id once every stage
// is awarded.
func (c *Client) generateSplit(ctx context.Context, srv *split.Server, id uint64, j SplitJob, toks []int, out *SplitResult, progress Progress, onText func(string)) error {
	jv, err := c.Chain.Job(ctx, id)
	if err != nil {
		return err
	}
	var first []peer.ID
	for ch := range j.Redundancy {
		pid, _, err := slotPeer(ctx, c.Chain, jv, 0, ch)
		if err != nil {
			return err
		}
		first = append(first, pid)
		// Dial the chain's ends now: stage 0 takes our frames, the last
		// stage sends us tokens.
		for _, s := range []uint16{0, jv.Stages - 1} {
			if pv, err := c.Chain.Provider(ctx, jv.Tasks[s].Slots[ch].Provider); err == nil {
				if p, err := peer.Decode(pv.PeerID); err == nil {
					_ = c.Host.ConnectPeer(ctx, p, pv.Addrs)
				}
			}
		}
	}
	prompt := make([]int32, len(toks))
	for i, t := range toks {
		prompt[i] = int32(t)
	}
	t0 := time.Now()
	var tFirst time.Time
	var text []byte
	cc := split.ClientConfig{
		Job: id, Key: c.Key, Stages: jv.Stages, First: first,
		Limits:    split.Limits{Context: uint32(j.ContextSize), MaxRows: uint32(min(j.Chunk, j.ContextSize)), Vocab: uint32(j.Manifest.NVocab)},
		MaxTokens: int(j.MaxTokens),
		End:       func(t int32) bool { return j.Vocab.IsEOG(int(t)) },
		OnToken: func(t int32) {
			if tFirst.IsZero() {
				tFirst = time.Now()
			}
			if j.Vocab.IsEOG(int(t)) {
				return
			}
			piece := j.Vocab.Piece(int(t))
			text = append(text, piece...)
			if onText != nil {
				onText(piece)
			}
		},
	}
	cc.StepTimeout = j.StepTimeout
	cc.Recover = func(ctx context.Context, chainIdx int, cause error) (peer.ID, bool) {
		return c.recoverChain(ctx, id, uint16(chainIdx), cause, progress)
	}
	progress("generating through %d replica chains in lockstep", len(first))
	res, err := split.Generate(ctx, srv, cc, prompt)
	if res != nil {
		for _, t := range res.Tokens {
			out.Tokens = append(out.Tokens, int(t))
		}
		out.Text, out.Divergence = string(text), res.Divergence
		if !tFirst.IsZero() {
			out.TTFT, out.Decode = tFirst.Sub(t0), time.Since(tFirst)
		}
		if res.Divergence != nil {
			progress("the replica chains disagree: %v; the chain will dispute the first stage whose outputs differ on equal inputs", res.Divergence)
		}
	}
	return err
}

// recoverChain is the client's answer to a failed replica chain of split
// job id: it finds the stage whose provider is unreachable, orders its
// replacement on chain (market.MsgReplaceStage: the next eligible backup
// takes the slot, the dead provider is slashed as a no-show, burned),
// waits until the chain shows it, and returns the chain's stage-0 peer;
// the split client then replays the chain from position 0. Where every
// provider answers, nothing is replaced and the generation stops.
func (c *Client) recoverChain(ctx context.Context, id uint64, chainIdx uint16, cause error, progress Progress) (peer.ID, bool) {
	progress("replica chain %d stopped (%v): looking for the stage that died", chainIdx, cause)
	j, err := c.Chain.Job(ctx, id)
	if err != nil {
		progress("cannot read job %d: %v", id, err)
		return "", false
	}
	dead := -1
	for s := range j.Stages {
		slot := j.Tasks[s].Slots[chainIdx]
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := connectProvider(pctx, c.Host, c.Chain, slot.Provider)
		cancel()
		if err != nil {
			progress("stage %d of chain %d (%s) does not answer: %v", s, chainIdx, slot.Provider.Hex(), err)
			dead = int(s)
			break
		}
	}
	if dead < 0 {
		progress("every provider of chain %d answers: nothing to replace", chainIdx)
		return "", false
	}
	old := j.Tasks[dead].Slots[chainIdx].Provider
	msg := &market.MsgReplaceStage{Job: id, Stage: uint16(dead), Chain: chainIdx}
	if _, err := c.sender.Send(ctx, msg.Raw()); err != nil {
		progress("the chain refused the replacement of stage %d of chain %d: %v", dead, chainIdx, err)
		return "", false
	}
	for {
		j, err = c.Chain.Job(ctx, id)
		if err == nil && j.Tasks[dead].Slots[chainIdx].Provider != old {
			break
		}
		select {
		case <-ctx.Done():
			return "", false
		case <-time.After(200 * time.Millisecond):
		}
	}
	progress("stage %d of chain %d: %s replaced by %s, which rebuilds its cache from the replayed transcript; the chain resumes",
		dead, chainIdx, old.Hex(), j.Tasks[dead].Slots[chainIdx].Provider.Hex())
	first, _, err := slotPeer(ctx, c.Chain, j, 0, chainIdx)
	if err != nil {
		progress("stage 0 of chain %d: %v", chainIdx, err)
		return "", false
	}
	for _, s := range []uint16{0, j.Stages - 1} { // the chain's ends talk to us
		_, _ = connectProvider(ctx, c.Host, c.Chain, j.Tasks[s].Slots[chainIdx].Provider)
	}
	return first, true
}
