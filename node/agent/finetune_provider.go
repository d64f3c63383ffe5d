package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/finetune"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/ftwork"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/runtime/llm/train"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// The provider's side of fine-tune jobs (market/finetune.go): it bids on
// jobs in its training class for a base model it serves, fetches the
// dataset from the client, trains in the supervised worker (node/ftwork:
// every hash kept, a checkpoint every FinetuneEvery steps), commits and
// reveals its checkpoint root, answers the rounds of any step-bisection
// game its root plays, and serves checkpoints (CheckpointProtocol) to the
// job's client and, while the task is in games, to active validators.

// RuntimeTrain is the runtime fine-tune providers register and fine-tune
// jobs require.
const RuntimeTrain = "llama.cpp-train"

// CheckpointProtocol serves a fine-tune job's checkpoints: the client
// sends one JSON line {"job":N,"stage":S,"step":K}; the provider answers
// one JSON line {"size":B} (or {"error":"..."}) and then B bytes, the
// trained tensors after step K (train.EncodeCheckpoint). Step N is the
// fine-tuned model's head: the client writes its GGUF from the base model
// (train.WriteModel). Served to the job's client, and to active validators
// while the task's games are on (they re-execute one step from θ_lo).
const CheckpointProtocol = "/ogpu/finetune/checkpoint/1"

// MaxCheckpointBytes bounds a checkpoint on the wire.
const MaxCheckpointBytes = 512 << 20

// DefaultFinetuneEvery is how often a provider keeps a checkpoint.
const DefaultFinetuneEvery = 8

type checkpointRequest struct {
	Job   uint64 `json:"job"`
	Stage uint16 `json:"stage"`
	Step  uint64 `json:"step"`
}

type checkpointHeader struct {
	Size  int64  `json:"size,omitempty"`
	Error string `json:"error,omitempty"`
}

// cannotFinetune says why this provider cannot run fine-tune job j, or "".
func (p *Provider) cannotFinetune(j *chain.JobView) string {
	p.mu.Lock()
	_, haveModel := p.models[j.Model]
	p.mu.Unlock()
	switch {
	case !p.cfg.Finetune:
		return "fine-tune jobs are not offered here (--finetune)"
	case j.Finetune == nil:
		return "the job has no fine-tune terms"
	case j.Req.Class != train.BuildClass():
		return "training class " + j.Req.Class + " is not this build's (" + train.BuildClass() + ")"
	case j.Req.Runtime != "" && j.Req.Runtime != RuntimeTrain:
		return "runtime " + j.Req.Runtime + " is not offered"
	case !haveModel:
		return fmt.Sprintf("base model %x is not served here", j.Model)
	}
	if r := market.MatchAll(j.Req.Attributes, p.cfg.Attributes); r != "" {
		return "requirement " + r + " is not met"
	}
	return ""
}

// finetuneDir is where the work of task k lives.
func (p *Provider) finetuneDir(k taskKey) string {
	base := p.cfg.StateDir
	if base == "" {
		base = filepath.Join(os.TempDir(), "ogpu-finetune-"+p.addr.Hex())
	}
	return filepath.Join(base, "finetune", k.String())
}

