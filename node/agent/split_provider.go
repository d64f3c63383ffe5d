package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/runtime/stagehost"
	"github.com/ogpu-network/ogpu/split"
	"github.com/ogpu-network/ogpu/types"
)

// Split inference on the provider (issue 12): a provider holding the slice
// of stage s bids on stage s of split jobs; when it wins slot c (replica
// chain c) it runs the slice in a supervised worker process
// (runtime/stagehost), takes frames only from stage s-1 of chain c (the
// client, for stage 0), sends its output to stage s+1 of chain c (the
// client, after the last stage), and commits (T, Hin, Hout). It keeps its
// input transcript and its upstream's last signature: the signature proves
// its input (MsgProveHandoff) when the chain asks, the transcript is what
// dispute validators and a replacement replay.

// splitState is what the provider keeps of one split slot.
type splitState struct {
	Chain      uint16
	Evidence   split.Evidence
	HasProof   bool
	Transcript []byte
	Upstream   types.Address
}

// splitLimits are the frame bounds of a stage with width nEmbd and
// vocabulary vocab (1 on a middle stage) under options o.
func splitLimits(o llm.Options, nEmbd, vocab int) split.Limits {
	ctx := o.ContextSize
	if ctx == 0 {
		ctx = llm.DefaultContextSize
	}
	rows := min(ctx, int(split.MaxPayload/(4*uint64(max(nEmbd, 1)))))
	lim := split.Limits{Context: uint32(ctx), MaxRows: uint32(rows), NEmbd: uint32(nEmbd)}
	if vocab > 1 {
		lim.Vocab = uint32(vocab)
	}
	return lim
}

// holdsSlice reports whether h is one of the slices this provider serves.
func (p *Provider) holdsSlice(h types.Hash) bool { return slices.Contains(p.cfg.Slices, h) }

// cannotRunSplit says why this provider cannot run any stage of split
// job j, or "".
func (p *Provider) cannotRunSplit(j *chain.JobView) string {
	ctx := p.cfg.LLM.ContextSize
	if ctx == 0 {
		ctx = llm.DefaultContextSize
	}
	switch {
	case len(p.cfg.Slices) == 0:
		return "no slices are served here (--slice)"
	case p.splitSrv == nil:
		return "split hand-offs are not served here"
	case j.MaxTokens == 0:
		return "the job sets no token budget"
	}
	held := false
	for _, h := range j.Slices {
		held = held || p.holdsSlice(h)
	}
	if !held {
		return "none of the job's slices is served here"
	}
	return contextFit(j.PromptTokens, j.MaxTokens, ctx)
}

// splitSlot returns the replica chain of this provider's live slot of
// stage k.Stage of j.
func (p *Provider) splitSlot(j *chain.JobView, stage uint16) (uint16, bool) {
	if int(stage) >= len(j.Tasks) {
		return 0, false
	}
	for i, s := range j.Tasks[stage].Slots {
		if s.Provider == p.addr && !s.NoShow {
			return uint16(i), true
		}
	}
	return 0, false
}

// slotPeer is the libp2p peer of the provider holding slot chain of
// stage, from its chain record.
func slotPeer(ctx context.Context, c *node.Client, j *chain.JobView, stage, chainIdx uint16) (peer.ID, types.Address, error) {
	if int(stage) >= len(j.Tasks) || int(chainIdx) >= len(j.Tasks[stage].Slots) {
		return "", types.Address{}, fmt.Errorf("job %d has no slot %d of stage %d", j.ID, chainIdx, stage)
	}
	s := j.Tasks[stage].Slots[chainIdx]
	if s.NoShow {
		return "", types.Address{}, fmt.Errorf("slot %d of stage %d of job %d is dead", chainIdx, stage, j.ID)
	}
	pv, err := c.Provider(ctx, s.Provider)
	if err != nil {
		return "", types.Address{}, err
	}
	id, err := peer.Decode(pv.PeerID)
	if err != nil {
		return "", types.Address{}, fmt.Errorf("provider %s has a bad peer id: %w", s.Provider.Hex(), err)
	}
	return id, s.Provider, nil
}

