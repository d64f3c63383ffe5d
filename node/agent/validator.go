package agent

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ethcrypto "github.com/ethereum/go-ethereum/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/finetune"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/session"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// Defaults of the validator agent's bounds.
const (
	// DefaultValidatorWorkers is how many disputes are checked at once.
	DefaultValidatorWorkers = 2
	// DefaultValidatorBacklog is how many disputes may wait for a worker.
	DefaultValidatorBacklog = 64
	// DefaultValidatorModels is how many LLM models stay loaded.
	DefaultValidatorModels = 2
)

// maxLLMInputBlob bounds an inference job's input blob: a prompt of
// MaxPromptBytes, every byte JSON-escaped to six, and the envelope.
const maxLLMInputBlob = 6*MaxPromptBytes + 64

// Validator is the validator agent. On a dispute over an inference job it
// fetches the prompt and the model, re-generates the greedy answer in the
// job's determinism class, and votes for the hash of that answer: within a
// class outputs are bit-identical, so a revealed output passes only if it
// is exactly the re-generation (no tolerance). On a dispute over a pipeline
// stage it re-executes the stage on its agreed input ciphertext and votes
// for the hash it computes. Either way the vote is the validator's own
// result, whether or not a slot revealed it: where every disputed output is
// wrong, validators agreeing on the true hash slash every liar.
//
// Disputes are checked by a bounded pool of workers, each under a
// deadline: the dispute's voting deadline height. Nothing is fetched that
// is larger than the job declares, and no lock is held across network I/O
// or a model load, so one slow or hostile dispute cannot stall another.
type Validator struct {
	Chain  *node.Client
	Key    *ecdsa.PrivateKey // the validator's operator account
	Host   *p2p.Host         // identity: the operator key
	Store  *blobstore.Store
	LLM    llm.Options
	Logger *slog.Logger
	// Workers bounds the disputes checked at once (0: DefaultValidatorWorkers).
	Workers int
	// Backlog bounds the disputes waiting for a worker (0:
	// DefaultValidatorBacklog); a dispute that finds it full is logged and
	// not checked.
	Backlog int
	// MaxModels bounds the LLM models kept loaded (0:
	// DefaultValidatorModels); the least recently used idle one is closed
	// first.
	MaxModels int
	// Canary configures the canaries the agent posts (canary.go); with no
	// Dir it posts none.
	Canary CanaryConfig
	// Access decides who may fetch the blobs the validator serves: the
	// inputs of input checks it found available (to the task's
	// providers). Run installs it on Host; nil is an in-memory one.
	Access *Access

	sender *node.Sender
	models modelCache
	// checked, if set (tests), sees the end of every dispute check.
	checked func(job uint64, stage uint16, err error)

	// The canary worker (canary.go), started on the first block.
	canaryOnce  sync.Once
	canaryState atomic.Pointer[canaries]
}

// NewValidator wires a validator agent.
func NewValidator(c *node.Client, key *ecdsa.PrivateKey, host *p2p.Host, store *blobstore.Store, o llm.Options) *Validator {
	return &Validator{Chain: c, Key: key, Host: host, Store: store, LLM: o, Logger: slog.Default(),
		sender: node.NewSender(c, key)}
}

// Address is the operator account.
func (v *Validator) Address() types.Address { return ethcrypto.PubkeyToAddress(v.Key.PublicKey) }

// Close frees the loaded models (a model in use is closed once released).
func (v *Validator) Close() { v.models.closeAll() }

// dispute is one dispute_opened event waiting for a worker.
type dispute struct {
	Job      uint64
	Stage    uint16
	Deadline uint64 // the last height a vote is accepted at
	// Input: an input check (input_check_opened), sealed until SealBy.
	Input  bool
	SealBy uint64
	// Session: a session dispute (Job is the session, Dispute its number).
	Session bool
	Dispute uint64
	// Game: a fine-tune game awaiting its verdict (Match of Job's Stage).
	Game  bool
	Match uint16
}