// runFinetuneTask trains task k of fine-tune job j and commits its result.
func (p *Provider) runFinetuneTask(ctx context.Context, k taskKey, j *chain.JobView, commitDeadline uint64) error {
	p.log.Info("won the auction: fine-tuning", "job", k.Job, "steps", j.Finetune.Steps, "seed", j.TrainSeed)
	f := p.feeds.get(k.Job)
	checked := p.isChecked(k)
	if err := p.access.BindInput(j.Input, j); err != nil {
		p.log.Warn("the dataset is not served to the job's other parties", "job", j.ID, "err", err)
	}
	fctx, cancel := untilHeight(ctx, p.cfg.Chain, reportBy(commitDeadline, j.Windows.Execute, checked))
	err := fetchFromPartiesMax(fctx, p.cfg.Host, p.cfg.Chain, p.cfg.Store, j, j.Input, int64(j.Finetune.DatasetSize))
	cancel()
	if err != nil {
		if ctx.Err() != nil || checked {
			return fmt.Errorf("the dataset of job %d: %w", j.ID, err)
		}
		return p.reportInput(ctx, k, verifier.InputUnavailable, err)
	}
	data, err := p.cfg.Store.Get(j.Input)
	if err != nil {
		return err
	}
	base, err := p.cfg.Store.Path(j.Model)
	if err != nil {
		return err
	}
	params, err := ftwork.Params(j.Finetune, j.TrainSeed, base, data, p.cfg.LLM.Threads)
	if err == nil {
		err = ftwork.Check(j.Finetune, params)
	}
	if err != nil {
		if errors.Is(err, ftwork.ErrBadInput) && !checked {
			// T11: the client's fault, never the provider's.
			return p.reportInput(ctx, k, verifier.InputInvalid, err)
		}
		return err
	}
	dir := p.finetuneDir(k)
	every := p.cfg.FinetuneEvery
	if every <= 0 {
		every = DefaultFinetuneEvery
	}
	steps := int(j.Finetune.Steps)
	tick := max(1, steps/100)
	progress := func(pr train.Progress) {
		switch {
		case pr.Step == 0:
			f.push(streamMsg{Piece: fmt.Sprintf("epoch %d/%d loss %.4f val %.4f\n", pr.Epoch, j.Finetune.Epochs, pr.Loss, pr.ValLoss)})
		case pr.Step%tick == 0 || pr.Step == steps:
			f.push(streamMsg{Piece: fmt.Sprintf("step %d/%d\n", pr.Step, steps)})
		}
	}
	t0 := time.Now()
	w, err := ftwork.Open(dir)
	if err != nil || w.Steps() != j.Finetune.Steps {
		if lie := p.cfg.FinetuneLieAt; lie > 0 && lie <= j.Finetune.Steps {
			p.log.Warn("lying: perturbing one training step", "job", k.Job, "step", lie)
			w, err = ftwork.RunPerturbed(ctx, dir, params, every, int(lie), ftwork.DefaultPerturbation, progress)
		} else {
			w, err = ftwork.Run(ctx, dir, params, every, progress)
		}
		if err != nil {
			return fmt.Errorf("fine-tune: %w", err)
		}
	}
	p.log.Info("fine-tuned", "job", k.Job, "steps", w.Steps(), "took", time.Since(t0).Round(time.Millisecond),
		"root", fmt.Sprintf("%x", w.Root[:8]), "final", fmt.Sprintf("%x", w.Final[:8]))
	model, err := os.ReadFile(w.Model)
	if err != nil {
		return err
	}
	h, err := p.cfg.Store.Put(model)
	if err != nil {
		return err
	}
	// The fine-tuned model is the client's (and the validators' while the
	// task is in games): never announced.
	if err := p.access.BindOutput(h, j, k.Stage); err != nil {
		p.log.Warn("the fine-tuned model is served to nobody", "job", k.Job, "err", err)
	}
	salt := randomHash()
	secret := &resultSecret{Result: w.Result(), Salt: salt, CommitDeadline: commitDeadline, Finetune: dir}
	if err := p.commitSecret(ctx, k, secret, w.Commitment(salt, p.addr)); err != nil {
		return err
	}
	f.push(streamMsg{Done: true, Result: &h})
	p.log.Info("committed fine-tune result", "job", k.Job, "stage", k.Stage, "result", fmt.Sprintf("%x", w.Result()))
	return nil
}

// revealFinetuneMsg is the reveal of a fine-tune result kept in secret r.
func revealFinetuneMsg(k taskKey, r *resultSecret) (types.RawMsg, error) {
	w, err := ftwork.Open(r.Finetune)
	if err != nil {
		return types.RawMsg{}, fmt.Errorf("the fine-tune work of %s: %w", k, err)
	}
	return w.Reveal(k.Job, k.Stage, r.Salt).Raw(), nil
}

// finetuneWork returns this provider's work on task k, if it has one.
func (p *Provider) finetuneWork(k taskKey) *ftwork.Work {
	p.mu.Lock()
	r, ok := p.results[k]
	p.mu.Unlock()
	dir := p.finetuneDir(k) // the work stays after the job closed: the client fetches its model
	if ok && r.Finetune != "" {
		dir = r.Finetune
	}
	if _, err := os.Stat(dir); err != nil {
		return nil
	}
	w, err := ftwork.Open(dir)
	if err != nil {
		p.log.Warn("cannot open the fine-tune work", "task", k.String(), "err", err)
		return nil
	}
	return w
}

// answerGame opens this provider's checkpoints for the current round of
// game match of task k, if its root plays it and its group has not
// answered yet (T7: any member, or a relayer, may answer for a group).
func (p *Provider) answerGame(ctx context.Context, k taskKey, match uint16) {
	w := p.finetuneWork(k)
	if w == nil {
		return
	}
	for attempt := 0; attempt < 3; attempt++ {
		g, err := gameOf(ctx, p.cfg.Chain, k.Job, k.Stage, match)
		if err != nil || g.Status != finetune.StatusOpen {
			return
		}
		i := -1
		for gi := range g.Groups {
			if g.Groups[gi].Root == w.Root {
				i = gi
			}
		}
		if i < 0 || g.Groups[i].Opened {
			return
		}
		msg, err := w.OpenMsg(g)
		if err != nil {
			p.log.Error("cannot open checkpoints for the game", "job", k.Job, "match", match, "err", err)
			return
		}
		_, err = p.sender.Send(ctx, msg.Raw())
		var te *node.TxError
		switch {
		case err == nil:
			p.log.Info("opened checkpoints", "job", k.Job, "match", match, "round", g.Round, "points", g.Points())
			return
		case errors.As(err, &te) && (te.Code == types.ErrDuplicate.Code || te.Code == types.ErrWrongPhase.Code):
			return // a co-member answered, or the round moved on
		}
		p.log.Warn("checkpoint opening refused", "job", k.Job, "match", match, "err", err)
	}
}

