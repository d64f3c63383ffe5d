package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/he"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// errTaskClosed: the task was decided (or its job ended) before this
// provider committed, e.g. a slow provider whose partner's stage settled
// or whose window passed: not a failure of the provider's machinery.
var errTaskClosed = errors.New("the task is closed")

// pipeTask is what a provider knows of one pipeline stage it holds: the
// input ciphertexts pushed to it and whether the chain has opened it.
type pipeTask struct {
	wake   chan struct{}
	pushed []types.Hash
	opened *market.EventStageOpened
}

func (p *Provider) pipe(k taskKey) *pipeTask {
	t, ok := p.pipes[k]
	if !ok {
		t = &pipeTask{wake: make(chan struct{}, 1)}
		p.pipes[k] = t
	}
	return t
}

func (t *pipeTask) poke() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// delivered records a ciphertext pushed for stage of job.
func (p *Provider) delivered(job uint64, stage uint16, h types.Hash) {
	p.mu.Lock()
	t := p.pipe(taskKey{job, stage})
	t.pushed = append(t.pushed, h)
	p.mu.Unlock()
	t.poke()
	p.log.Info("received the previous stage's ciphertext", "job", job, "stage", stage, "ciphertext", fmt.Sprintf("%x", h[:8]))
}

// stageOpened records that the chain opened a stage.
func (p *Provider) stageOpened(e market.EventStageOpened) {
	p.mu.Lock()
	t := p.pipe(taskKey{e.Job, e.Stage})
	t.opened = &e
	p.mu.Unlock()
	t.poke()
}

// evaluator returns an evaluator for parts, cached by model and keys (a
// key set is tens of MB; a client sends it once).
func (p *Provider) evaluator(parts *pipelineParts) (*he.Evaluator, error) {
	p.loadMu.Lock() // the stages of one job start together: parse once
	defer p.loadMu.Unlock()
	k := [2]types.Hash{parts.In.Model, parts.In.Keys}
	p.mu.Lock()
	ev, ok := p.evals[k]
	p.mu.Unlock()
	if ok {
		return ev, nil
	}
	m := parts.Model
	if p.cfg.Lie {
		m = lieModel(m)
	}
	ev, err := parts.evaluator(p.cfg.Store, m)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if len(p.evals) >= 4 {
		clear(p.evals)
	}
	p.evals[k] = ev
	p.mu.Unlock()
	return ev, nil
}

// lieModel is the devnet liar's model: one weight (or coefficient) off,
// so that its outputs are well-formed ciphertexts of the wrong answer.
func lieModel(m *he.Model) *he.Model {
	c := *m
	c.Stages = make([]he.Stage, len(m.Stages))
	for i, s := range m.Stages {
		if s.Dense != nil {
			d := *s.Dense
			d.Weights = make([][]float64, len(s.Dense.Weights))
			for r := range d.Weights {
				d.Weights[r] = append([]float64(nil), s.Dense.Weights[r]...)
			}
			d.Weights[0][0] += 0.25
			s.Dense = &d
		}
		c.Stages[i] = s
	}
	return &c
}