// Run follows the chain until ctx ends and votes on disputes. The block
// loop only queues disputes; workers check them.
//
// It starts one voting window back (replayFrom): a validator restarted
// while a dispute it must vote on is open (a vote missed is slashed) still
// sees the dispute_opened of a block committed while it was down. A vote
// it sealed or opened before the restart is the same vote again (its salt
// is derived, voteSalt), so sending it again is harmless.
//
// Until its node has a committed block and answers, Run waits for it
// (waitForChain): started beside a fresh chain's node, or on a node that is
// down or catching up, the agent waits and logs what for; it does not stop.
// It returns ctx's error once ctx ends; any other error is a real one, also
// logged at error level (stoppedForGood).
func (v *Validator) Run(ctx context.Context) (err error) {
	defer func() {
		stoppedForGood(ctx, v.Logger, "validator", err, "this node no longer checks disputes nor votes, and its operator is slashed for every vote it misses; "+
			"fix the cause and restart the node (ogpud start), or run it with --validator-agent=false to go without on purpose")
	}()
	var latest, from int64
	var blocks <-chan node.BlockEvents
	err = waitForChain(ctx, v.Logger, "validator", "the chain's voting windows and its blocks", func() error {
		st, err := v.Chain.RPC.Status(ctx)
		if err != nil {
			return v.Chain.Unreachable(err)
		}
		if latest = st.SyncInfo.LatestBlockHeight; latest < 1 {
			return errNoBlockYet
		}
		if from, err = v.replayFrom(ctx, latest, st.SyncInfo.EarliestBlockHeight); err != nil {
			return err
		}
		blocks, err = v.Chain.Subscribe(ctx, from)
		return err
	})
	if err != nil {
		return err
	}
	if from <= latest {
		v.Logger.Info("looking for open disputes in the blocks before the start", "from", from, "to", latest)
	}
	v.models.setMax(cmp0(v.MaxModels, DefaultValidatorModels))
	v.serveInputs()
	pool := newDisputePool(cmp0(v.Workers, DefaultValidatorWorkers), cmp0(v.Backlog, DefaultValidatorBacklog),
		func(d dispute) { v.handle(ctx, d) })
	for b := range blocks {
		if b.Height > latest { // canaries only from the start on
			v.canaryBlock(ctx, b)
		}
		v.queueDisputes(ctx, pool, b, uint64(latest))
	}
	pool.close()
	v.canaryWait()
	return ctx.Err()
}

// replayFrom is the first block Run reads: the longest voting window back
// from latest (a dispute opened before it has closed), or the node's
// earliest block.
func (v *Validator) replayFrom(ctx context.Context, latest, earliest int64) (int64, error) {
	p, err := v.Chain.Params(ctx)
	if err != nil {
		return 0, fmt.Errorf("cannot read the chain's voting windows: %w", err)
	}
	window := p.Market.DisputeBlocks
	if p.Market.Finetune != nil {
		window = max(window, p.Market.Finetune.VerdictBlocks)
	}
	return max(latest+1-int64(min(window, uint64(latest))), earliest, 1), nil
}

// queueDisputes queues the votes block b asks for. A vote whose deadline
// is not after started (the height when Run started) can no longer be
// included: only blocks replayed from before the start have such.
func (v *Validator) queueDisputes(ctx context.Context, pool *disputePool, b node.BlockEvents, started uint64) {
	queue := func(d dispute, what string) {
		if d.Deadline <= started {
			return
		}
		if uint64(b.Height) <= started && v.voted(ctx, d) {
			return
		}
		if !pool.submit(d) {
			v.Logger.Error("dispute backlog full: not checking this "+what, "job", d.Job, "stage", d.Stage,
				"hint", "raise the validator's workers or backlog")
		}
	}
	for _, e := range node.EventsOf[market.EventDisputeOpened](b.Events) {
		queue(dispute{Job: e.Job, Stage: e.Stage, Deadline: e.Deadline}, "dispute")
	}
	for _, e := range node.EventsOf[market.EventInputCheckOpened](b.Events) {
		queue(dispute{Job: e.Job, Stage: e.Stage, Deadline: e.Deadline, Input: true, SealBy: e.SealBy}, "input")
	}
	for _, e := range node.EventsOf[finetune.EventGameEnded](b.Events) {
		queue(dispute{Job: e.Job, Stage: e.Stage, Game: true, Match: e.Match, Deadline: e.Deadline}, "fine-tune game")
	}
	for _, e := range node.EventsOf[session.EventDisputeOpened](b.Events) {
		if e.Kind == session.KindEquivocation {
			continue // decided in its transaction
		}
		queue(dispute{Job: e.Session, Dispute: e.Dispute, Session: true, Deadline: e.Deadline, SealBy: e.SealBy}, "session dispute")
	}
}

