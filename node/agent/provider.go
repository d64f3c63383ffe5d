package agent

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	ctypes "github.com/cometbft/cometbft/rpc/core/types"
	ethcrypto "github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/finetune"
	"github.com/ogpu-network/ogpu/he"
	"github.com/ogpu-network/ogpu/internal/atomicfile"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/node/pricing"
	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/runtime/llm/train"
	"github.com/ogpu-network/ogpu/session"
	"github.com/ogpu-network/ogpu/split"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// ProviderConfig configures a provider agent.
type ProviderConfig struct {
	Chain *node.Client
	// Key is the provider's account: it bids, commits and is paid.
	Key   *ecdsa.PrivateKey
	Host  *p2p.Host
	Store *blobstore.Store
	// Models are the GGUF models in Store this provider runs and serves.
	Models []types.Hash
	// Want are models to fetch from peers at start, then run and serve.
	Want []types.Hash
	// Slices are GGUF slices in Store (ogpu model split) this provider
	// runs as stages of split jobs and serves; they are advertised with
	// the models.
	Slices []types.Hash
	// WantSlices are slices to fetch from peers at start (by sha256, as
	// a split manifest names them), then run and serve.
	WantSlices []types.Hash
	LLM        llm.Options
	// OnGenerated, if set, is told the tokens and the time of every job
	// generation (metrics; it must not block).
	OnGenerated func(tokens int, took time.Duration)
	// OnStageEvaluated, if set, is told the preset and the time of every
	// CKKS pipeline stage the provider evaluates (metrics; it must not
	// block).
	OnStageEvaluated func(preset string, took time.Duration)
	// Strategy prices jobs; nil means the built-in per-token default.
	Strategy pricing.Strategy
	// Attributes are published on chain (hardware, measured speed).
	Attributes []string
	// Moniker is the provider's display name on chain (consoles and
	// explorers show it, escaped); "" for none.
	Moniker string
	// Bond, if set, is the stake the provider keeps bonded: at start it
	// bonds the difference if it has less.
	Bond *uint256.Int
	// StateDir keeps bid and result secrets so a restart can still reveal.
	StateDir string
	Logger   *slog.Logger
	// FetchProgress, if set, sees the bytes of each wanted model as it
	// is fetched (the CLI draws a progress bar).
	FetchProgress func(model types.Hash, done, total int64)
	// AdvertEvery is how often to gossip the capability advert
	// (default AdvertInterval).
	AdvertEvery time.Duration
	// Pipeline offers the encrypted pipeline runtime (RuntimeCKKS): the
	// provider evaluates CKKS stages of pipeline jobs.
	Pipeline bool
	// Access decides who may fetch the provider's blobs and read its token
	// streams; nil is an in-memory one. NewProvider installs it on Host
	// (Host.SetAuthorize). A long-running agent passes OpenAccess, whose
	// rules survive a restart.
	Access *Access
	// Lie makes the provider change one token of every output before it
	// commits (pipeline stages: evaluate with one weight off; session
	// answers: the third token): a devnet-only switch that shows the
	// dispute path.
	Lie bool
	// Finetune offers fine-tune jobs (the LM head of a served base model,
	// in this build's training class); FinetuneEvery is how often a
	// checkpoint is kept (0: DefaultFinetuneEvery).
	Finetune      bool
	FinetuneEvery int
	// FinetuneLieAt, for tests and the devnet, makes the provider perturb
	// fine-tune step k (0: honest).
	FinetuneLieAt uint64
	// SessionCredit is how many output tokens of a session request run
	// ahead of the voucher paying them (default DefaultSessionCredit).
	SessionCredit uint64
	// SessionRedeemAt: a session lane's vouchers are redeemed once this
	// much is unredeemed (default: a quarter of the lane's budget).
	SessionRedeemAt *uint256.Int
	// SessionRedeemMargin: blocks before a session's expiry at which
	// everything held is redeemed (default 5).
	SessionRedeemMargin uint64
	// NoAutoUnjail turns off the automatic unjail: by default a provider
	// jailed for a no-show sends MsgUnjailProvider once its jail term is
	// over (a jailed provider's bids are refused: without it one missed
	// deadline took a provider out for good).
	NoAutoUnjail bool
}

// maxPipelineModel bounds the pipeline model a provider fetches.
const maxPipelineModel = 64 << 20

// DefaultStrategy is the built-in price: 0.1 oGPU per job plus 0.05 oGPU
// per token of the job's budget.
func DefaultStrategy() pricing.Strategy {
	milli := func(n uint64) *uint256.Int { return new(uint256.Int).Div(types.OGPU(n), uint256.NewInt(1000)) }
	return pricing.PerToken{Base: milli(100), PerToken: milli(50)}
}

// Provider is a running provider agent.
type Provider struct {
	cfg    ProviderConfig
	log    *slog.Logger
	addr   types.Address
	sender *node.Sender
	access *Access
	feeds  feeds
	// work tracks the goroutines Serve starts; Serve waits for them.
	work sync.WaitGroup

	mu sync.Mutex
	// saveMu serializes saveSecrets: each save snapshots and writes
	// under it, so that the file on disk is the newest snapshot (two
	// saves racing on one temporary file lost writes, found by the soak).
	saveMu  sync.Mutex
	models  map[types.Hash]*llm.Model
	class   string
	bids    map[taskKey]*bidSecret
	results map[taskKey]*resultSecret
	running map[taskKey]bool
	// checked: tasks whose input this provider reported and the
	// validators found available: a second report is refused, so the
	// provider fetches (from the validators too) and computes.
	checked map[taskKey]bool
	pipes   map[taskKey]*pipeTask
	// splitSrv receives split hand-offs (nil without slices); splits is
	// what the provider keeps of each split slot it ran.
	splitSrv      *split.Server
	splits        map[taskKey]*splitState
	splitRestarts map[taskKey]splitRestart
	evals         map[[2]types.Hash]*he.Evaluator
	// evalMu serializes CKKS evaluation (an evaluator is single-threaded
	// and the work is CPU-bound).
	evalMu sync.Mutex
	loadMu sync.Mutex // held while an evaluator is made

	// lanes are the session lanes this provider holds (session_provider.go);
	// height is the last block it saw.
	sessMu sync.Mutex
	lanes  map[uint64]*sessionLane
	height atomic.Uint64

	// dash is what the operator's console shows (dashboard.go); priceMu
	// guards cfg.Strategy, which SetPricing swaps.
	dash    *dashboard
	priceMu sync.Mutex

	// jail is this provider's jail as the chain last told it
	// (autounjail).
	jail jailState
}

type taskKey struct {
	Job   uint64
	Stage uint16
}

type bidSecret struct {
	Price    *uint256.Int
	Salt     types.Hash
	Revealed bool
	// BidEnd and RevealEnd are the job's windows: the reveal goes out
	// once block BidEnd is committed (revealDue), a block before the
	// job_revealing event; 0 in files of older versions (the event
	// then starts it).
	BidEnd, RevealEnd uint64
	// revealing: a reveal of it is under way (not saved).
	revealing bool
}

type resultSecret struct {
	Result         types.Hash
	Salt           types.Hash
	CommitDeadline uint64
	Revealed       bool
	// Failures counts refused reveals; the agent gives up after a few.
	Failures int
	// Split: a split stage's transcript (Result is its Hout): revealed
	// with MsgRevealTranscript.
	Split bool       `json:",omitempty"`
	Chain uint16     `json:",omitempty"`
	Steps uint32     `json:",omitempty"`
	Hin   types.Hash `json:",omitempty"`
	// Finetune is a fine-tune result's work folder (node/ftwork).
	Finetune string `json:",omitempty"`
}