// runPipelineTask runs stage k.Stage of a pipeline job: it loads the
// model and the client's evaluation keys, evaluates the stage as soon as
// an input is at hand (the client's ciphertext, or the one the previous
// provider of its replica chain pushes), and commits once the chain has
// opened the stage and the input it used is the agreed one; if the
// agreed input differs (the previous stage was disputed) it fetches that
// and evaluates again. The output goes to the next stage's provider of
// the same replica chain.
func (p *Provider) runPipelineTask(ctx context.Context, k taskKey, j *chain.JobView, commitDeadline uint64) error {
	s := int(k.Stage)
	p.log.Info("won the auction: pipeline stage", "job", k.Job, "stage", s, "of", j.Stages)
	defer func() {
		p.mu.Lock()
		delete(p.pipes, k)
		p.mu.Unlock()
	}()
	tctx, cancel := untilHeight(ctx, p.cfg.Chain, j.Expiry+1)
	defer cancel()
	t0 := time.Now()
	// Stage 0's input is the client's: what cannot be fetched
	// reportMargin blocks (a quarter of the commit window, at least 3)
	// before the commit deadline, or does not parse, is reported (once:
	// after an input check the provider must compute).
	report := s == 0 && !p.isChecked(k)
	lctx := tctx
	if report {
		var lcancel context.CancelFunc
		lctx, lcancel = untilHeight(tctx, p.cfg.Chain, reportBy(commitDeadline, j.Windows.Execute, false))
		defer lcancel()
	}
	parts, err := loadPipelineParts(lctx, p.cfg.Host, p.cfg.Chain, p.cfg.Store, j)
	if err != nil {
		if report && ctx.Err() == nil {
			return p.reportInput(ctx, k, pipelineReason(err), err)
		}
		return err
	}
	for _, h := range []types.Hash{j.Input, parts.In.Model, parts.In.Keys, parts.In.Ciphertext} {
		if err := p.access.BindInput(h, j); err != nil {
			p.log.Warn("an input is not served to the job's other parties", "job", k.Job, "err", err)
		}
	}
	ev, err := p.evaluator(parts)
	if err != nil {
		if report && ctx.Err() == nil {
			return p.reportInput(ctx, k, verifier.InputInvalid, err)
		}
		return err
	}
	p.log.Info("loaded model and evaluation keys", "job", k.Job, "stage", s, "keys", fmt.Sprintf("%x", parts.In.Keys[:8]), "took", time.Since(t0).Round(time.Millisecond))
	var (
		input  types.Hash // what out was computed from
		out    []byte
		outH   types.Hash
		pushed bool
	)
	for {
		var (
			agreed types.Hash
			open   bool
			cd     uint64
		)
		err := p.untilChain(tctx, k, "read the stage", func() (err error) {
			agreed, open, cd, err = p.stageState(tctx, k, parts.In)
			return err
		})
		if err != nil {
			return err
		}
		if open && cd != 0 {
			commitDeadline = cd
		}
		// The input to evaluate: the agreed one once known, else the
		// first pushed by the previous stage (speculatively).
		cand := agreed
		if cand == (types.Hash{}) {
			p.mu.Lock()
			if t := p.pipes[k]; t != nil && len(t.pushed) > 0 {
				cand = t.pushed[0]
			}
			p.mu.Unlock()
		}
		if cand != (types.Hash{}) && cand != input {
			if !p.cfg.Store.Has(cand) {
				if s == 0 {
					err = fetchFromPartiesMax(lctx, p.cfg.Host, p.cfg.Chain, p.cfg.Store, j, cand, maxPush)
					if err != nil && report && ctx.Err() == nil {
						return p.reportInput(ctx, k, verifier.InputUnavailable, err)
					}
				} else {
					var jv *chain.JobView
					err = p.untilChain(tctx, k, "read the job", func() (err error) {
						jv, err = p.cfg.Chain.Job(tctx, k.Job)
						return err
					})
					if err == nil {
						err = fetchVerdict(tctx, p.cfg.Host, p.cfg.Chain, p.cfg.Store, jv, s-1, cand)
					}
					if err != nil && tctx.Err() == nil && !refusedByAll(err) && !errors.Is(err, errTaskClosed) {
						// The previous stage's providers (or this
						// node) cannot be reached now: ask again on
						// the next turn of the loop, until the
						// stage's deadline.
						p.log.Warn("cannot fetch the agreed input yet; retrying", "job", k.Job, "stage", s, "err", err)
						err, cand = nil, types.Hash{}
					}
				}
				if err != nil {
					return err
				}
			}
		}
		if cand != (types.Hash{}) && cand != input {
			inBytes, err := p.cfg.Store.Get(cand)
			if err != nil {
				return err
			}
			t1 := time.Now()
			p.evalMu.Lock()
			evalStart := time.Now() // not the wait for the lock
			out, err = evalStage(ev, s, inBytes)
			took := time.Since(evalStart)
			p.evalMu.Unlock()
			if err == nil && p.cfg.OnStageEvaluated != nil {
				p.cfg.OnStageEvaluated(parts.Model.Preset, took)
			}
			if err != nil {
				if report && ctx.Err() == nil {
					return p.reportInput(ctx, k, verifier.InputInvalid, fmt.Errorf("stage %d: %w", s, err))
				}
				return fmt.Errorf("stage %d: %w", s, err)
			}
			if outH, err = p.cfg.Store.Put(out); err != nil {
				return err
			}
			input, pushed = cand, false
			if err := p.access.BindOutput(outH, j, k.Stage); err != nil {
				p.log.Warn("the stage output is served to nobody", "job", k.Job, "stage", s, "err", err)
			}
			p.log.Info("evaluated stage on ciphertexts", "job", k.Job, "stage", s, "input", fmt.Sprintf("%x", cand[:8]),
				"output", fmt.Sprintf("%x", outH[:8]), "bytes", len(out), "took", time.Since(t1).Round(time.Millisecond))
		}
		if out != nil && !pushed {
			pushed = true
			if s+1 < int(j.Stages) {
				p.spawn(func() { p.pushNext(ctx, k, outH, out) })
			}
		}
		if out != nil && open && input == agreed {
			break
		}
		p.mu.Lock()
		t := p.pipe(k)
		p.mu.Unlock()
		select {
		case <-tctx.Done():
			return fmt.Errorf("stage %d of job %d: gave up waiting for its input or its turn: %w", s, k.Job, tctx.Err())
		case <-t.wake:
		case <-time.After(time.Second):
		}
	}
	if err := p.commitResult(ctx, k, outH, commitDeadline); err != nil {
		return err
	}
	p.log.Info("committed result", "job", k.Job, "stage", s, "result", fmt.Sprintf("%x", outH[:8]))
	return nil
}