// authorizeSplit is the provider's split.Authorize: remote may send link
// (job, chainIdx, from) only if this provider holds slot chainIdx of the
// stage after from and remote is the provider of slot chainIdx of stage
// from (the job's client, for stage 0). Its account signs the frames.
func (p *Provider) authorizeSplit(ctx context.Context, remote peer.ID, job uint64, chainIdx, from uint16) (types.Address, error) {
	j, err := p.cfg.Chain.Job(ctx, job)
	if err != nil {
		return types.Address{}, err
	}
	if j.Kind != market.KindSplit || j.State != market.JobRunning {
		return types.Address{}, fmt.Errorf("job %d is not a running split job", job)
	}
	to := from + 1
	if from == market.ClientStage {
		to = 0
	}
	if c, ok := p.splitSlot(j, to); !ok || c != chainIdx {
		return types.Address{}, fmt.Errorf("this provider holds no slot %d of stage %d of job %d", chainIdx, to, job)
	}
	if from == market.ClientStage {
		want, err := clientPeer(ctx, p.cfg.Chain, j)
		if err != nil {
			return types.Address{}, err
		}
		if remote != want {
			return types.Address{}, fmt.Errorf("peer %s is not job %d's client", remote, job)
		}
		return j.Client, nil
	}
	want, addr, err := slotPeer(ctx, p.cfg.Chain, j, from, chainIdx)
	if err != nil {
		return types.Address{}, err
	}
	if remote != want {
		return types.Address{}, fmt.Errorf("peer %s does not hold slot %d of stage %d of job %d (its replica chain's upstream)", remote, chainIdx, from, job)
	}
	return addr, nil
}

// workerForwarder runs a stage in a supervised worker; lie, if set,
// changes the output rows (the devnet's lying stage). It keeps the
// session's inputs since the last Reset: when the worker dies (a llama.cpp
// abort), it starts a fresh one, replays them to rebuild the KV cache
// (exact: a stage is deterministic) and retries, so the stage's output and
// transcript are what they would have been and its neighbours see a pause.
type workerForwarder struct {
	w     *stagehost.Worker
	nEmbd int
	lie   func(pos0 int, rows []float32)
	log   *slog.Logger

	hist     []forwardCall
	restarts int
}

// forwardCall is one Forward of the current session.
type forwardCall struct {
	pos0 int
	toks []int
	rows []float32
}

// maxWorkerRestarts bounds the worker restarts of one session.
const maxWorkerRestarts = 2

func (f *workerForwarder) NEmbd() int { return f.nEmbd }

func (f *workerForwarder) Reset() error {
	f.hist = nil
	return f.w.Reset()
}

func (f *workerForwarder) Forward(pos0 int, tokens []int32, rows []float32) ([]float32, int32, error) {
	var toks []int
	if tokens != nil {
		toks = make([]int, len(tokens))
		for i, t := range tokens {
			toks[i] = int(t)
		}
	}
	out, err := f.w.Forward(pos0, toks, rows)
	for errors.Is(err, stagehost.ErrWorkerDied) && f.restarts < maxWorkerRestarts {
		f.restarts++
		if f.log != nil {
			f.log.Warn("stage worker died: restarting it and replaying the session", "calls", len(f.hist), "err", err)
		}
		if err = f.w.Reset(); err != nil {
			break
		}
		for _, c := range f.hist {
			if _, err = f.w.Forward(c.pos0, c.toks, c.rows); err != nil {
				break
			}
		}
		if err == nil {
			out, err = f.w.Forward(pos0, toks, rows)
		}
	}
	if err != nil {
		return nil, 0, err
	}
	f.hist = append(f.hist, forwardCall{pos0: pos0, toks: toks, rows: slices.Clone(rows)})
	if f.lie != nil && out.Rows != nil {
		f.lie(pos0, out.Rows)
	}
	return out.Rows, int32(out.Token), nil
}

// lieRows is the devnet's lying stage: from the tenth position on, it
// nudges one value of every row it sends by 1e-3, too little to change a
// token of stories260K, enough to change every hash (P14: transcripts are
// compared bit for bit, not tokens).
func lieRows(pos0 int, rows []float32) {
	if pos0 >= 10 && len(rows) > 0 {
		rows[0] += 1e-3
	}
}