// gameOf reads game match of job's stage from the chain.
func gameOf(ctx context.Context, c *node.Client, job uint64, stage, match uint16) (*finetune.Game, error) {
	j, err := c.Job(ctx, job)
	if err != nil {
		return nil, err
	}
	if t := taskOf(j, int(stage)); t != nil {
		for _, g := range t.Games {
			if g.Match == match {
				return g, nil
			}
		}
	}
	return nil, fmt.Errorf("job %d stage %d has no game %d", job, stage, match)
}

// serveCheckpoint answers one CheckpointProtocol request.
func (p *Provider) serveCheckpoint(s network.Stream) {
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(5 * time.Minute))
	reply := func(h checkpointHeader) bool { return json.NewEncoder(s).Encode(h) == nil }
	var req checkpointRequest
	if err := json.NewDecoder(io.LimitReader(s, 1<<10)).Decode(&req); err != nil {
		reply(checkpointHeader{Error: "bad request: " + err.Error()})
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := p.access.CheckpointParty(ctx, req.Job, req.Stage, s.Conn().RemotePeer()); err != nil {
		reply(checkpointHeader{Error: err.Error()})
		return
	}
	w := p.finetuneWork(taskKey{req.Job, req.Stage})
	if w == nil {
		reply(checkpointHeader{Error: fmt.Sprintf("no fine-tune work for job %d stage %d here", req.Job, req.Stage)})
		return
	}
	if req.Step > w.Steps() {
		reply(checkpointHeader{Error: fmt.Sprintf("job %d has steps 0..%d, not %d", req.Job, w.Steps(), req.Step)})
		return
	}
	path, err := w.Checkpoint(ctx, int(req.Step))
	if err != nil {
		reply(checkpointHeader{Error: err.Error()})
		return
	}
	bz, err := os.ReadFile(path)
	if err != nil {
		reply(checkpointHeader{Error: err.Error()})
		return
	}
	if reply(checkpointHeader{Size: int64(len(bz))}) {
		_, _ = s.Write(bz)
	}
}

// CheckpointParty decides whether peer remote may fetch the checkpoints
// of job's stage: its client, or an active validator while the stage is in
// step-bisection games.
func (a *Access) CheckpointParty(ctx context.Context, job uint64, stage uint16, remote peer.ID) error {
	j, err := a.Chain.Job(ctx, job)
	if err != nil {
		return fmt.Errorf("job %d: %w", job, err)
	}
	addr, err := p2p.AddressOf(remote)
	if err != nil {
		return fmt.Errorf("peer %s has no address: %w", remote, err)
	}
	if addr == j.Client {
		return nil
	}
	if t := taskOf(j, int(stage)); t != nil && t.Status == verifier.TaskGame.String() && a.activeValidator(ctx, addr) == nil {
		return nil
	}
	return fmt.Errorf("peer %s may not fetch the checkpoints of job %d stage %d (its client, or an active validator while its games are on)", remote, job, stage)
}

// FetchCheckpoint fetches the checkpoint after step of job's stage from
// provider peer into path (at most MaxCheckpointBytes). The caller checks
// its hash.
func FetchCheckpoint(ctx context.Context, h *p2p.Host, provider peer.ID, job uint64, stage uint16, step uint64, path string) error {
	s, err := h.Host().NewStream(ctx, provider, CheckpointProtocol)
	if err != nil {
		return fmt.Errorf("cannot open a checkpoint stream to %s: %w", provider, err)
	}
	defer s.Close()
	stop := context.AfterFunc(ctx, func() { _ = s.Reset() })
	defer stop()
	if err := json.NewEncoder(s).Encode(checkpointRequest{Job: job, Stage: stage, Step: step}); err != nil {
		return err
	}
	br := bufio.NewReader(s)
	line, err := br.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("checkpoint from %s: %w", provider, err)
	}
	var hdr checkpointHeader
	if err := json.Unmarshal(line, &hdr); err != nil {
		return fmt.Errorf("checkpoint from %s: a bad header: %w", provider, err)
	}
	switch {
	case hdr.Error != "":
		return fmt.Errorf("provider %s: %s", provider, hdr.Error)
	case hdr.Size <= 0 || hdr.Size > MaxCheckpointBytes:
		return fmt.Errorf("provider %s announces a checkpoint of %d bytes: want 1..%d", provider, hdr.Size, MaxCheckpointBytes)
	}
	tmp := path + ".part"
	out, err := os.Create(tmp)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, io.LimitReader(br, hdr.Size))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != hdr.Size {
		err = fmt.Errorf("provider %s sent %d of %d bytes", provider, n, hdr.Size)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}
