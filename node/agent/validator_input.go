package agent

import (
	"context"
	"errors"
	"fmt"

	ethcrypto "github.com/ethereum/go-ethereum/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/he"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// Input checks (issue 11, H1). When a provider reports that it could not
// get or use its task's input, the chain opens an input check: the
// validator fetches the input (from the client or any party that serves
// it, never larger than the job allows), checks it and votes
// InputAvailable or InputBad through castVote (sealed, then opened), or
// Abstain when it cannot decide (e.g. it cannot get the model to count the
// prompt's tokens). Having voted available it serves the input to the
// task's providers (its Access binds it; they fetch from validators once
// the task reopens) and dials the providers that reported.
//
// The checks:
//   - inference: the prompt blob is fetched by the seal deadline
//     (inputCheckBy: a quarter of the vote window before it) and decodes as an LLMInput; it
//     tokenizes to at most the job's prompt_tokens, or, if the job
//     declares none, the prompt plus max_tokens fit the validator's
//     context of the model;
//   - pipeline: the input manifest, the model (ModelSize), the evaluation
//     keys and the stage's input ciphertext are fetched and parse for the
//     job (the model's stages, the keys for its preset) and the stage
//     evaluates on them.
//
// Anything missing at the seal deadline, or not what the job declares, is
// InputBad: the validators are the data availability layer of a contested
// input, and a client that withholds or corrupts it pays the reservation.

// minInputCheckMargin is the fewest blocks before the seal deadline at
// which the validator stops fetching an input (or judging a session
// dispute) and seals its vote.
const minInputCheckMargin = 3

// inputCheckBy is the height at which a validator stops judging a vote
// sealed until sealBy and opened until deadline, and seals: a quarter of
// the vote window before sealBy, at least minInputCheckMargin blocks. The
// window is read from the vote itself: the chain seals votes for the
// first half of dispute_blocks and opens them in the second, so deadline
// - sealBy is the sealing phase's length (or one block more). A fixed 3
// blocks were too few in the soak (finding 6): a validator still fetching
// 52 MB of keys and ciphertext under load sealed too late, its seal was
// refused and it was slashed for missing the vote, while stopping earlier
// it votes what it found (InputBad: not available to it) in time.
func inputCheckBy(sealBy, deadline uint64) uint64 {
	var window uint64
	if deadline > sealBy {
		window = deadline - sealBy
	}
	m := max(minInputCheckMargin, window/4)
	if sealBy <= m {
		return sealBy
	}
	return sealBy - m
}

// serveInputs installs the validator's Access on its host (an in-memory
// one if none is set): it serves what input checks bind, to the job's
// parties only.
func (v *Validator) serveInputs() {
	if v.Access == nil {
		v.Access = NewAccess(v.Chain)
	}
	v.Host.SetAuthorize(v.Access.Authorize)
}

// handleInputCheck judges the input of d by its seal deadline and votes.
func (v *Validator) handleInputCheck(ctx context.Context, d dispute) {
	work, cancel := untilHeight(ctx, v.Chain, inputCheckBy(d.SealBy, d.Deadline))
	verdict, why, err := v.JudgeInput(work, d.Job, d.Stage)
	cancel()
	if err == nil && ctx.Err() == nil {
		v.Logger.Info("input checked", "job", d.Job, "stage", d.Stage, "vote", inputVoteName(verdict), "why", why)
		vctx, vcancel := untilHeight(ctx, v.Chain, d.Deadline)
		err = v.castVote(vctx, d.Job, d.Stage, d.Deadline, verdict)
		vcancel()
		if err == nil && verdict == verifier.InputAvailable {
			v.dialReporters(ctx, d.Job, d.Stage)
		}
	}
	if err != nil && ctx.Err() == nil {
		v.Logger.Error("input check failed", "job", d.Job, "stage", d.Stage, "err", err)
	}
	if v.checked != nil {
		v.checked(d.Job, d.Stage, err)
	}
}

func inputVoteName(h types.Hash) string {
	switch h {
	case verifier.InputAvailable:
		return "available"
	case verifier.InputBad:
		return "bad"
	case verifier.Abstain:
		return "abstain"
	}
	return fmt.Sprintf("%x", h[:8])
}

// JudgeInput fetches and checks the input of stage of job until ctx ends
// and returns the vote (verifier.InputAvailable, InputBad or Abstain) and
// why. An available input is bound to the job in the validator's Access:
// it serves it to the job's providers. err is set only when the validator
// should not vote at all (the job cannot be read).
//
// The job is read again while the node cannot be reached: a validator
// whose node does not answer until ctx ends abstains (it took part but
// could not check), so that its vote, sealed once the node is back,
// does not count as missed.
func (v *Validator) JudgeInput(ctx context.Context, job uint64, stage uint16) (vote types.Hash, why string, err error) {
	var j *chain.JobView
	err = v.untilChain(ctx, job, stage, "read the job", func() (err error) {
		j, err = v.Chain.Job(ctx, job)
		return err
	})
	var qe *node.QueryError
	if err != nil && ctx.Err() != nil && !errors.As(err, &qe) {
		return verifier.Abstain, fmt.Sprintf("this validator's node did not answer before the seal deadline: %v", err), nil
	}
	if err != nil {
		return types.Hash{}, "", err
	}
	if int(stage) >= len(j.Tasks) {
		return types.Hash{}, "", fmt.Errorf("job %d stage %d has no task", job, stage)
	}
	var blobs []types.Hash
	switch j.Kind {
	case market.KindInference:
		vote, why, blobs = v.judgeLLMInput(ctx, j)
	case market.KindPipeline:
		vote, why, blobs = v.judgePipelineInput(ctx, j, int(stage))
	case market.KindFinetune:
		vote, why, blobs = v.judgeFinetuneInput(ctx, j)
	default:
		return verifier.Abstain, fmt.Sprintf("a %s job: this agent checks inference and pipeline inputs", j.Kind), nil
	}
	if vote == verifier.InputAvailable {
		if v.Access == nil {
			v.serveInputs()
		}
		for i, h := range blobs {
			var err error
			if j.Kind == market.KindPipeline && stage > 0 && i == len(blobs)-1 {
				err = v.Access.BindOutput(h, j, stage-1) // the previous stage's result
			} else {
				err = v.Access.BindInput(h, j)
			}
			if err != nil {
				v.Logger.Warn("an input the validator found available is not served", "job", job, "blob", fmt.Sprintf("%x", h[:8]), "err", err)
			}
		}
	}
	return vote, why, nil
}

// slotPeers dials the providers of j's slots and returns those reachable.
func (v *Validator) slotPeers(ctx context.Context, j *chain.JobView) []peer.ID {
	var out []peer.ID
	for _, a := range slotProviders(j) {
		if pid, err := connectProvider(ctx, v.Host, v.Chain, a); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// judgeLLMInput checks an inference job's prompt; blobs is what to serve
// if it is available.
func (v *Validator) judgeLLMInput(ctx context.Context, j *chain.JobView) (types.Hash, string, []types.Hash) {
	v.dialClient(ctx, j)
	if err := fetchFromPartiesMax(ctx, v.Host, v.Chain, v.Store, j, j.Input, maxLLMInputBlob); err != nil {
		return verifier.InputBad, fmt.Sprintf("the prompt could not be fetched by the seal deadline: %v", err), nil
	}
	bz, err := v.Store.Get(j.Input)
	if err != nil {
		return verifier.Abstain, fmt.Sprintf("cannot read the fetched prompt: %v", err), nil
	}
	in, err := DecodeLLMInput(bz)
	if err != nil {
		return verifier.InputBad, err.Error(), nil
	}
	m, release, err := v.model(ctx, j, "", v.slotPeers(ctx, j))
	if err != nil {
		return verifier.Abstain, fmt.Sprintf("cannot load the model to count the prompt's tokens: %v", err), nil
	}
	defer release()
	toks, err := m.Tokenize(in.Prompt)
	if err != nil {
		return verifier.Abstain, fmt.Sprintf("cannot tokenize the prompt: %v", err), nil
	}
	n, c := uint64(len(toks)), uint64(m.Options().ContextSize)
	switch {
	case j.PromptTokens > 0 && n > j.PromptTokens:
		return verifier.InputBad, fmt.Sprintf("the prompt is %d tokens, the job declares %d", n, j.PromptTokens), nil
	case j.PromptTokens == 0 && n+j.MaxTokens > c:
		return verifier.InputBad, fmt.Sprintf("the job declares no prompt length and its prompt (%d tokens) plus max_tokens (%d) exceed the context of %d tokens", n, j.MaxTokens, c), nil
	}
	return verifier.InputAvailable, fmt.Sprintf("the prompt is %d tokens (declared %d)", n, j.PromptTokens), []types.Hash{j.Input}
}

// judgePipelineInput checks what stage s of pipeline job j needs: the
// client's manifest, model and evaluation keys, and the stage's input
// ciphertext (the client's for stage 0, the previous stage's settled
// result after it, listed last in blobs); the stage must evaluate on them.
func (v *Validator) judgePipelineInput(ctx context.Context, j *chain.JobView, s int) (types.Hash, string, []types.Hash) {
	bad := func(f string, a ...any) (types.Hash, string, []types.Hash) {
		return verifier.InputBad, fmt.Sprintf(f, a...), nil
	}
	v.dialClient(ctx, j)
	if err := fetchFromPartiesMax(ctx, v.Host, v.Chain, v.Store, j, j.Input, maxPipelineInputBlob); err != nil {
		return bad("the input manifest could not be fetched by the seal deadline: %v", err)
	}
	bz, err := v.Store.Get(j.Input)
	if err != nil {
		return verifier.Abstain, err.Error(), nil
	}
	in, err := DecodePipelineInput(bz)
	if err != nil {
		return bad("%v", err)
	}
	if in.Model != j.Model {
		return bad("the input names model %x, the job %x", in.Model[:8], j.Model[:8])
	}
	if !v.Store.Has(j.Model) && (j.ModelSize == 0 || j.ModelSize > uint64(blobstore.MaxSize)) {
		return verifier.Abstain, fmt.Sprintf("the job declares a model size of %d bytes: the validator fetches no model of unknown or impossible size", j.ModelSize), nil
	}
	if err := fetchFromPartiesMax(ctx, v.Host, v.Chain, v.Store, j, j.Model, int64(j.ModelSize)); err != nil {
		return bad("the model could not be fetched by the seal deadline: %v", err)
	}
	if err := fetchFromPartiesMax(ctx, v.Host, v.Chain, v.Store, j, in.Keys, maxEvalKeysBlob); err != nil {
		return bad("the evaluation keys could not be fetched by the seal deadline: %v", err)
	}
	input := stageInput(j, in, s)
	switch {
	case input == (types.Hash{}):
		return verifier.Abstain, fmt.Sprintf("stage %d has not settled: stage %d has no agreed input", s-1, s), nil
	case s == 0:
		err = fetchFromPartiesMax(ctx, v.Host, v.Chain, v.Store, j, input, maxPush)
	default:
		var peers []peer.ID
		for _, sl := range j.Tasks[s-1].Slots {
			if sl.Result != nil && *sl.Result == input {
				if pid, err := connectProvider(ctx, v.Host, v.Chain, sl.Provider); err == nil {
					peers = append(peers, pid)
				}
			}
		}
		if !v.Store.Has(input) {
			_, err = v.Host.Fetch(ctx, input, p2p.FetchOptions{Peers: peers, MaxSize: maxPush})
		}
	}
	if err != nil {
		return bad("the stage's input ciphertext could not be fetched by the seal deadline: %v", err)
	}
	mb, err := v.Store.Get(in.Model)
	if err != nil {
		return verifier.Abstain, err.Error(), nil
	}
	m, err := he.ParseModel(mb)
	if err != nil {
		return bad("the model does not parse: %v", err)
	}
	if len(m.Stages) != int(j.Stages) {
		return bad("the job has %d stages, its model %d", j.Stages, len(m.Stages))
	}
	parts := &pipelineParts{In: in, Model: m}
	ev, err := parts.evaluator(v.Store, m)
	if err != nil {
		return bad("the evaluation keys do not parse for the model: %v", err)
	}
	inBytes, err := v.Store.Get(input)
	if err != nil {
		return verifier.Abstain, err.Error(), nil
	}
	if _, err := evalStage(ev, s, inBytes); err != nil {
		return bad("stage %d does not evaluate on its input: %v", s, err)
	}
	return verifier.InputAvailable, fmt.Sprintf("stage %d evaluates on its input", s), []types.Hash{j.Input, in.Model, in.Keys, input}
}

// dialReporters connects to the providers of the task that have not
// committed (those that reported the input), so that they can fetch it
// from this validator once the task reopens.
func (v *Validator) dialReporters(ctx context.Context, job uint64, stage uint16) {
	j, err := v.Chain.Job(ctx, job)
	if err != nil || int(stage) >= len(j.Tasks) {
		return
	}
	for _, s := range j.Tasks[stage].Slots {
		if s.NoShow || s.Committed {
			continue
		}
		if _, err := connectProvider(ctx, v.Host, v.Chain, s.Provider); err != nil {
			v.Logger.Warn("cannot reach a provider that reported the input (it may still dial this validator)", "job", job, "provider", s.Provider.Hex(), "err", err)
		}
	}
}

// dialClient connects the validator to job j's client, so that it can
// fetch the input it is to judge: a validator that cannot reach an honest
// client would vote its input bad (see findClient).
func (v *Validator) dialClient(ctx context.Context, j *chain.JobView) {
	if len(peersOf(v.Host, j.Client)) > 0 {
		return
	}
	if _, err := findClient(ctx, v.Host, v.Chain, j, ""); err != nil {
		v.Logger.Warn("cannot reach the job's client to fetch its input (it may still serve it through others)", "job", j.ID, "client", j.Client.Hex(), "err", err)
	}
}

// findClient connects h to job j's client, which publishes no address:
// its libp2p identity is its account key, recovered from the signature of
// the transaction that posted the job (found in the node's transaction
// index by its job_posted event), and its addresses come from the DHT. id,
// if not empty, is the client's peer id found before. It returns the
// client's peer id.
func findClient(ctx context.Context, h *p2p.Host, c *node.Client, j *chain.JobView, id peer.ID) (peer.ID, error) {
	if id == "" {
		var err error
		if id, err = clientPeer(ctx, c, j); err != nil {
			return "", err
		}
	}
	return id, h.FindPeer(ctx, id)
}

// clientPeer is the peer id of job j's client: the public key that signed
// the transaction posting j.
func clientPeer(ctx context.Context, c *node.Client, j *chain.JobView) (peer.ID, error) {
	res, err := c.RPC.TxSearch(ctx, fmt.Sprintf("%s.job=%d", market.EventJobPosted{}.EventType(), j.ID), false, nil, nil, "")
	if err != nil {
		return "", fmt.Errorf("find the transaction that posted job %d: %w", j.ID, err)
	}
	for _, r := range res.Txs {
		tx, err := types.DecodeTx(r.Tx)
		if err != nil || tx.Body.From != j.Client {
			continue
		}
		h, err := tx.Body.SignHash()
		if err != nil {
			continue
		}
		pub, err := ethcrypto.SigToPub(h[:], tx.Sig)
		if err != nil || ethcrypto.PubkeyToAddress(*pub) != j.Client {
			continue
		}
		return p2p.PeerIDOf(pub)
	}
	return "", fmt.Errorf("no transaction of %s posting job %d in the node's index", j.Client.Hex(), j.ID)
}