// runSplitTask runs this provider's stage of split job j on its replica
// chain until the chain's links close, then commits. When a stage of its
// chain is replaced (split_stage_replaced), the stage starts over from
// position 0 with a fresh link: the client replays every frame, so the
// transcript it finally commits is the one an uninterrupted run gives. A
// stage whose link broke (a neighbour died) waits for that restart until
// shortly before its commit deadline, then commits what it has.
func (p *Provider) runSplitTask(ctx context.Context, k taskKey, j *chain.JobView, commitDeadline uint64) error {
	chainIdx, ok := p.splitSlot(j, k.Stage)
	if !ok {
		return fmt.Errorf("%w: no live slot of stage %d", errTaskClosed, k.Stage)
	}
	path, err := p.cfg.Store.Path(j.Slices[k.Stage])
	if err != nil {
		return fmt.Errorf("slice of stage %d: %w", k.Stage, err)
	}
	w, err := stagehost.Start(stagehost.Config{Slice: path, Options: p.cfg.LLM})
	if err != nil {
		return err
	}
	defer w.Close()
	info := w.Info()
	fw := &workerForwarder{w: w, nEmbd: info.NEmbd, log: p.log.With("job", k.Job, "stage", k.Stage)}
	if p.cfg.Lie && !info.Last() {
		fw.lie = lieRows
		p.log.Warn("lying: nudging the residuals this stage sends", "job", k.Job, "stage", k.Stage, "chain", chainIdx)
	}
	restart := p.splitRestartChan(k, chainIdx)
	defer p.dropSplitRestart(k)
	for run := 0; ; run++ {
		if run > 0 {
			// The chain changed: read who holds the neighbouring slots and
			// the moved deadline.
			if j, err = p.cfg.Chain.Job(ctx, k.Job); err != nil {
				return err
			}
			if c, ok := p.splitSlot(j, k.Stage); !ok || c != chainIdx {
				return fmt.Errorf("%w: this provider no longer holds slot %d of stage %d", errTaskClosed, chainIdx, k.Stage)
			}
			commitDeadline = max(commitDeadline, j.Tasks[k.Stage].CommitDeadline)
		}
		st, upstream, err := p.startSplitStage(ctx, k, j, chainIdx, info, fw)
		if err != nil {
			return err
		}
		if run == 0 {
			p.log.Info("won a split stage: serving", "job", k.Job, "stage", k.Stage, "chain", chainIdx, "layers", fmt.Sprintf("%d..%d", info.From, info.To-1))
		} else {
			p.log.Info("restarted the split stage after a replacement in its chain", "job", k.Job, "stage", k.Stage, "chain", chainIdx)
		}
		wctx, cancel := untilHeight(ctx, p.cfg.Chain, commitDeadline)
		done := make(chan error, 1)
		go func() { done <- st.Wait(wctx) }()
		var serr error
		again := false
		select {
		case serr = <-done:
			if serr != nil && ctx.Err() == nil && wctx.Err() == nil {
				// A neighbour may have died: wait for the client's
				// replacement, until a little before the deadline.
				p.log.Warn("split stage link broke; waiting for a replacement in the chain", "job", k.Job, "stage", k.Stage, "chain", chainIdx, "err", serr)
				gctx, gcancel := untilHeight(ctx, p.cfg.Chain, max(commitDeadline, 3)-2)
				select {
				case <-restart:
					again = true
				case <-gctx.Done():
				}
				gcancel()
			}
		case <-restart:
			st.Close()
			<-done
			again = true
		}
		cancel()
		if again {
			st.Close()
			continue
		}
		if serr != nil && ctx.Err() != nil {
			st.Close()
			return ctx.Err()
		}
		c := st.Commitment()
		state := &splitState{Chain: chainIdx, Upstream: upstream}
		state.Evidence, state.HasProof = st.Evidence()
		var tr bytes.Buffer
		if _, err := st.Transcript().WriteTo(&tr); err == nil {
			state.Transcript = tr.Bytes()
		}
		fwd := st.Forwards()
		st.Close()
		p.mu.Lock()
		p.splits[k] = state
		p.mu.Unlock()
		if serr != nil {
			p.log.Warn("split stage ended with an error; committing what it received and sent", "job", k.Job, "stage", k.Stage, "err", serr)
		}
		p.log.Info("split stage done", "job", k.Job, "stage", k.Stage, "chain", chainIdx, "frames", c.T, "forwards", fwd)
		return p.commitSplit(ctx, k, chainIdx, c, commitDeadline)
	}
}

// startSplitStage starts slot chainIdx of stage k.Stage of j on the split
// server: frames from the slot's current upstream, to its current
// downstream.
func (p *Provider) startSplitStage(ctx context.Context, k taskKey, j *chain.JobView, chainIdx uint16, info stagehost.Info, fw *workerForwarder) (*split.Stage, types.Address, error) {
	var down peer.ID
	var upstream types.Address
	var err error
	if k.Stage+1 < j.Stages {
		// Dial the downstream at its on-chain addresses now: frames flow
		// as soon as the client starts.
		if down, err = connectProvider(ctx, p.cfg.Host, p.cfg.Chain, j.Tasks[k.Stage+1].Slots[chainIdx].Provider); err != nil {
			return nil, upstream, fmt.Errorf("the next stage's provider (chain %d): %w", chainIdx, err)
		}
	} else if down, err = clientPeer(ctx, p.cfg.Chain, j); err != nil {
		return nil, upstream, err
	}
	if k.Stage == 0 {
		upstream = j.Client
	} else if _, upstream, err = slotPeer(ctx, p.cfg.Chain, j, k.Stage-1, chainIdx); err != nil {
		return nil, upstream, err
	}
	st, err := split.StartStage(p.splitSrv, split.StageConfig{
		Job: k.Job, Chain: chainIdx, Stage: k.Stage, Stages: j.Stages, Key: p.cfg.Key,
		Limits: splitLimits(p.cfg.LLM, info.NEmbd, info.NVocab), Forwarder: fw, Downstream: down,
	})
	return st, upstream, err
}

