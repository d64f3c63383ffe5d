package devnet

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/metrics"
	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/node/pricing"
	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/runtime/hardware"
	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/types"
)

// agents are the devnet's off-chain parties on loopback libp2p, started
// by startAgents: a validator agent, three providers and alice's client.
type agents struct {
	va     *agent.Validator
	provs  []*provider // prov1, prov2, prov3
	client *agent.Client
	// model is the LLM the providers serve (prov1 and prov2 have it, prov3
	// fetches it), modelSize its size in bytes.
	model     types.Hash
	modelPath string
	modelSize uint64
	llm       llm.Options
	// attrs are the providers' hardware attributes; boot the validator
	// agent's addresses, which every other host bootstraps from.
	attrs []string
	boot  []string

	parent context.Context    // Run's context, which stopAgents restores
	cancel context.CancelFunc // ends the agents' context
	wg     sync.WaitGroup     // every agent goroutine
	stops  []func()           // run last first by stopAgents
}

// provider is a provider agent and what it keeps across restarts.
type provider struct {
	acct   account
	host   *p2p.Host
	store  *blobstore.Store
	price  pricing.Strategy
	agent  *agent.Provider
	cancel context.CancelFunc
	done   chan error
}

// onStop has stopAgents run f once every agent goroutine has stopped
// (last registered first): closing what the agents used.
func (d *devnet) onStop(f func()) { d.stops = append(d.stops, f) }

// goAgent runs f on a goroutine that stopAgents waits for: f must return
// once d.ctx ends.
func (d *devnet) goAgent(f func()) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		f()
	}()
}

// stopAgents stops what startAgents started, however far it got: it
// ends the agents' context, waits for every agent goroutine to stop (and
// log its last line), then runs the onStop functions. When it returns,
// d.ctx is Run's context again.
func (d *devnet) stopAgents() {
	if d.cancel != nil {
		d.cancel()
		d.wg.Wait()
	}
	for i := len(d.stops) - 1; i >= 0; i-- {
		d.stops[i]()
	}
	d.stops = nil
	if d.parent != nil {
		d.ctx, d.parent, d.cancel = d.parent, nil, nil
	}
}

// logger is the slog logger of the agent or host called name.
func (d *devnet) logger(name string) *slog.Logger {
	return slog.New(logHandler{w: d.w, name: name})
}