// voted reports whether a dispute replayed from before the start needs no
// work: its task no longer waits for votes, or holds this validator's
// opened vote. Where the chain cannot tell, the dispute is checked.
func (v *Validator) voted(ctx context.Context, d dispute) bool {
	if d.Session || d.Game {
		return false
	}
	j, err := v.Chain.Job(ctx, d.Job)
	if err != nil || int(d.Stage) >= len(j.Tasks) {
		return false
	}
	t := j.Tasks[d.Stage]
	if t.Status != verifier.TaskDisputed.String() && t.Status != verifier.TaskInputCheck.String() {
		return true
	}
	me := v.Address()
	for _, vt := range t.Votes {
		if vt.Validator == me {
			return true
		}
	}
	return false
}

// disputePool runs handle on submitted disputes with a fixed number of
// workers and a bounded backlog; submit never blocks.
type disputePool struct {
	queue chan dispute
	wg    sync.WaitGroup
}

func newDisputePool(workers, backlog int, handle func(dispute)) *disputePool {
	p := &disputePool{queue: make(chan dispute, backlog)}
	for range workers {
		p.wg.Go(func() {
			for d := range p.queue {
				handle(d)
			}
		})
	}
	return p
}

// submit queues d, or reports false if the backlog is full.
func (p *disputePool) submit(d dispute) bool {
	select {
	case p.queue <- d:
		return true
	default:
		return false
	}
}

// close stops taking disputes and waits for the queued ones.
func (p *disputePool) close() {
	close(p.queue)
	p.wg.Wait()
}