// splitRestart restarts a running split stage of replica chain chain.
type splitRestart struct {
	chain uint16
	c     chan struct{}
}

// splitRestartChan is the channel that restarts task k's stage (slot
// chainIdx).
func (p *Provider) splitRestartChan(k taskKey, chainIdx uint16) chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.splitRestarts[k]
	if !ok {
		r = splitRestart{chain: chainIdx, c: make(chan struct{}, 1)}
		p.splitRestarts[k] = r
	}
	return r.c
}

func (p *Provider) dropSplitRestart(k taskKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.splitRestarts, k)
}

// stageReplaced answers split_stage_replaced: the new holder starts the
// stage; every other provider of the same replica chain restarts its
// stage, for the client's replay.
func (p *Provider) stageReplaced(ctx context.Context, e market.EventSplitStageReplaced) {
	if e.To == p.addr {
		p.log.Info("took over a split stage from a provider that stopped: replaying", "job", e.Job, "stage", e.Stage, "chain", e.Chain)
		p.startTask(ctx, taskKey{e.Job, e.Stage}, e.CommitDeadline)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, r := range p.splitRestarts {
		if k.Job != e.Job || r.chain != e.Chain {
			continue
		}
		select {
		case r.c <- struct{}{}:
		default:
		}
	}
}

// commitSplit commits (T, Hin, Hout) of slot chainIdx of task k.
func (p *Provider) commitSplit(ctx context.Context, k taskKey, chainIdx uint16, c split.Commitment, commitDeadline uint64) error {
	secret := &resultSecret{Result: c.Hout, Salt: randomHash(), CommitDeadline: commitDeadline,
		Split: true, Chain: chainIdx, Steps: c.T, Hin: c.Hin}
	commitment := market.SplitCommitment(k.Job, k.Stage, chainIdx, c.T, c.Hin, c.Hout, secret.Salt, p.addr)
	if err := p.commitSecret(ctx, k, secret, commitment); err != nil {
		return err
	}
	p.log.Info("committed split transcript", "job", k.Job, "stage", k.Stage, "chain", chainIdx, "frames", c.T,
		"hin", fmt.Sprintf("%x", c.Hin[:6]), "hout", fmt.Sprintf("%x", c.Hout[:6]))
	return nil
}

// revealSplit is MsgRevealTranscript for secret r of task k.
func revealSplitMsg(k taskKey, r *resultSecret) types.RawMsg {
	return (&market.MsgRevealTranscript{Job: k.Job, Stage: k.Stage, Steps: r.Steps, Hin: r.Hin, Hout: r.Result, Salt: r.Salt}).Raw()
}

// proveInputs answers split_inputs_pending: for every listed slot that is
// this provider's, it sends its upstream's signature over what it
// received (MsgProveHandoff).
func (p *Provider) proveInputs(ctx context.Context, e market.EventSplitInputsPending) {
	for _, s := range e.Slots {
		var stage, chainIdx uint16
		if _, err := fmt.Sscanf(s, "%d/%d", &stage, &chainIdx); err != nil {
			continue
		}
		k := taskKey{e.Job, stage}
		p.mu.Lock()
		st, ok := p.splits[k]
		p.mu.Unlock()
		if !ok || st.Chain != chainIdx {
			continue
		}
		if !st.HasProof {
			p.log.Warn("asked to prove a split input, but nothing was received", "job", e.Job, "stage", stage)
			continue
		}
		msg := &market.MsgProveHandoff{Job: e.Job, Stage: stage, Chain: chainIdx, Steps: st.Evidence.Steps, Hin: st.Evidence.Hrun, Sig: st.Evidence.Sig}
		if _, err := p.sender.Send(ctx, msg.Raw()); err != nil {
			p.log.Warn("hand-off proof refused", "job", e.Job, "stage", stage, "err", err)
			continue
		}
		p.log.Info("proved a split input with the upstream's signature", "job", e.Job, "stage", stage, "chain", chainIdx, "frames", st.Evidence.Steps)
	}
}

// splitTranscript is the stored input transcript of this provider's slot
// chainIdx of stage of job, for a dispute validator or a replacement.
func (p *Provider) splitTranscript(job uint64, stage, chainIdx uint16) ([]byte, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.splits[taskKey{job, stage}]
	if !ok || st.Chain != chainIdx || st.Transcript == nil {
		return nil, false
	}
	return st.Transcript, true
}