// startAgents starts a validator agent, the three providers (registered,
// bonded and serving the model) and alice's client on loopback libp2p.
// From here on d.w serializes the agents' writes and d.ctx is the agents'
// context.
func (d *devnet) startAgents() error {
	ctx, cancel := context.WithCancel(d.ctx)
	d.parent, d.ctx, d.cancel = d.ctx, ctx, cancel
	d.w = newSyncWriter(d.w)
	// llama.cpp logs through slog.Default: keep its chatter out.
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	d.onStop(func() { slog.SetDefault(prev) })

	d.modelPath = d.opts.Model
	if d.modelPath == "" {
		var err error
		if d.modelPath, err = agent.FindModel(); err != nil {
			return err
		}
	}
	threads := d.opts.Threads
	if threads == 0 {
		threads = 1 // four llama.cpp contexts share this machine's cores
	}
	d.llm = llm.Options{Threads: threads, BatchSize: 512, ContextSize: 512}
	hw, err := hardware.Detect(ctx)
	if err != nil {
		return err
	}
	d.attrs = hw.Attributes()

	fmt.Fprintln(d.w, "\n== libp2p: a validator agent, three providers and a client on loopback (Noise over TCP and QUIC)")
	validator := d.validator()
	vAccess := agent.NewAccess(d.c)
	vHost, vStore, err := d.newHost("validator", validator.key, vAccess, nil)
	if err != nil {
		return err
	}
	d.onStop(func() { vHost.Close() })
	d.boot = vHost.Addrs()
	fmt.Fprintf(d.w, "validator agent %s listening on %s\n", vHost.ID(), strings.Join(d.boot, " "))
	d.va = agent.NewValidator(d.c, validator.key, vHost, vStore, d.llm)
	d.va.Logger = d.logger("validator")
	d.va.Canary = agent.CanaryConfig{Dir: filepath.Join(d.home, "p2p", "validator", "canaries"),
		Listen: []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"}}
	d.onStop(d.va.Close)
	d.goAgent(func() { _ = d.va.Run(ctx) })

	per := func(milli uint64) *uint256.Int { return new(uint256.Int).Div(types.OGPU(milli), uint256.NewInt(1000)) }
	d.provs = make([]*provider, 3)
	for i := range d.provs {
		acct := d.accts[3+i]
		nodeKey, err := p2p.LoadOrCreateKey(filepath.Join(d.home, "p2p", acct.name, "node_key"))
		if err != nil {
			return err
		}
		p := &provider{acct: acct, price: pricing.PerToken{Base: per(100), PerToken: per(40 + 10*uint64(i)), PerStage: per(100 + 20*uint64(i))}}
		access := agent.NewAccess(d.c)
		if p.host, p.store, err = d.newHost(acct.name, nodeKey, access, d.boot); err != nil {
			return err
		}
		d.onStop(func() { p.host.Close() })
		if i < 2 {
			if d.model, err = p.store.PutFile(d.modelPath); err != nil {
				return err
			}
		}
		d.provs[i] = p
	}
	st, err := os.Stat(d.modelPath)
	if err != nil {
		return err
	}
	d.modelSize = uint64(st.Size())
	fmt.Fprintf(d.w, "model %s: sha256 %x, %d bytes; prov1 and prov2 have it, prov3 fetches it from them through the DHT\n",
		filepath.Base(d.modelPath), d.model, st.Size())

	for _, p := range d.provs {
		d.onStop(func() { // the agent running at the end, after restarts
			if p.agent != nil {
				p.agent.Close()
			}
		})
		if err := d.startProvider(p, nil); err != nil {
			return err
		}
	}
	fmt.Fprintf(d.w, "providers registered with their peer ids, %d hardware attributes (e.g. %s), runtime llama.cpp, and 200ogpu bonded each\n",
		len(d.attrs), d.attrs[0])
	if err := d.printBalances("before the LLM rounds"); err != nil {
		return err
	}

	alice := d.accts[0]
	cAccess := agent.NewAccess(d.c)
	cHost, cStore, err := d.newHost("alice", alice.key, cAccess, d.boot)
	if err != nil {
		return err
	}
	d.onStop(func() { cHost.Close() })
	d.client = agent.NewClient(d.c, alice.key, cHost, cStore, cAccess)
	d.client.Logger = d.logger("alice")
	return nil
}

// newHost starts the libp2p host (and opens the blob store) of the party
// called name, listening on loopback TCP and QUIC; access, if not nil,
// decides who may fetch its blobs.
func (d *devnet) newHost(name string, key *ecdsa.PrivateKey, access *agent.Access, bootstrap []string) (*p2p.Host, *blobstore.Store, error) {
	store, err := blobstore.Open(filepath.Join(d.home, "p2p", name, "blobs"))
	if err != nil {
		return nil, nil, err
	}
	cfg := p2p.Config{Key: key, Store: store, Bootstrap: bootstrap, Logger: d.logger(name),
		Listen:      []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"},
		OnBlobBytes: metrics.ObserveBlobBytes}
	if access != nil {
		cfg.Authorize = access.Authorize
	}
	h, err := p2p.New(d.ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return h, store, nil
}

// newProvider makes a provider for acct priced by price: its libp2p host
// and blob store (with the model if withModel), closed when the agents
// stop, as is the agent startProvider will run for it.
func (d *devnet) newProvider(acct account, price pricing.Strategy, withModel bool) (*provider, error) {
	nodeKey, err := p2p.LoadOrCreateKey(filepath.Join(d.home, "p2p", acct.name, "node_key"))
	if err != nil {
		return nil, err
	}
	p := &provider{acct: acct, price: price}
	if p.host, p.store, err = d.newHost(acct.name, nodeKey, agent.NewAccess(d.c), d.boot); err != nil {
		return nil, err
	}
	d.onStop(func() { p.host.Close() })
	d.onStop(func() {
		if p.agent != nil {
			p.agent.Close()
		}
	})
	if withModel {
		if _, err := p.store.PutFile(d.modelPath); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// runningWithin is how many blocks startProvider waits for a provider
// agent to say it is running (it registered and follows the blocks).
const runningWithin = 150

// startProvider starts p's agent: it serves the model (or wants it, if its
// store does not have it), bonds 200ogpu, registers and serves until
// stopProvider or the end. configure, if not nil, changes its
// configuration first (e.g. Lie). It returns once the agent follows the
// chain's blocks ("provider running"): a job posted from then on is one
// it sees, even on a machine too busy to schedule it at once.
func (d *devnet) startProvider(p *provider, configure func(*agent.ProviderConfig)) error {
	running := make(chan struct{})
	var once sync.Once
	logger := slog.New(logHandler{w: d.w, name: p.acct.name, seen: func(msg string) {
		if msg == "provider running" {
			once.Do(func() { close(running) })
		}
	}})
	cfg := agent.ProviderConfig{
		Chain: d.c, Key: p.acct.key, Host: p.host, Store: p.store, LLM: d.llm, Strategy: p.price,
		Attributes: d.attrs, Bond: types.OGPU(200), StateDir: filepath.Join(d.home, "p2p", p.acct.name, "state"),
		Logger: logger, Pipeline: true, Finetune: true,
	}
	if p.store.Has(d.model) {
		cfg.Models = []types.Hash{d.model}
	} else {
		cfg.Want = []types.Hash{d.model}
	}
	if configure != nil {
		configure(&cfg)
	}
	a, err := agent.NewProvider(cfg)
	if err != nil {
		return err
	}
	pctx, pcancel := context.WithCancel(d.ctx)
	p.agent, p.cancel, p.done = a, pcancel, make(chan error, 1)
	ready := make(chan struct{})
	d.goAgent(func() {
		info, err := a.Prepare(pctx)
		if err == nil {
			err = a.Register(pctx, info)
		}
		close(ready)
		if err != nil {
			p.done <- err
			return
		}
		p.done <- a.Serve(pctx)
	})
	<-ready
	st, err := d.c.RPC.Status(d.ctx)
	if err != nil {
		return err
	}
	late, stop := d.afterBlocks(st.SyncInfo.LatestBlockHeight + runningWithin)
	defer stop()
	select {
	case <-running:
		return nil
	case err := <-p.done:
		p.done <- err // for stopProvider
		return fmt.Errorf("%s: %w", p.acct.name, err)
	case <-late:
		return fmt.Errorf("%s: its agent registered but did not say \"provider running\" within %d blocks", p.acct.name, runningWithin)
	case <-d.ctx.Done():
		return d.ctx.Err()
	}
}

// afterBlocks returns a channel closed once the chain reaches height (or
// stop is called, or the agents stop).
func (d *devnet) afterBlocks(height int64) (_ <-chan struct{}, stop func()) {
	ch := make(chan struct{})
	ctx, stop := context.WithCancel(d.ctx)
	d.goAgent(func() {
		_ = d.c.WaitHeight(ctx, height)
		close(ch)
	})
	return ch, stop
}

// stopProvider stops p's agent, waits for it and closes it.
func (d *devnet) stopProvider(p *provider) {
	p.cancel()
	<-p.done
	p.agent.Close()
}