// NewProvider checks the configuration, loads the first model (its
// determinism class is the provider's) and installs the stream handler.
func NewProvider(cfg ProviderConfig) (*Provider, error) {
	if cfg.Chain == nil || cfg.Key == nil || cfg.Host == nil || cfg.Store == nil {
		return nil, errors.New("provider: chain, key, host and store are required")
	}
	if cfg.Strategy == nil {
		cfg.Strategy = DefaultStrategy()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	p := &Provider{
		cfg: cfg, log: cfg.Logger, addr: ethcrypto.PubkeyToAddress(cfg.Key.PublicKey),
		sender: node.NewSender(cfg.Chain, cfg.Key), access: cfg.Access,
		models: make(map[types.Hash]*llm.Model), bids: make(map[taskKey]*bidSecret),
		results: make(map[taskKey]*resultSecret), running: make(map[taskKey]bool), checked: make(map[taskKey]bool),
		pipes: make(map[taskKey]*pipeTask), evals: make(map[[2]types.Hash]*he.Evaluator),
		splits: make(map[taskKey]*splitState), splitRestarts: make(map[taskKey]splitRestart),
		dash: newDashboard(),
	}
	if p.access == nil {
		p.access = NewAccess(cfg.Chain)
	}
	if cfg.StateDir != "" {
		if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
			return nil, err
		}
		p.loadSecrets()
		p.loadLanes()
	}
	// The host serves blobs through this provider's rules, whatever it
	// was built with: they are the ones the provider binds its jobs to.
	cfg.Host.SetAuthorize(p.access.Authorize)
	serveStreams(cfg.Host, &p.feeds, p.access, p.holdsSlot, 10*time.Minute)
	cfg.Host.Host().SetStreamHandler(SessionProtocol, p.serveSession)
	// Split hand-offs are served from Serve on: they are bound to the
	// chain's id, which the node may not tell yet (startSplits).
	if cfg.Finetune {
		cfg.Host.Host().SetStreamHandler(CheckpointProtocol, p.serveCheckpoint)
	}
	if cfg.Pipeline {
		servePushes(cfg.Host, cfg.Chain, cfg.Store, p.access, func() string { return cfg.Host.ID().String() }, p.delivered)
	}
	if err := p.watchReachability(); err != nil {
		return nil, err
	}
	return p, nil
}

// Address is the provider's account.
func (p *Provider) Address() types.Address { return p.addr }

// Access is the provider's blob access control (installed on its host).
func (p *Provider) Access() *Access { return p.access }