func cmp0(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

// handle checks d under its deadline: the context ends once the chain has
// committed the dispute's last voting height, after which a vote would be
// refused.
func (v *Validator) handle(ctx context.Context, d dispute) {
	switch {
	case d.Input:
		v.handleInputCheck(ctx, d)
		return
	case d.Session:
		v.handleSessionDispute(ctx, d)
		return
	case d.Game:
		v.handleGame(ctx, d)
		return
	}
	dctx, cancel := untilHeight(ctx, v.Chain, d.Deadline)
	defer cancel()
	err := v.check(dctx, ctx, d.Job, d.Stage, d.Deadline)
	if err != nil && ctx.Err() == nil {
		if dctx.Err() != nil {
			err = fmt.Errorf("gave up at the voting deadline (height %d): %w", d.Deadline, err)
		}
		v.Logger.Error("dispute check failed", "job", d.Job, "stage", d.Stage, "err", err)
	}
	if v.checked != nil {
		v.checked(d.Job, d.Stage, err)
	}
}

// reexecuteRetrying re-executes a task, trying again (after 1 s, doubling
// to 8 s) while work lasts: a failure to fetch an input or a model often
// passes (a provider that does not serve it yet, a peer being dialled, a
// restarted node). Audits made validator votes common, and a vote missed
// is slashed: a soak-like run (make test's TestPerturbationShort) saw three
// of four validators give up on their first fetch of an audited pipeline
// stage's input ("no peer served its manifest") and miss the vote.
func (v *Validator) reexecuteRetrying(work context.Context, job uint64, stage uint16) (*Recheck, error) {
	wait := time.Second
	for {
		rc, err := v.Reexecute(work, job, stage)
		if err == nil || work.Err() != nil {
			return rc, err
		}
		v.Logger.Warn("re-execution failed: trying again", "job", job, "stage", stage, "in", wait, "err", err)
		select {
		case <-work.Done():
			return nil, err
		case <-time.After(wait):
		}
		wait = min(2*wait, 8*time.Second)
	}
}

// Verdict is how one revealed output compares with the validator's own
// re-execution.
type Verdict struct {
	Result   types.Hash
	Provider types.Address
	// Match: the output is exactly the validator's re-execution.
	Match bool
}

// Recheck is the validator's re-execution of a disputed task.
type Recheck struct {
	// Result is the hash of the validator's own result (an LLMOutput of the
	// greedy re-generation, or the re-executed stage's ciphertext).
	Result types.Hash
	// Verdicts compare each distinct revealed output with Result.
	Verdicts []Verdict
}

// check re-executes under work (the dispute's deadline) and votes under
// ctx, so that a vote sent just before the deadline is still followed to
// its block.
func (v *Validator) check(work, ctx context.Context, job uint64, stage uint16, deadline uint64) error {
	rc, err := v.reexecuteRetrying(work, job, stage)
	if err != nil {
		return err
	}
	if err := work.Err(); err != nil {
		return err
	}
	matched := 0
	for _, vd := range rc.Verdicts {
		if vd.Match {
			matched++
			v.Logger.Info("output verified", "job", job, "stage", stage, "provider", vd.Provider.Hex())
		} else {
			v.Logger.Info("output is not the re-execution", "job", job, "stage", stage, "provider", vd.Provider.Hex(),
				"revealed", fmt.Sprintf("%x", vd.Result[:8]), "reexecuted", fmt.Sprintf("%x", rc.Result[:8]))
		}
	}
	if matched == 0 {
		v.Logger.Warn("no disputed output is the re-execution: voting for the re-executed result", "job", job, "stage", stage,
			"result", fmt.Sprintf("%x", rc.Result[:8]))
	}
	return v.castVote(ctx, job, stage, deadline, rc.Result)
}

// castVote submits the validator's vote for result on the disputed stage
// of job, in the vote that ends at deadline (a later dispute of the same
// stage is another vote: its salt differs). It is the one place a vote
// leaves the agent (a commit-reveal vote replaces its body).
func (v *Validator) castVote(ctx context.Context, job uint64, stage uint16, deadline uint64, result types.Hash) error {
	// Votes are sealed first (hash of job, stage, result, salt, operator)
	// and opened once every active validator has sealed or the sealing
	// phase is over, so nobody can copy another's vote.
	salt := voteSalt(v.Key, "dispute", result[:], job, uint64(stage), deadline)
	seal := &verifier.MsgCommitVote{Job: job, Stage: stage, Commitment: verifier.VoteCommitment(job, stage, result, salt, v.sender.Address())}
	open := &verifier.MsgVoteDispute{Job: job, Stage: stage, Result: result, Salt: salt}
	return v.sealAndOpen(ctx, job, stage, seal.Raw(), open.Raw(), fmt.Sprintf("job %d stage %d result %x", job, stage, result[:8]))
}

// sealAndOpen sends a sealed vote, then its opening, after the next block
// for as long as the chain says the sealing phase is still on. Both are
// sent again while the node cannot be reached (sendVote).
func (v *Validator) sealAndOpen(ctx context.Context, job uint64, stage uint16, seal, open types.RawMsg, what string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	h, err := v.sendVote(ctx, job, stage, "seal vote", seal)
	if err != nil {
		return fmt.Errorf("seal vote: %w", err)
	}
	v.Logger.Info("sealed vote", "on", what)
	if h == 0 { // sealed by an earlier attempt, at a height not known here
		if h, err = v.Chain.CommittedHeight(ctx); err != nil {
			h = 1
		}
	}
	for ; ; h++ {
		_, err := v.sendVote(ctx, job, stage, "open vote", open)
		var te *node.TxError
		switch {
		case err == nil:
			v.Logger.Info("opened vote", "on", what)
			return nil
		case !errors.As(err, &te) || te.Code != types.ErrWrongPhase.Code:
			return fmt.Errorf("open vote: %w", err)
		}
		// Not every active validator has sealed yet: try after the next block.
		if err := v.Chain.WaitHeight(ctx, h+1); err != nil {
			return fmt.Errorf("open vote: %w", err)
		}
	}
}

// Reexecute computes the validator's own result of the disputed stage of
// job and compares every revealed output with it.
func (v *Validator) Reexecute(ctx context.Context, job uint64, stage uint16) (*Recheck, error) {
	j, err := v.Chain.Job(ctx, job)
	if err != nil {
		return nil, err
	}
	if int(stage) >= len(j.Tasks) {
		return nil, fmt.Errorf("job %d stage %d has no task", job, stage)
	}
	var mine types.Hash
	switch j.Kind {
	case market.KindPipeline:
		mine, err = v.reexecutePipeline(ctx, j, int(stage))
	case market.KindInference:
		mine, err = v.reexecuteLLM(ctx, j, int(stage))
	case market.KindSplit:
		mine, err = v.reexecuteSplit(ctx, j, int(stage))
	default:
		return nil, fmt.Errorf("job %d is a %s job: this agent checks inference, pipeline and split jobs", job, j.Kind)
	}
	if err != nil {
		return nil, err
	}
	rc := &Recheck{Result: mine}
	seen := map[types.Hash]bool{}
	for _, s := range j.Tasks[stage].Slots {
		if s.Result == nil || seen[*s.Result] {
			continue
		}
		seen[*s.Result] = true
		rc.Verdicts = append(rc.Verdicts, Verdict{Result: *s.Result, Provider: s.Provider, Match: *s.Result == mine})
	}
	return rc, nil
}

// reexecuteLLM re-generates the greedy answer of inference job j in its
// determinism class and returns the hash of the LLMOutput an honest
// provider of that class commits.
func (v *Validator) reexecuteLLM(ctx context.Context, j *chain.JobView, stage int) (types.Hash, error) {
	var peers []peer.ID
	var classes []string
	for _, s := range j.Tasks[stage].Slots {
		if s.Result == nil {
			continue
		}
		if pid, err := connectProvider(ctx, v.Host, v.Chain, s.Provider); err == nil {
			peers = append(peers, pid)
		} else {
			v.Logger.Warn("provider unreachable", "provider", s.Provider.Hex(), "err", err)
		}
		if p, err := v.Chain.Provider(ctx, s.Provider); err == nil {
			classes = append(classes, p.Class)
		}
	}
	in, err := v.fetchInput(ctx, j, peers)
	if err != nil {
		return types.Hash{}, err
	}
	class := targetClass(j.Req.Class, classes)
	m, release, err := v.model(ctx, j, class, peers)
	if err != nil {
		return types.Hash{}, err
	}
	defer release()
	out, err := m.Generate(ctx, llm.Request{Prompt: in.Prompt, MaxTokens: int(j.MaxTokens)}, nil)
	if err != nil {
		return types.Hash{}, fmt.Errorf("re-generate job %d: %w", j.ID, err)
	}
	res := &LLMOutput{Version: LLMOutputVersion, Input: j.Input, Tokens: out.Tokens, Text: out.Text}
	return res.Hash(), nil
}

// targetClass is the determinism class to re-execute in: the job's, else
// the one every revealing provider declares, else "" (the validator's own).
func targetClass(job string, providers []string) string {
	if job != "" {
		return job
	}
	for _, c := range providers {
		if c != providers[0] {
			return ""
		}
	}
	if len(providers) > 0 {
		return providers[0]
	}
	return ""
}

// classOptions are the validator's llama.cpp options with the threads and
// batch size of class (llm.Model.Class: "<version>/<backend>/<arch>/
// t<threads>/b<batch>/<sampler>", the version itself holding a slash); the
// loaded model's class is compared with class after loading.
func classOptions(o llm.Options, class string) (llm.Options, error) {
	if class == "" {
		return o, nil
	}
	f := strings.Split(class, "/")
	n := len(f)
	if n < 6 || !strings.HasPrefix(f[n-3], "t") || !strings.HasPrefix(f[n-2], "b") {
		return o, fmt.Errorf("determinism class %q is not <version>/<backend>/<arch>/t<threads>/b<batch>/<sampler>", class)
	}
	t, err1 := strconv.Atoi(f[n-3][1:])
	b, err2 := strconv.Atoi(f[n-2][1:])
	if err1 != nil || err2 != nil || t < 1 || b < 1 || t > 1024 || b > 1<<16 {
		return o, fmt.Errorf("determinism class %q: bad thread count or batch size", class)
	}
	o.Threads, o.BatchSize = t, b
	return o, nil
}

// fetchInput gets the prompt from the client or from a provider that ran
// the job (both serve it to validators), refusing a blob larger than a
// prompt can be.
func (v *Validator) fetchInput(ctx context.Context, j *chain.JobView, providers []peer.ID) (*LLMInput, error) {
	if !v.Store.Has(j.Input) {
		o := p2p.FetchOptions{Peers: append(peersOf(v.Host, j.Client), providers...), MaxSize: maxLLMInputBlob}
		if _, err := v.Host.Fetch(ctx, j.Input, o); err != nil {
			return nil, fmt.Errorf("cannot fetch the prompt of job %d: %w", j.ID, err)
		}
	}
	bz, err := v.Store.Get(j.Input)
	if err != nil {
		return nil, err
	}
	return DecodeLLMInput(bz)
}

// fetchModel makes sure the store holds job j's model, fetching it from
// peers no larger than the job's declared ModelSize.
func (v *Validator) fetchModel(ctx context.Context, j *chain.JobView, peers []peer.ID) error {
	if v.Store.Has(j.Model) {
		return nil
	}
	if j.ModelSize == 0 {
		return fmt.Errorf("job %d declares no model size: the validator fetches no model of unknown size (post the job with its model size)", j.ID)
	}
	if j.ModelSize > uint64(blobstore.MaxSize) {
		return fmt.Errorf("job %d declares a model of %d bytes, above the blob limit %d", j.ID, j.ModelSize, blobstore.MaxSize)
	}
	if _, err := v.Host.Fetch(ctx, j.Model, p2p.FetchOptions{Peers: peers, MaxSize: int64(j.ModelSize)}); err != nil {
		return fmt.Errorf("fetch model %x (at most %d bytes, as job %d declares): %w", j.Model[:8], j.ModelSize, j.ID, err)
	}
	return nil
}

// model returns job j's model loaded in class (the validator's own
// options where class is ""), and a release the caller must call. The
// fetch runs under the caller's context without any lock; only the
// llama.cpp load of one model is shared between callers.
func (v *Validator) model(ctx context.Context, j *chain.JobView, class string, peers []peer.ID) (*llm.Model, func(), error) {
	o, err := classOptions(v.LLM, class)
	if err != nil {
		return nil, nil, err
	}
	if err := v.fetchModel(ctx, j, peers); err != nil {
		return nil, nil, err
	}
	path, err := v.Store.Path(j.Model)
	if err != nil {
		return nil, nil, err
	}
	m, release, err := v.models.get(ctx, modelKey{hash: j.Model, threads: o.Threads, batch: o.BatchSize}, func() (*llm.Model, error) {
		return llm.Load(path, o)
	})
	if err != nil {
		return nil, nil, err
	}
	if got := m.Class(llm.Sampler{}); class != "" && got != class {
		release()
		return nil, nil, fmt.Errorf("job %d runs in determinism class %s, this validator's llama.cpp gives %s: it cannot reproduce the outputs bit for bit, so it does not vote", j.ID, class, got)
	}
	return m, release, nil
}

// modelKey names a model loaded with given options.
type modelKey struct {
	hash           types.Hash
	threads, batch int
}

// modelCache keeps loaded models, at most max idle ones (least recently
// used closed first); a model in use is never closed under its user.
type modelCache struct {
	mu      sync.Mutex
	max     int
	tick    uint64
	entries map[modelKey]*modelEntry
	closed  bool
}

type modelEntry struct {
	ready   chan struct{} // closed when the load ends
	m       *llm.Model
	err     error
	refs    int
	used    uint64
	evicted bool // close once the last user releases it
}

func (c *modelCache) setMax(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.max = n
}

// get returns the model for key, loading it with load once for all
// concurrent callers, and a release the caller must call.
func (c *modelCache) get(ctx context.Context, key modelKey, load func() (*llm.Model, error)) (*llm.Model, func(), error) {
	c.mu.Lock()
	if c.entries == nil {
		c.entries = map[modelKey]*modelEntry{}
	}
	if c.closed {
		c.mu.Unlock()
		return nil, nil, llm.ErrClosed
	}
	e := c.entries[key]
	if e == nil {
		e = &modelEntry{ready: make(chan struct{})}
		c.entries[key] = e
		e.refs++
		c.mu.Unlock()
		m, err := load()
		c.mu.Lock()
		e.m, e.err = m, err
		close(e.ready)
		if err != nil {
			delete(c.entries, key)
			c.mu.Unlock()
			return nil, nil, err
		}
	} else {
		e.refs++
		c.mu.Unlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			c.release(e)
			return nil, nil, ctx.Err()
		}
		c.mu.Lock()
		if e.err != nil {
			e.refs--
			c.mu.Unlock()
			return nil, nil, e.err
		}
	}
	c.tick++
	e.used = c.tick
	c.evictLocked()
	c.mu.Unlock()
	var once sync.Once
	return e.m, func() { once.Do(func() { c.release(e) }) }, nil
}

func (c *modelCache) release(e *modelEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.refs--
	if e.refs == 0 && e.evicted && e.m != nil {
		e.m.Close()
		e.m = nil
	}
	c.evictLocked()
}

// evictLocked closes least recently used idle models while more than max
// are loaded.
func (c *modelCache) evictLocked() {
	max := c.max
	if max <= 0 {
		max = DefaultValidatorModels
	}
	if c.closed {
		max = 0
	}
	for {
		loaded := 0
		var lru modelKey
		var victim *modelEntry
		for k, e := range c.entries {
			if e.m == nil {
				continue // loading
			}
			loaded++
			if e.refs == 0 && (victim == nil || e.used < victim.used) {
				lru, victim = k, e
			}
		}
		if loaded <= max || victim == nil {
			return
		}
		delete(c.entries, lru)
		victim.m.Close()
		victim.m = nil
	}
}

// closeAll closes the idle models now and the others when released.
func (c *modelCache) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for k, e := range c.entries {
		if e.refs > 0 {
			e.evicted = true
			delete(c.entries, k)
		}
	}
	c.evictLocked()
}

// loaded is the number of models loaded (tests).
func (c *modelCache) loaded() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, e := range c.entries {
		if e.m != nil {
			n++
		}
	}
	return n
}