// pipelineReason is the report reason for a failure to load a pipeline's
// input: unavailable if the fetch ran out of time, else invalid (it was
// fetched, by hash, and does not parse for the job).
func pipelineReason(err error) uint8 {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return verifier.InputUnavailable
	}
	return verifier.InputInvalid
}

// stageState reads where stage k is: the agreed input (zero until the
// previous stage settles), whether it is open for commitments and its
// commit deadline. The stage-opened event answers without a query; the
// chain is asked otherwise (a restarted or reassigned provider).
func (p *Provider) stageState(ctx context.Context, k taskKey, in *PipelineInput) (agreed types.Hash, open bool, commitDeadline uint64, err error) {
	if k.Stage == 0 {
		return in.Ciphertext, true, 0, nil
	}
	p.mu.Lock()
	t := p.pipe(k)
	opened := t.opened
	p.mu.Unlock()
	if opened != nil {
		return opened.Input, true, opened.CommitDeadline, nil
	}
	j, err := p.cfg.Chain.Job(ctx, k.Job)
	if err != nil {
		return types.Hash{}, false, 0, err
	}
	if !j.State.Open() {
		return types.Hash{}, false, 0, fmt.Errorf("%w: job %d is %s", errTaskClosed, k.Job, j.StateName)
	}
	task := j.Tasks[k.Stage]
	switch task.Status {
	case "waiting":
		return types.Hash{}, false, 0, nil
	case "settled":
		return types.Hash{}, false, 0, fmt.Errorf("%w: stage %d of job %d settled", errTaskClosed, k.Stage, k.Job)
	}
	return stageInput(j, in, int(k.Stage)), true, task.CommitDeadline, nil
}

// pushNext streams the output of stage k to the provider holding the same
// slot index in the next stage (its replica chain: see pushAllowed). A
// failed push is not fatal: the next provider fetches the agreed input
// once the chain has it. If that provider also holds a slot of stage k,
// the push waits until its own commitment for stage k is on chain (or its
// window is over): it must compute its stage-k result, not copy this one.
func (p *Provider) pushNext(ctx context.Context, k taskKey, h types.Hash, data []byte) {
	var to types.Address
	for {
		j, err := p.cfg.Chain.Job(ctx, k.Job)
		if err != nil {
			return
		}
		cur, next := taskOf(j, int(k.Stage)), taskOf(j, int(k.Stage)+1)
		if cur == nil || next == nil {
			return
		}
		idx := -1
		for i, sl := range cur.Slots {
			if sl.Provider == p.addr && !sl.NoShow {
				idx = i
				break
			}
		}
		if idx < 0 || idx >= int(j.Redundancy) || idx >= len(next.Slots) || next.Slots[idx].NoShow {
			return // no replica chain goes on from here
		}
		to = next.Slots[idx].Provider
		if to == p.addr {
			p.delivered(k.Job, k.Stage+1, h)
			return
		}
		if !mustWaitForCommit(cur, to) {
			break
		}
		// Wait for a block, then look again.
		st, err := p.cfg.Chain.RPC.Status(ctx)
		if err != nil {
			return
		}
		if err := p.cfg.Chain.WaitHeight(ctx, st.SyncInfo.LatestBlockHeight+1); err != nil {
			return
		}
	}
	pid, err := connectProvider(ctx, p.cfg.Host, p.cfg.Chain, to)
	if err == nil {
		err = pushOutput(ctx, p.cfg.Host, pid, pushHeader{Job: k.Job, Stage: k.Stage, Hash: h, Size: int64(len(data))}, data)
	}
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			p.log.Warn("cannot push the stage output to the next provider (it will fetch it after settlement)", "job", k.Job, "stage", k.Stage, "to", to.Hex(), "err", err)
		}
		return
	}
	p.log.Info("pushed the stage output to the next provider", "job", k.Job, "stage", k.Stage, "to", to.Hex(), "peer", peer.ID(pid).ShortString(), "bytes", len(data))
}

// mustWaitForCommit reports whether provider addr holds a live slot of
// task t that may still commit and has not: it may not see t's outputs
// yet.
func mustWaitForCommit(t *chain.TaskView, addr types.Address) bool {
	if t.Status != "executing" && t.Status != "waiting" {
		return false
	}
	for _, sl := range t.Slots {
		if sl.Provider == addr && !sl.NoShow && !sl.Committed {
			return true
		}
	}
	return false
}