// Close frees the loaded models.
func (p *Provider) Close() {
	p.stopReachability()
	if p.splitSrv != nil {
		p.splitSrv.Close()
	}
	// Session streams this agent serves are reset: their clients open
	// them again, to whatever serves the lanes next (a restarted agent on
	// the same host), instead of talking to a closed model.
	for _, l := range p.sessionLanes() {
		l.mu.Lock()
		s := l.stream
		l.mu.Unlock()
		if s != nil {
			_ = s.Reset()
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for h, m := range p.models {
		m.Close()
		delete(p.models, h)
	}
}

// SetAttributes replaces the attributes Prepare publishes (e.g. with a
// measured speed added).
func (p *Provider) SetAttributes(attrs []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg.Attributes = attrs
}

// Model returns the loaded model h, loading it from the store.
func (p *Provider) Model(h types.Hash) (*llm.Model, error) { return p.model(h) }

// model returns the loaded model h, loading it from the store.
func (p *Provider) model(h types.Hash) (*llm.Model, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m, ok := p.models[h]; ok {
		return m, nil
	}
	path, err := p.cfg.Store.Path(h)
	if err != nil {
		return nil, fmt.Errorf("model %x: %w", h, err)
	}
	m, err := llm.Load(path, p.cfg.LLM)
	if err != nil {
		return nil, err
	}
	p.models[h] = m
	if p.class == "" {
		p.class = m.Class(llm.Sampler{})
	}
	return m, nil
}

// Prepare fetches the wanted models, loads every model once (the first
// sets the determinism class) and returns the record the chain should
// hold for this provider.
func (p *Provider) Prepare(ctx context.Context) (*market.ProviderInfo, error) {
	for _, h := range p.cfg.Want {
		if p.cfg.Store.Has(h) {
			if !slices.Contains(p.cfg.Models, h) {
				p.cfg.Models = append(p.cfg.Models, h)
			}
			continue
		}
		p.log.Info("fetching model from peers", "model", fmt.Sprintf("%x", h[:8]))
		var progress func(done, total int64)
		if f := p.cfg.FetchProgress; f != nil {
			progress = func(done, total int64) { f(h, done, total) }
		}
		if _, err := p.cfg.Host.Fetch(ctx, h, p2p.FetchOptions{Progress: progress}); err != nil {
			return nil, fmt.Errorf("fetch model %x: %w", h, err)
		}
		p.cfg.Models = append(p.cfg.Models, h)
	}
	if len(p.cfg.Models) == 0 && len(p.cfg.Slices) == 0 && len(p.cfg.WantSlices) == 0 && !p.cfg.Pipeline {
		return nil, errors.New("provider: no model to serve (import a GGUF file with --model or a slice with --slice, or offer encrypted pipelines)")
	}
	for _, h := range p.cfg.WantSlices {
		if !p.cfg.Store.Has(h) {
			p.log.Info("fetching slice from peers", "slice", fmt.Sprintf("%x", h[:8]))
			var progress func(done, total int64)
			if f := p.cfg.FetchProgress; f != nil {
				progress = func(done, total int64) { f(h, done, total) }
			}
			if _, err := p.cfg.Host.Fetch(ctx, h, p2p.FetchOptions{Progress: progress}); err != nil {
				return nil, fmt.Errorf("fetch slice %x: %w", h, err)
			}
		}
		if !slices.Contains(p.cfg.Slices, h) {
			p.cfg.Slices = append(p.cfg.Slices, h)
		}
	}
	for _, h := range p.cfg.Slices {
		path, err := p.cfg.Store.Path(h)
		if err != nil {
			return nil, fmt.Errorf("slice %x: %w", h, err)
		}
		info, err := llm.Inspect(path)
		if err != nil {
			return nil, err
		}
		if info.Slice == nil {
			return nil, fmt.Errorf("%s is a whole model, not a slice: serve it with --model, or cut it with ogpu model split", path)
		}
		p.access.Public(h) // slices are public, like models
		if err := p.cfg.Host.Provide(ctx, h); err != nil {
			p.log.Warn("cannot announce slice in the DHT", "slice", fmt.Sprintf("%x", h[:8]), "err", err)
		}
	}
	if p.class == "" && len(p.cfg.Slices) > 0 {
		p.class = llm.CPUClass(p.cfg.LLM, llm.Sampler{})
	}
	for _, h := range p.cfg.Models {
		if _, err := p.model(h); err != nil {
			return nil, err
		}
		p.access.Public(h) // models are public: anyone may fetch them
		if err := p.cfg.Host.Provide(ctx, h); err != nil {
			p.log.Warn("cannot announce model in the DHT", "model", fmt.Sprintf("%x", h[:8]), "err", err)
		}
	}
	info := &market.ProviderInfo{
		PeerID:     p.cfg.Host.ID().String(),
		Addrs:      p.cfg.Host.Addrs(),
		Attributes: p.cfg.Attributes,
		Runtimes:   p.runtimes(),
		Models:     append(slices.Clone(p.cfg.Models), p.cfg.Slices...),
		Class:      p.class,
		Moniker:    p.cfg.Moniker,
	}
	if p.cfg.Finetune {
		info.TrainClass = train.BuildClass()
	}
	if len(info.Addrs) > market.MaxAddrs {
		info.Addrs = info.Addrs[:market.MaxAddrs]
	}
	return info, info.Validate()
}

// Register registers the provider on chain, or updates its record if it
// changed (a new peer id or address after a restart, new models), and
// tops up its bond to cfg.Bond, all in one transaction.
func (p *Provider) Register(ctx context.Context, info *market.ProviderInfo) error {
	var msgs []types.RawMsg
	pv, err := p.cfg.Chain.Provider(ctx, p.addr)
	var qe *node.QueryError
	switch {
	case errors.As(err, &qe):
		msgs = append(msgs, (&market.MsgRegisterProvider{Info: *info}).Raw())
	case err != nil:
		return err
	case pv.PeerID != info.PeerID || !slices.Equal(pv.Addrs, info.Addrs) || !slices.Equal(pv.Attributes, info.Attributes) ||
		!slices.Equal(pv.Models, info.Models) || pv.Class != info.Class || !slices.Equal(pv.Runtimes, info.Runtimes) || pv.Moniker != info.Moniker || pv.TrainClass != info.TrainClass:
		msgs = append(msgs, (&market.MsgUpdateProvider{Info: *info}).Raw())
	}
	if p.cfg.Bond != nil {
		st, err := p.cfg.Chain.Stake(ctx, p.addr)
		if err != nil {
			return err
		}
		if st.Bonded.Lt(p.cfg.Bond) {
			msgs = append(msgs, (&escrow.MsgBond{Amount: new(uint256.Int).Sub(p.cfg.Bond, st.Bonded)}).Raw())
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	if _, err := p.sender.Send(ctx, msgs...); err != nil {
		return err
	}
	p.log.Info("provider record and bond on chain", "address", p.addr.Hex(), "peer", info.PeerID)
	return nil
}

// Run prepares and registers the provider, then serves until ctx ends.
// Until its node has a committed block and answers, it waits for it
// (waitForChain, see Serve): it does not stop on a node that is down,
// catching up, or a fresh chain's before its first commit. It returns
// ctx's error once ctx ends; any other error is a real one (no model to
// serve, a registration the chain refused), also logged at error level
// (stoppedForGood).
func (p *Provider) Run(ctx context.Context) (err error) {
	defer func() {
		stoppedForGood(ctx, p.log, "provider", err, "it no longer bids, and a task it holds misses its deadline (a no-show is slashed); "+
			"fix the cause and start it again (ogpud provider run, or ogpud start --provider)")
	}()
	info, err := p.Prepare(ctx)
	if err != nil {
		return err
	}
	if err := p.registerWhenReady(ctx, info); err != nil {
		return fmt.Errorf("register provider: %w", err)
	}
	return p.Serve(ctx)
}

// registerWhenReady is Register once the node has a committed block and
// answers (waitForChain). An attempt whose transaction may have reached a
// mempool is safe to repeat: Register reads the record again, and the
// Sender sends the same transaction again (see node.Sender.Submit).
func (p *Provider) registerWhenReady(ctx context.Context, info *market.ProviderInfo) error {
	return waitForChain(ctx, p.log, "provider", "this provider's record and stake", func() error {
		if err := p.chainHasBlock(ctx); err != nil {
			return err
		}
		return p.Register(ctx, info)
	})
}

// chainHasBlock returns nil once the node has committed a block
// (errNoBlockYet before, or its failure to answer).
func (p *Provider) chainHasBlock(ctx context.Context) error {
	st, err := p.cfg.Chain.RPC.Status(ctx)
	if err != nil {
		return p.cfg.Chain.Unreachable(err)
	}
	if st.SyncInfo.LatestBlockHeight < 1 {
		return errNoBlockYet
	}
	return nil
}

// Serve follows the chain until ctx ends: it bids on jobs it can run,
// reveals its bids, runs the tasks it wins, commits and reveals their
// results, and serves the outputs. Until its node has a committed block
// and answers, it waits for it (waitForChain).
func (p *Provider) Serve(ctx context.Context) error {
	var status *ctypes.ResultStatus
	err := waitForChain(ctx, p.log, "provider", "the chain's latest block", func() (err error) {
		if status, err = p.cfg.Chain.RPC.Status(ctx); err != nil {
			return p.cfg.Chain.Unreachable(err)
		}
		if status.SyncInfo.LatestBlockHeight < 1 {
			return errNoBlockYet
		}
		return nil
	})
	if err != nil {
		return err
	}
	st, err := p.cfg.Chain.Stake(ctx, p.addr)
	if err == nil && st.Bonded.IsZero() {
		p.log.Warn("no stake bonded: the chain refuses bids until you bond (ogpu tx provider bond AMOUNT)")
	}
	if err := p.startSplits(status.NodeInfo.Network); err != nil {
		return err
	}
	p.height.Store(uint64(status.SyncInfo.LatestBlockHeight))
	p.readJail(ctx)
	p.pruneLanes(ctx)
	var blocks <-chan node.BlockEvents
	err = waitForChain(ctx, p.log, "provider", "the chain's blocks", func() (err error) {
		blocks, err = p.cfg.Chain.Subscribe(ctx, status.SyncInfo.LatestBlockHeight+1)
		return err
	})
	if err != nil {
		return err
	}
	p.log.Info("provider running", "address", p.addr.Hex(), "peer", p.cfg.Host.ID(), "class", p.class)
	every := p.cfg.AdvertEvery
	if every <= 0 {
		every = AdvertInterval
	}
	p.spawn(func() { p.advertise(ctx, every) })
	p.resume(ctx)
	for b := range blocks {
		p.onBlock(ctx, b)
	}
	p.work.Wait()
	return ctx.Err()
}

// startSplits serves split hand-offs, bound to chain id (the node's
// status says it), if this provider serves slices. It runs in Serve before
// the block loop, which is what reads splitSrv (cannotRunSplit, the stages
// it starts), once: a Serve run again keeps the server.
func (p *Provider) startSplits(id string) error {
	if p.splitSrv != nil || (len(p.cfg.Slices) == 0 && len(p.cfg.WantSlices) == 0) {
		return nil
	}
	if id == "" {
		return errors.New("provider: the node did not say its chain id, which binds split hand-offs")
	}
	srv, err := split.NewServer(p.cfg.Host.Host(), split.ServerConfig{ChainID: id, Authorize: p.authorizeSplit, Logger: p.log})
	if err != nil {
		return err
	}
	p.splitSrv = srv
	serveTranscripts(p.cfg.Host, p.cfg.Chain, p.splitTranscript)
	return nil
}

// resume picks up, after a restart from the same state dir, the work the
// chain still expects of this provider and whose event it missed while it
// was down: bids sealed before the restart whose job now takes reveals,
// and every slot awarded to it that still needs its work (resumeTasks).
// Without it a provider killed and restarted within the window forfeited
// its bid deposit or was slashed as a no-show (found by the e2e
// perturbation suite). The node may be down or still starting when the
// agent is back: every query is retried until the node answers or ctx
// ends (untilAnswered), for a task given up is a slash. Events of the
// blocks from the subscription on start the same work again only once
// (startTask, the bid's Revealed); blocks wait in the subscription while
// resume runs. Session lanes (loadLanes) and fine-tune tasks have their
// own restart handling and are not resumed here.
func (p *Provider) resume(ctx context.Context) {
	p.mu.Lock()
	var unrevealed []uint64
	for k, s := range p.bids {
		if !s.Revealed && !slices.Contains(unrevealed, k.Job) {
			unrevealed = append(unrevealed, k.Job)
		}
	}
	p.mu.Unlock()
	slices.Sort(unrevealed)
	for _, id := range unrevealed {
		var j *chain.JobView
		err := p.untilAnswered(ctx, "the job of a sealed bid", func() (err error) {
			j, err = p.cfg.Chain.Job(ctx, id)
			return err
		})
		if err == nil && j.State == market.JobRevealing {
			p.log.Info("revealing a bid sealed before the restart", "job", id)
			p.revealBids(ctx, id, j.RevealEnd)
		}
	}
	tasks, err := p.resumable(ctx)
	if err != nil {
		p.log.Warn("cannot list this provider's jobs to resume its tasks", "err", err)
		return
	}
	for _, t := range tasks {
		p.log.Info("resuming a task awarded before the restart", "job", t.Job, "stage", t.Stage, "status", t.status, "commit_deadline", t.commitDeadline)
		p.startTask(ctx, t.taskKey, t.commitDeadline)
	}
}

// resumeTask is a task resume starts.
type resumeTask struct {
	taskKey
	status         string
	commitDeadline uint64
}

// resumable lists the tasks this provider must resume (resumeTasks),
// asking the node until it answers or ctx ends.
func (p *Provider) resumable(ctx context.Context) ([]resumeTask, error) {
	var jobs []chain.JobView
	err := p.untilAnswered(ctx, "this provider's jobs", func() (err error) {
		jobs, err = p.cfg.Chain.Jobs(ctx, "/provider/"+p.addr.Hex())
		return err
	})
	if err != nil {
		return nil, err
	}
	// The height may have moved while the node was away: the commit
	// windows are judged at the node's height now.
	if st, err := p.cfg.Chain.RPC.Status(ctx); err == nil {
		p.height.Store(uint64(max(st.SyncInfo.LatestBlockHeight, 0)))
	}
	return resumeTasks(jobs, p.addr, p.height.Load()), nil
}

// resumeTasks returns the tasks of jobs that provider addr holds a live,
// uncommitted slot of and that still need its work at height h: executing
// ones whose commit window is open, and pipeline stages still waiting for
// their turn (a later stage the provider won is awarded with the job and
// opens only once the previous stage settles: the soak found one
// forgotten by a restarted provider and slashed as a no-show). Session and
// fine-tune jobs are left to their own restart handling.
func resumeTasks(jobs []chain.JobView, addr types.Address, h uint64) []resumeTask {
	var out []resumeTask
	for _, j := range jobs {
		if j.State != market.JobRunning || j.Kind == market.KindSession || j.Kind == market.KindFinetune {
			continue
		}
		for _, t := range j.Tasks {
			switch t.Status {
			case verifier.TaskExecuting.String():
				if h > t.CommitDeadline {
					continue
				}
			case verifier.TaskWaiting.String():
			default:
				continue
			}
			for _, s := range t.Slots {
				if s.Provider == addr && !s.Committed && !s.NoShow {
					out = append(out, resumeTask{taskKey{j.ID, t.Stage}, t.Status, t.CommitDeadline})
					break
				}
			}
		}
	}
	return out
}

// Resume retries: the first wait after a failure, and the longest.
const (
	resumeRetryMin = 250 * time.Millisecond
	resumeRetryMax = 10 * time.Second
)

// untilAnswered runs query until it succeeds, the app refuses it (a
// node.QueryError: asking again gets the same answer) or ctx ends,
// waiting between tries from resumeRetryMin, doubling up to
// resumeRetryMax: the node may be down or still starting. Each failure is
// logged with what was asked.
func (p *Provider) untilAnswered(ctx context.Context, what string, query func() error) error {
	wait := resumeRetryMin
	for try := 1; ; try++ {
		err := query()
		var qe *node.QueryError
		if err == nil || errors.As(err, &qe) || ctx.Err() != nil {
			return err
		}
		p.log.Warn("the node does not answer: asking again", "what", what, "try", try, "in", wait, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last: %v)", what, ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, resumeRetryMax)
	}
}

// AdvertInterval is how often a provider gossips its capability advert.
const AdvertInterval = 30 * time.Second

// advertise publishes the provider's signed capability advert on the
// adverts topic now and every interval until ctx ends.
func (p *Provider) advertise(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		p.mu.Lock()
		a := p2p.Advert{PeerID: p.cfg.Host.ID().String(), Addrs: p.cfg.Host.Addrs(), Provider: p.addr,
			Attributes: p.cfg.Attributes, Runtimes: p.runtimes(), Models: p.cfg.Models, Class: p.class, Time: time.Now().Unix()}
		p.mu.Unlock()
		if err := p.cfg.Host.PublishAdvert(ctx, a); err != nil && ctx.Err() == nil {
			p.log.Debug("cannot publish advert", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// runtimes lists the runtimes this provider offers.
func (p *Provider) runtimes() []string {
	var out []string
	if len(p.cfg.Models) > 0 || len(p.cfg.Slices) > 0 {
		out = append(out, Runtime)
	}
	if p.cfg.Pipeline {
		out = append(out, RuntimeCKKS)
	}
	if p.cfg.Finetune {
		out = append(out, RuntimeTrain)
	}
	return out
}

// spawn runs f in a goroutine that Serve waits for.
func (p *Provider) spawn(f func()) {
	p.work.Add(1)
	go func() {
		defer p.work.Done()
		f()
	}()
}

func (p *Provider) onBlock(ctx context.Context, b node.BlockEvents) {
	p.height.Store(uint64(b.Height))
	for _, ev := range b.Events {
		p.onEvent(ctx, b.Height, ev)
	}
	p.redeemSessions(ctx, uint64(b.Height))
	p.unjailIfDue(ctx, uint64(b.Height))
	p.revealDue(ctx, uint64(b.Height))
	// Reveal results whose commit window has closed.
	p.mu.Lock()
	var due []taskKey
	for k, r := range p.results {
		if !r.Revealed && r.Result != (types.Hash{}) && uint64(b.Height) > r.CommitDeadline {
			due = append(due, k)
		}
	}
	p.mu.Unlock()
	// Each reveal waits for its block apart: a Send that waits long (a
	// node that lost the transaction, a gap in the nonces) must not hold
	// the block loop, or the provider stops bidding and serving (the
	// soak's job 87: a no-show slash).
	for _, k := range due {
		p.spawn(func() { p.revealResult(ctx, k) })
	}
}

func (p *Provider) onEvent(ctx context.Context, height int64, ev abci.Event) {
	switch ev.Type {
	case market.EventJobPosted{}.EventType():
		var e market.EventJobPosted
		if types.DecodeEvent(ev, &e) == nil {
			p.spawn(func() { p.considerJob(ctx, e.Job, height) })
		}
	case market.EventJobRebid{}.EventType():
		// A short job takes bids for one more window (market short.go):
		// a provider that did not bid may now (one that did is refused
		// as a duplicate, harmlessly).
		var e market.EventJobRebid
		if types.DecodeEvent(ev, &e) == nil {
			p.spawn(func() { p.considerJob(ctx, e.Job, height) })
		}
	case market.EventJobRevealing{}.EventType():
		var e market.EventJobRevealing
		if types.DecodeEvent(ev, &e) == nil {
			p.revealBids(ctx, e.Job, e.RevealEnd)
		}
	case market.EventJobAwarded{}.EventType():
		var e market.EventJobAwarded
		if types.DecodeEvent(ev, &e) == nil && slices.Contains(e.Providers, p.addr.Hex()) {
			p.startTask(ctx, taskKey{e.Job, e.Stage}, e.CommitDeadline)
		}
	case market.EventProviderJailed{}.EventType():
		var e market.EventProviderJailed
		if types.DecodeEvent(ev, &e) == nil && e.Provider == p.addr {
			p.jailed(e.Until, e.Tombstoned, e.Reason)
		}
	case market.EventProviderUnjailed{}.EventType():
		var e market.EventProviderUnjailed
		if types.DecodeEvent(ev, &e) == nil && e.Provider == p.addr {
			p.unjailed(uint64(height))
		}
	case market.EventStageOpened{}.EventType():
		var e market.EventStageOpened
		if types.DecodeEvent(ev, &e) == nil {
			p.stageOpened(e)
		}
	case market.EventSlotReassigned{}.EventType():
		var e market.EventSlotReassigned
		if types.DecodeEvent(ev, &e) != nil {
			return
		}
		if e.To == p.addr {
			p.startTask(ctx, taskKey{e.Job, e.Stage}, e.CommitDeadline)
		}
		// Reveals now open at the replacement's commit deadline.
		p.mu.Lock()
		if r, ok := p.results[taskKey{e.Job, e.Stage}]; ok {
			r.CommitDeadline = max(r.CommitDeadline, e.CommitDeadline)
		}
		p.mu.Unlock()
	case market.EventInputCheckOpened{}.EventType():
		var e market.EventInputCheckOpened
		if types.DecodeEvent(ev, &e) == nil {
			p.inputCheckOpened(e)
		}
	case market.EventInputAvailable{}.EventType():
		var e market.EventInputAvailable
		if types.DecodeEvent(ev, &e) == nil {
			p.spawn(func() { p.inputAvailable(ctx, e) })
		}
	case market.EventSplitStageReplaced{}.EventType():
		var e market.EventSplitStageReplaced
		if types.DecodeEvent(ev, &e) == nil {
			p.stageReplaced(ctx, e)
		}
	case market.EventSplitInputsPending{}.EventType():
		var e market.EventSplitInputsPending
		if types.DecodeEvent(ev, &e) == nil {
			p.spawn(func() { p.proveInputs(ctx, e) })
		}
	case finetune.EventGameOpened{}.EventType():
		var e finetune.EventGameOpened
		if types.DecodeEvent(ev, &e) == nil {
			p.spawn(func() { p.answerGame(ctx, taskKey{e.Job, e.Stage}, e.Match) })
		}
	case finetune.EventGameNarrowed{}.EventType():
		var e finetune.EventGameNarrowed
		if types.DecodeEvent(ev, &e) == nil {
			p.spawn(func() { p.answerGame(ctx, taskKey{e.Job, e.Stage}, e.Match) })
		}
	case market.EventJobCompleted{}.EventType():
		var e market.EventJobCompleted
		if types.DecodeEvent(ev, &e) == nil {
			p.closeJob(e.Job)
		}
	case session.EventClosed{}.EventType():
		var e session.EventClosed
		if types.DecodeEvent(ev, &e) == nil {
			p.sessionClosed(e.Session, uint64(height), e.Refund)
		}
	case session.EventSettled{}.EventType():
		var e session.EventSettled
		if types.DecodeEvent(ev, &e) == nil {
			p.dropLane(e.Session)
		}
	case market.EventJobExpired{}.EventType():
		var e market.EventJobExpired
		if types.DecodeEvent(ev, &e) == nil {
			p.closeJob(e.Job)
		}
	case market.EventResultCommitted{}.EventType():
		var e market.EventResultCommitted
		if types.DecodeEvent(ev, &e) == nil && e.RevealsOpen {
			k := taskKey{e.Job, e.Stage}
			p.mu.Lock()
			_, ours := p.results[k]
			p.mu.Unlock()
			if ours {
				p.spawn(func() { p.revealResult(ctx, k) })
			}
		}
	}
}

// closeJob forgets what the provider holds in memory for a closed job:
// its token stream, its bid and result secrets, its access rules (they
// stay on disk with OpenAccess: the client may still fetch the output).
func (p *Provider) closeJob(job uint64) {
	p.feeds.drop(job)
	p.access.Forget(job)
	p.mu.Lock()
	n := len(p.bids) + len(p.results)
	for k := range p.bids {
		if k.Job == job {
			delete(p.bids, k)
		}
	}
	for k := range p.results {
		if k.Job == job {
			delete(p.results, k)
		}
	}
	for k := range p.running {
		if k.Job == job {
			delete(p.running, k)
		}
	}
	for k := range p.checked {
		if k.Job == job {
			delete(p.checked, k)
		}
	}
	for k := range p.splits {
		if k.Job == job {
			delete(p.splits, k)
		}
	}
	changed := n != len(p.bids)+len(p.results)
	p.mu.Unlock()
	if changed {
		p.saveSecrets()
	}
}

// holdsSlot returns nil if this provider holds a live slot of job.
func (p *Provider) holdsSlot(ctx context.Context, job uint64) error {
	j, err := p.cfg.Chain.Job(ctx, job)
	if err != nil {
		return fmt.Errorf("job %d: %w", job, err)
	}
	for _, t := range j.Tasks {
		for _, s := range t.Slots {
			if s.Provider == p.addr && !s.NoShow {
				return nil
			}
		}
	}
	return fmt.Errorf("this provider holds no slot of job %d: it has no token stream of it", job)
}

// considerJob bids on job if this provider can run it at a price within
// the cap, or claims its tasks at once if it is a pool job whose fixed
// reward is at least the provider's price (the r-th claim awards a task:
// claiming early is how a provider wins it); every reason not to bid is
// logged.
func (p *Provider) considerJob(ctx context.Context, id uint64, height int64) {
	j, err := p.cfg.Chain.Job(ctx, id)
	if err != nil {
		p.log.Warn("cannot read posted job", "job", id, "err", err)
		p.decided(id, 0, nil, "cannot read the job: "+err.Error())
		return
	}
	if why := p.jailedWhy(); why != "" {
		p.log.Info("not bidding", "job", id, "reason", why)
		p.decided(id, 0, nil, why)
		return
	}
	if why := p.cannotRun(j); why != "" {
		p.log.Info("not bidding", "job", id, "reason", why)
		p.decided(id, 0, nil, why)
		return
	}
	view := pricing.NewJobView(j.Job, height, pricing.Provider{Address: p.addr.Hex(), Attributes: p.cfg.Attributes})
	strategy := p.strategy() // every stage of the job at one price
	var seals []taskKey
	for stage := uint16(0); stage < j.Stages; stage++ {
		if j.Kind == market.KindSplit && (int(stage) >= len(j.Slices) || !p.holdsSlice(j.Slices[stage])) {
			continue
		}
		view.Stage = stage
		price, err := strategy.Price(ctx, view)
		if err != nil {
			p.log.Info("not bidding", "job", id, "stage", stage, "reason", err)
			p.decided(id, stage, nil, err.Error())
			continue
		}
		if price.IsZero() || price.Gt(j.MaxPrice) {
			what := "cap"
			if j.Mode == market.ModePool {
				what = "pool's fixed reward"
			}
			why := fmt.Sprintf("price %s is not within (0, %s], the %s", types.FormatAmount(price), types.FormatAmount(j.MaxPrice), what)
			p.log.Info("not bidding", "job", id, "stage", stage, "reason", why)
			p.decided(id, stage, nil, why)
			continue
		}
		if j.Mode == market.ModePool {
			p.claimTask(ctx, taskKey{id, stage}, price, j.MaxPrice)
			continue
		}
		k := taskKey{id, stage}
		s := &bidSecret{Price: price, Salt: randomHash(), BidEnd: j.BidEnd, RevealEnd: j.RevealEnd}
		p.mu.Lock()
		p.bids[k] = s
		p.mu.Unlock()
		seals = append(seals, k)
	}
	if len(seals) > 0 {
		p.saveSecrets()
		p.sealBids(ctx, seals)
	}
}

// sealBids sends the sealed bids ks (their secrets already kept), all of
// them before any is included, and awaits their inclusions side by side.
// Sealed one after another's inclusion, a 3-stage job's last seal went
// out two blocks into its 4-block bid window and missed it on every
// provider (the soak's job 221 expired with no bid on its third stage).
func (p *Provider) sealBids(ctx context.Context, ks []taskKey) {
	var wg sync.WaitGroup
	for _, k := range ks {
		p.mu.Lock()
		s := p.bids[k]
		p.mu.Unlock()
		if s == nil {
			continue
		}
		msg := &market.MsgCommitBid{Job: k.Job, Stage: k.Stage, Commitment: market.BidCommitment(k.Job, k.Stage, s.Price, s.Salt, p.addr)}
		pending, err := p.sender.Post(ctx, msg.Raw())
		if err != nil {
			p.sealFailed(k, s.Price, err)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := pending.Wait(ctx); err != nil {
				p.sealFailed(k, s.Price, err)
				return
			}
			p.log.Info("sealed bid", "job", k.Job, "stage", k.Stage, "price", types.FormatAmount(s.Price))
			p.decided(k.Job, k.Stage, s.Price, "sealed bid")
		}()
	}
	wg.Wait()
}

// sealFailed handles the failure err of bid k's seal: a refused seal's
// secret is dropped; one whose inclusion is unknown (the agent stopping
// while it waited, the node unreachable) keeps it for the reveal, as the
// commitment may be on chain (a stale salt for a bid never made costs
// nothing; dropping a made one forfeits its deposit).
func (p *Provider) sealFailed(k taskKey, price *uint256.Int, err error) {
	var refused *node.TxError
	if !errors.As(err, &refused) {
		p.log.Warn("bid sent, its inclusion unknown", "job", k.Job, "stage", k.Stage, "err", err)
		return
	}
	p.log.Warn("bid refused", "job", k.Job, "stage", k.Stage, "err", err)
	p.decided(k.Job, k.Stage, nil, fmt.Sprintf("a sealed bid at %s was refused: %v", types.FormatAmount(price), err))
	p.mu.Lock()
	delete(p.bids, k)
	p.mu.Unlock()
	p.saveSecrets()
}

// claimTask claims pool task k at its fixed reward (worth at least this
// provider's price). Nothing is kept: the award (EventJobAwarded, in the
// transaction of the task's r-th claim, or at the close) starts the task
// like an auction's. A claim that comes too late (the task or job already
// awarded, the window over, the book full) is the pool's normal outcome.
func (p *Provider) claimTask(ctx context.Context, k taskKey, price, reward *uint256.Int) {
	msg := &market.MsgClaimTask{Job: k.Job, Stage: k.Stage}
	res, err := p.sender.Send(ctx, msg.Raw())
	if err != nil {
		var te *node.TxError
		if errors.As(err, &te) && te.Code == types.ErrWrongPhase.Code {
			p.log.Info("pool task taken by others", "job", k.Job, "stage", k.Stage, "reason", te.Log)
			p.decided(k.Job, k.Stage, nil, "pool task taken by others: "+te.Log)
			return
		}
		p.log.Warn("claim refused", "job", k.Job, "stage", k.Stage, "err", err)
		p.decided(k.Job, k.Stage, nil, "pool claim refused: "+err.Error())
		return
	}
	p.decided(k.Job, k.Stage, reward, fmt.Sprintf("pool claim at the fixed reward (our price %s)", types.FormatAmount(price)))
	var filled market.EventTaskFilled
	if node.FindEvent(res, &filled) == nil {
		p.log.Info("claimed pool task: its last claim, awarded", "job", k.Job, "stage", k.Stage, "reward", types.FormatAmount(reward),
			"price", types.FormatAmount(price), "height", res.Height, "providers", filled.Providers)
		return
	}
	p.log.Info("claimed pool task", "job", k.Job, "stage", k.Stage, "reward", types.FormatAmount(reward), "price", types.FormatAmount(price), "height", res.Height)
}

// cannotRun says why this provider cannot run j, or "".
func (p *Provider) cannotRun(j *chain.JobView) string {
	p.mu.Lock()
	class := p.class
	m, haveModel := p.models[j.Model]
	p.mu.Unlock()
	if j.Kind == market.KindSession {
		return p.cannotServeSession(j)
	}
	if j.Kind == market.KindFinetune {
		return p.cannotFinetune(j)
	}
	if j.Kind == market.KindSplit {
		if why := p.cannotRunSplit(j); why != "" {
			return why
		}
		if r := market.MatchAll(j.Req.Attributes, p.cfg.Attributes); r != "" {
			return "requirement " + r + " is not met"
		}
		if j.Req.Class != "" && j.Req.Class != class {
			return "determinism class " + j.Req.Class + " is not this provider's"
		}
		return ""
	}
	pipeline := j.Kind == market.KindPipeline
	runtime := Runtime
	if pipeline {
		runtime = RuntimeCKKS
	}
	switch {
	case j.Kind != market.KindInference && !pipeline:
		return "only " + market.KindInference + " and " + market.KindPipeline + " jobs run here"
	case pipeline && !p.cfg.Pipeline:
		return "encrypted pipelines are not offered here (--pipeline)"
	case j.Mode != market.ModeAuction && j.Mode != market.ModePool:
		return "mode " + j.Mode + " is not known here"
	case j.Req.Runtime != "" && j.Req.Runtime != runtime:
		return "runtime " + j.Req.Runtime + " is not offered"
	case j.Req.Class != "" && j.Req.Class != class:
		return "determinism class " + j.Req.Class + " is not this provider's"
	case pipeline && j.ModelSize > maxPipelineModel:
		return fmt.Sprintf("the model is %d bytes, at most %d are accepted", j.ModelSize, maxPipelineModel)
	case !pipeline && !haveModel:
		return fmt.Sprintf("model %x is not served here", j.Model)
	case !pipeline && j.MaxTokens == 0:
		return "the job sets no token budget"
	case !pipeline:
		if why := contextFit(j.PromptTokens, j.MaxTokens, m.Options().ContextSize); why != "" {
			return why
		}
	}
	if r := market.MatchAll(j.Req.Attributes, p.cfg.Attributes); r != "" {
		return "requirement " + r + " is not met"
	}
	return ""
}

// revealBids reveals this provider's sealed bids on job, each until a
// block includes it or the reveal window (ending at block revealEnd) is
// over: a reveal sent while the node cannot be reached is sent again, and
// one the node took and then lost (killed before a block included it) is
// handed to it again (node.Pending.Wait). An unrevealed bid is forfeited,
// and with every winner's reveal lost the job expires (the soak's job
// 205: the providers' node was killed inside a 3-block reveal window).
// Every reveal is sent first; their inclusions are awaited side by side.
func (p *Provider) revealBids(ctx context.Context, job, revealEnd uint64) {
	p.mu.Lock()
	var todo []taskKey
	for k, s := range p.bids {
		if k.Job == job && !s.Revealed && !s.revealing {
			s.revealing = true
			todo = append(todo, k)
		}
	}
	p.mu.Unlock()
	if len(todo) == 0 {
		return
	}
	p.spawn(func() {
		rctx, cancel := untilHeight(ctx, p.cfg.Chain, revealEnd+1)
		defer cancel()
		var wg sync.WaitGroup
		for _, k := range todo {
			pending := p.postReveal(rctx, k)
			if pending == nil {
				p.revealDone(k)
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.awaitReveal(rctx, k, pending)
			}()
		}
		wg.Wait()
	})
}

// revealDue reveals the bids whose job's bid window ended with block h:
// the chain takes reveals from block BidEnd+1 on, and a reveal sent once
// BidEnd is committed can be in that block. Waiting for the
// job_revealing event (emitted in block BidEnd+1) left the reveals two
// of a 3-block window (the soak's job 93: both bidders' reveals missed
// them). The event still starts any reveal not started here.
func (p *Provider) revealDue(ctx context.Context, h uint64) {
	p.mu.Lock()
	due := dueReveals(p.bids, h)
	p.mu.Unlock()
	for _, d := range due {
		p.revealBids(ctx, d.job, d.revealEnd)
	}
}

type dueReveal struct{ job, revealEnd uint64 }

// dueReveals lists, by job, the bids to reveal once block h is committed:
// not revealed nor being revealed, their job's bid window over (BidEnd <=
// h) and its reveal window still open after h.
func dueReveals(bids map[taskKey]*bidSecret, h uint64) []dueReveal {
	var out []dueReveal
	for k, s := range bids {
		if s.Revealed || s.revealing || s.BidEnd == 0 || h < s.BidEnd || h >= s.RevealEnd {
			continue
		}
		i := slices.IndexFunc(out, func(d dueReveal) bool { return d.job == k.Job })
		if i < 0 {
			out = append(out, dueReveal{k.Job, s.RevealEnd})
		} else {
			out[i].revealEnd = max(out[i].revealEnd, s.RevealEnd)
		}
	}
	slices.SortFunc(out, func(a, b dueReveal) int { return cmp.Compare(a.job, b.job) })
	return out
}

// postReveal sends the reveal of bid k, again while the node cannot be
// reached, and marks the bid revealed; nil if the bid is gone (its job
// ended) or the chain refused the reveal.
func (p *Provider) postReveal(ctx context.Context, k taskKey) *node.Pending {
	p.mu.Lock()
	s := p.bids[k]
	var msg *market.MsgRevealBid
	if s != nil {
		msg = &market.MsgRevealBid{Job: k.Job, Stage: k.Stage, Price: s.Price, Salt: s.Salt}
	}
	p.mu.Unlock()
	if msg == nil {
		return nil
	}
	var pending *node.Pending
	err := p.untilChain(ctx, k, "reveal the bid", func() (err error) {
		pending, err = p.sender.Post(ctx, msg.Raw())
		return err
	})
	if err != nil {
		p.log.Warn("bid reveal refused", "job", k.Job, "stage", k.Stage, "err", err)
		return nil
	}
	p.setRevealed(k, true)
	p.log.Info("revealed bid", "job", k.Job, "stage", k.Stage, "price", types.FormatAmount(msg.Price))
	return pending
}

// awaitReveal waits for a block to include the reveal of bid k (pending)
// until ctx ends; a reveal whose nonce another transaction took is signed
// and sent again.
func (p *Provider) awaitReveal(ctx context.Context, k taskKey, pending *node.Pending) {
	defer p.revealDone(k)
	for pending != nil {
		_, err := pending.Wait(ctx)
		if err == nil {
			return
		}
		var te *node.TxError
		if !errors.As(err, &te) || te.Code != types.ErrNonceUsed.Code || ctx.Err() != nil {
			p.log.Warn("no block included the bid reveal before the reveal window ended", "job", k.Job, "stage", k.Stage, "err", err)
			return
		}
		p.setRevealed(k, false) // its nonce went to another transaction
		pending = p.postReveal(ctx, k)
	}
}

// setRevealed records whether bid k's reveal is sent (a restarted agent
// reveals the bids not marked), if the bid is still kept.
func (p *Provider) setRevealed(k taskKey, revealed bool) {
	p.mu.Lock()
	s := p.bids[k]
	if s != nil {
		s.Revealed = revealed
	}
	p.mu.Unlock()
	if s != nil {
		p.saveSecrets()
	}
}

// revealDone ends the reveal under way of bid k, if the bid is still kept.
func (p *Provider) revealDone(k taskKey) {
	p.mu.Lock()
	if s := p.bids[k]; s != nil {
		s.revealing = false
	}
	p.mu.Unlock()
}

func (p *Provider) startTask(ctx context.Context, k taskKey, commitDeadline uint64) {
	p.mu.Lock()
	if p.running[k] {
		p.mu.Unlock()
		return
	}
	p.running[k] = true
	p.mu.Unlock()
	p.spawn(func() {
		if err := p.runTask(ctx, k, commitDeadline); errors.Is(err, errTaskClosed) {
			p.log.Info("task closed before this provider committed", "job", k.Job, "stage", k.Stage, "reason", err)
		} else if errors.Is(err, errInputReported) {
			p.log.Info("waiting for the validators' input check", "job", k.Job, "stage", k.Stage, "report", err)
		} else if err != nil {
			p.log.Error("task failed", "job", k.Job, "stage", k.Stage, "err", err)
			p.feeds.get(k.Job).push(streamMsg{Error: err.Error()})
		}
	})
}

// runTask fetches the prompt from the client, generates, stores the
// output and commits its hash.
func (p *Provider) runTask(ctx context.Context, k taskKey, commitDeadline uint64) error {
	var j *chain.JobView
	err := p.untilChain(ctx, k, "read the job", func() (err error) {
		j, err = p.cfg.Chain.Job(ctx, k.Job)
		return err
	})
	if err != nil {
		return err
	}
	if j.Kind == market.KindSession {
		return p.openSessionLane(ctx, j)
	}
	if j.Kind == market.KindPipeline {
		return p.runPipelineTask(ctx, k, j, commitDeadline)
	}
	if j.Kind == market.KindSplit {
		return p.runSplitTask(ctx, k, j, commitDeadline)
	}
	if j.Kind == market.KindFinetune {
		return p.runFinetuneTask(ctx, k, j, commitDeadline)
	}
	p.log.Info("won the auction: running", "job", k.Job, "stage", k.Stage)
	f := p.feeds.get(k.Job) // the client may ask for the stream already
	t0 := time.Now()
	checked := p.isChecked(k)
	in, err := p.fetchInput(ctx, j, reportBy(commitDeadline, j.Windows.Execute, checked))
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case checked:
			return err
		case errors.Is(err, errInputInvalid):
			return p.reportInput(ctx, k, verifier.InputInvalid, err)
		}
		return p.reportInput(ctx, k, verifier.InputUnavailable, err)
	}
	p.log.Info("fetched the prompt", "job", k.Job, "took", time.Since(t0).Round(time.Millisecond))
	m, err := p.model(j.Model)
	if err != nil {
		return err
	}
	if why := promptFits(m, j, in.Prompt); why != nil && !checked {
		return p.reportInput(ctx, k, verifier.InputTooLong, why)
	}
	t1 := time.Now()
	out, err := m.Generate(ctx, llm.Request{Prompt: in.Prompt, MaxTokens: int(j.MaxTokens)}, func(tok int, piece string) error {
		t := tok
		f.push(streamMsg{Token: &t, Piece: piece})
		return nil
	})
	if err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	took := time.Since(t1)
	p.log.Info("generated", "job", k.Job, "tokens", len(out.Tokens), "took", took.Round(time.Microsecond),
		"tokens_per_second", int(float64(len(out.Tokens))/took.Seconds()))
	p.dash.speeds.push(SpeedSample{Time: time.Now(), Tokens: len(out.Tokens), Took: took})
	if p.cfg.OnGenerated != nil {
		p.cfg.OnGenerated(len(out.Tokens), took)
	}
	res := &LLMOutput{Version: LLMOutputVersion, Input: j.Input, Tokens: out.Tokens, Text: out.Text}
	if p.cfg.Lie && len(res.Tokens) > 0 {
		i := len(res.Tokens) / 2
		res.Tokens[i] = (res.Tokens[i] + 1) % m.NumVocab()
		res.Text = m.Detokenize(withoutEOG(m, res.Tokens))
		p.log.Warn("lying: changed one token of the output", "job", k.Job, "index", i)
	}
	bz := res.Encode()
	h, err := p.cfg.Store.Put(bz)
	if err != nil {
		return err
	}
	// Served to the client, and to validators if the task is disputed;
	// never announced: the output is the client's.
	// Computed from a prompt this job's client holds (bound to it, or
	// proven by fetchInput): its client may fetch it even if another
	// client's job produced the same output.
	if err := p.access.BindShared(h, Grant{Job: j.ID, Client: j.Client, Kind: GrantOutput, Stage: k.Stage}); err != nil {
		p.log.Warn("the output is served to nobody", "job", k.Job, "err", err)
	}
	if err := p.commitResult(ctx, k, h, commitDeadline); err != nil {
		return err
	}
	f.push(streamMsg{Done: true, Result: &h})
	p.log.Info("committed result", "job", k.Job, "stage", k.Stage, "tokens", len(res.Tokens), "result", fmt.Sprintf("%x", h[:8]))
	return nil
}

// commitResult saves a fresh salt for result h of task k (so that a
// restart can still reveal) and commits hash(h, salt, provider). A task
// that no longer takes results (decided without this provider, its window
// passed) is errTaskClosed, and nothing is left to reveal.
func (p *Provider) commitResult(ctx context.Context, k taskKey, h types.Hash, commitDeadline uint64) error {
	secret := &resultSecret{Result: h, Salt: randomHash(), CommitDeadline: commitDeadline}
	return p.commitSecret(ctx, k, secret, verifier.ResultCommitment(h, secret.Salt, p.addr))
}

// commitSecret saves secret for task k and commits commitment, sending it
// again while the node cannot be reached (sendTask). A task that no
// longer takes results is errTaskClosed, and the secret is dropped.
func (p *Provider) commitSecret(ctx context.Context, k taskKey, secret *resultSecret, commitment types.Hash) error {
	p.mu.Lock()
	p.results[k] = secret
	p.mu.Unlock()
	p.saveSecrets()
	msg := &verifier.MsgCommitResult{Job: k.Job, Stage: k.Stage, Commitment: commitment}
	if err := p.sendTask(ctx, k, "commit result", msg.Raw()); err != nil {
		var te *node.TxError
		if errors.As(err, &te) && te.Code == types.ErrWrongPhase.Code {
			p.mu.Lock()
			delete(p.results, k)
			p.mu.Unlock()
			p.saveSecrets()
			return fmt.Errorf("%w: commit refused: %v", errTaskClosed, err)
		}
		return fmt.Errorf("commit result: %w", err)
	}
	return nil
}

func withoutEOG(m *llm.Model, toks []int) []int {
	if n := len(toks); n > 0 && m.IsEOG(toks[n-1]) {
		return toks[:n-1]
	}
	return toks
}

// fetchInput gets the job's prompt from its client, who dials the winners
// once the award names them (or from whoever holds it: after an input
// check, the validators); it gives up once the chain has committed height
// by. A blob that is not a prompt is errInputInvalid.
func (p *Provider) fetchInput(ctx context.Context, j *chain.JobView, by uint64) (*LLMInput, error) {
	fctx, cancel := untilHeight(ctx, p.cfg.Chain, by)
	defer cancel()
	if err := p.access.BindInput(j.Input, j); errors.Is(err, ErrOtherOwner) {
		// This provider holds the prompt for another client's job: the
		// hash is public on chain, the bytes are not. This job's client
		// must prove it holds them before anything is generated from the
		// local copy and streamed to it.
		if err := p.proveClientHolds(fctx, j); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("the prompt of job %d is held here for another client's job, and job %d's client did not serve it by height %d: %w", j.ID, j.ID, by, err)
		}
		if err := p.access.BindShared(j.Input, Grant{Job: j.ID, Client: j.Client, Kind: GrantInput}); err != nil {
			p.log.Warn("the prompt is not served to the job's other parties", "job", j.ID, "err", err)
		}
	} else if err != nil {
		p.log.Warn("the prompt is not served to the job's other parties", "job", j.ID, "err", err)
	}
	if err := fetchFromPartiesMax(fctx, p.cfg.Host, p.cfg.Chain, p.cfg.Store, j, j.Input, maxLLMInputBlob); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("the prompt of job %d, by height %d: %w", j.ID, by, err)
	}
	bz, err := p.cfg.Store.Get(j.Input)
	if err != nil {
		return nil, err
	}
	in, err := DecodeLLMInput(bz)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errInputInvalid, err)
	}
	return in, nil
}

// proveClientHolds waits until job j's client, connected to this host,
// serves the job's input in full (p2p.Host.ProveHeld), or ctx ends.
func (p *Provider) proveClientHolds(ctx context.Context, j *chain.JobView) error {
	var last error
	for {
		if peers := peersOf(p.cfg.Host, j.Client); len(peers) > 0 {
			fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			last = p.cfg.Host.ProveHeld(fctx, j.Input, p2p.FetchOptions{Peers: peers, MaxSize: maxLLMInputBlob})
			cancel()
			if last == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = fmt.Errorf("the client %s did not connect", j.Client.Hex())
			}
			return errors.Join(last, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (p *Provider) revealResult(ctx context.Context, k taskKey) {
	p.mu.Lock()
	r, ok := p.results[k]
	if !ok || r.Revealed {
		p.mu.Unlock()
		return
	}
	r.Revealed = true // one attempt at a time; reset on failure
	p.mu.Unlock()
	msg := (&verifier.MsgRevealResult{Job: k.Job, Stage: k.Stage, Result: r.Result, Salt: r.Salt}).Raw()
	if r.Split {
		msg = revealSplitMsg(k, r)
	}
	if r.Finetune != "" {
		m, err := revealFinetuneMsg(k, r)
		if err != nil {
			p.log.Error("cannot reveal", "job", k.Job, "stage", k.Stage, "err", err)
			return
		}
		msg = m
	}
	if _, err := p.sender.Send(ctx, msg); err != nil {
		var te *node.TxError
		if errors.As(err, &te) && te.Code == types.ErrDuplicate.Code {
			return // revealed already (a retry after a lost answer)
		}
		if errors.As(err, &te) && te.Code == types.ErrWrongPhase.Code {
			// Not open yet (a no-show's slot was reassigned and the
			// window moved): take the deadline from the chain.
			if j, qerr := p.cfg.Chain.Job(ctx, k.Job); qerr == nil && int(k.Stage) < len(j.Tasks) {
				switch j.Tasks[k.Stage].Status {
				case "executing":
					p.mu.Lock()
					r.CommitDeadline, r.Revealed = j.Tasks[k.Stage].CommitDeadline, false
					p.mu.Unlock()
					return
				case "input_check":
					// A co-provider reported the input: reveals wait for
					// the validators (the task reopens or settles).
					p.mu.Lock()
					r.CommitDeadline, r.Revealed = max(r.CommitDeadline, j.Tasks[k.Stage].DisputeDeadline), false
					p.mu.Unlock()
					return
				case "settled", "disputed", "game":
					// Too late: the task was decided without this reveal
					// (it stays Revealed: nothing more to try).
					p.log.Info("the task was decided before this reveal", "job", k.Job, "stage", k.Stage)
					return
				}
			}
		}
		if chainUnreachable(ctx, err) {
			// Not a refusal: the node is down or catching up. Try
			// again on a later block; this is no failure of the reveal.
			p.log.Warn("cannot reach the node to reveal; trying again", "job", k.Job, "stage", k.Stage, "err", err)
			p.mu.Lock()
			r.Revealed = false
			p.mu.Unlock()
			return
		}
		p.log.Warn("result reveal refused", "job", k.Job, "stage", k.Stage, "err", err)
		p.mu.Lock()
		r.Failures++
		r.Revealed = r.Failures >= 5
		p.mu.Unlock()
		return
	}
	p.saveSecrets()
	p.log.Info("revealed result", "job", k.Job, "stage", k.Stage)
}

// secrets is the persisted form of the bid and result salts.
type secrets struct {
	Bids    map[string]*bidSecret    `json:"bids"`
	Results map[string]*resultSecret `json:"results"`
}

func (k taskKey) String() string { return fmt.Sprintf("%d/%d", k.Job, k.Stage) }

func parseTaskKey(s string) (taskKey, bool) {
	var k taskKey
	_, err := fmt.Sscanf(s, "%d/%d", &k.Job, &k.Stage)
	return k, err == nil
}

func (p *Provider) secretsFile() string { return filepath.Join(p.cfg.StateDir, "secrets.json") }

func (p *Provider) saveSecrets() {
	if p.cfg.StateDir == "" {
		return
	}
	p.saveMu.Lock()
	defer p.saveMu.Unlock()
	p.mu.Lock()
	s := secrets{Bids: map[string]*bidSecret{}, Results: map[string]*resultSecret{}}
	for k, v := range p.bids {
		c := *v
		s.Bids[k.String()] = &c
	}
	for k, v := range p.results {
		c := *v
		s.Results[k.String()] = &c
	}
	p.mu.Unlock()
	bz, _ := json.MarshalIndent(s, "", "  ")
	// A unique temporary file, synced, renamed, the folder synced: a
	// crash leaves the old secrets or the new, never a torn file.
	if err := atomicfile.Write(p.secretsFile(), bz, 0o600); err != nil {
		p.log.Error("cannot save bid secrets", "file", p.secretsFile(), "err", err)
	}
}

func (p *Provider) loadSecrets() {
	bz, err := os.ReadFile(p.secretsFile())
	if err != nil {
		return
	}
	var s secrets
	if err := json.Unmarshal(bz, &s); err != nil {
		p.log.Error("bid secrets file is corrupt; starting without it", "file", p.secretsFile(), "err", err)
		return
	}
	for ks, v := range s.Bids {
		if k, ok := parseTaskKey(ks); ok && v.Price != nil {
			p.bids[k] = v
		}
	}
	for ks, v := range s.Results {
		if k, ok := parseTaskKey(ks); ok {
			p.results[k] = v
		}
	}
}

func randomHash() types.Hash {
	var h types.Hash
	if _, err := rand.Read(h[:]); err != nil {
		panic(err)
	}
	return h
}
