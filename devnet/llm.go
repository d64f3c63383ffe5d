package devnet

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/he"
	"github.com/ogpu-network/ogpu/he/example"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/node/pricing"
	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/runtime/hardware"
	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/types"
)

// DevnetOptions configure RunDevnet.
type DevnetOptions struct {
	// Keep keeps the temporary home.
	Keep bool
	// Model is the GGUF file the providers serve (default: the shared
	// stories260K.gguf, found by FindModel).
	Model string
	// Threads per llama.cpp context (default llm.DefaultThreads).
	Threads int
}

// DevnetReport is what the devnet did, for tests.
type DevnetReport struct {
	Rounds []*agent.LLMResult
	// Liar is the provider that lied in round 2; LiarSlashed whether the
	// chain slashed it.
	Liar        types.Address
	LiarSlashed bool
	Height      int64
	// Pipeline is the encrypted 3-stage job of round 3; Plaintext the same
	// model's output computed in the clear on the same input.
	Pipeline  *agent.PipelineResult
	Plaintext []float64
	// Canary is the canary the validator agent posted during round 1.
	Canary *agent.CanaryStatus
}

// devnetLogger prints an agent's log lines as "  [name] message k=v".
type devnetLogger struct {
	w     io.Writer
	name  string
	attrs []slog.Attr
}

func (l devnetLogger) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelInfo }

func (l devnetLogger) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "   [%s] %s", l.name, r.Message)
	add := func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	}
	for _, a := range l.attrs {
		add(a)
	}
	r.Attrs(add)
	b.WriteByte('\n')
	_, err := io.WriteString(l.w, b.String()) // one write: w serializes writers
	return err
}

func (l devnetLogger) WithAttrs(as []slog.Attr) slog.Handler {
	l.attrs = append(append([]slog.Attr{}, l.attrs...), as...)
	return l
}

func (l devnetLogger) WithGroup(string) slog.Handler { return l }

// syncWriter serializes writes from the agents' goroutines.
type syncWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (s syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

type devProvider struct {
	acct   devAccount
	host   *p2p.Host
	store  *blobstore.Store
	price  pricing.Strategy
	cancel context.CancelFunc
	done   chan error
	agent  *agent.Provider
}

// llmRounds starts three provider agents, a validator agent and a client
// on loopback libp2p, and runs two LLM jobs: one the providers agree on,
// and one where prov2 lies and is slashed.
func (d *devnet) llmRounds(home string, opts DevnetOptions) (*DevnetReport, error) {
	ctx, cancel := context.WithCancel(d.ctx)
	// Every agent goroutine has stopped (and logged its last line) before
	// this returns: the caller goes on writing to the same output.
	var agents sync.WaitGroup
	defer func() { cancel(); agents.Wait() }()
	var mu sync.Mutex
	w := syncWriter{&mu, d.w}
	d.w = w
	logger := func(name string) *slog.Logger { return slog.New(devnetLogger{w: d.w, name: name}) }
	// llama.cpp logs through slog.Default: keep its chatter out.
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer slog.SetDefault(prev)

	modelPath := opts.Model
	if modelPath == "" {
		var err error
		if modelPath, err = agent.FindModel(); err != nil {
			return nil, err
		}
	}
	threads := opts.Threads
	if threads == 0 {
		threads = 1 // four llama.cpp contexts share this machine's cores
	}
	lo := llm.Options{Threads: threads, BatchSize: 512, ContextSize: 512}
	hw, err := hardware.Detect(ctx)
	if err != nil {
		return nil, err
	}
	attrs := hw.Attributes()

	fmt.Fprintln(w, "\n== libp2p: a validator agent, three providers and a client on loopback (Noise over TCP and QUIC)")
	newHost := func(name string, key *ecdsa.PrivateKey, access *agent.Access, bootstrap []string) (*p2p.Host, *blobstore.Store, error) {
		store, err := blobstore.Open(filepath.Join(home, "p2p", name, "blobs"))
		if err != nil {
			return nil, nil, err
		}
		cfg := p2p.Config{Key: key, Store: store, Bootstrap: bootstrap, Logger: logger(name),
			Listen: []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"}}
		if access != nil {
			cfg.Authorize = access.Authorize
		}
		h, err := p2p.New(ctx, cfg)
		if err != nil {
			return nil, nil, err
		}
		return h, store, nil
	}
	validator := d.accts[len(d.accts)-1]
	vAccess := agent.NewAccess(d.c)
	vHost, vStore, err := newHost("validator", validator.key, vAccess, nil)
	if err != nil {
		return nil, err
	}
	defer vHost.Close()
	boot := vHost.Addrs()
	fmt.Fprintf(w, "validator agent %s listening on %s\n", vHost.ID(), strings.Join(boot, " "))
	va := agent.NewValidator(d.c, validator.key, vHost, vStore, lo)
	va.Logger = logger("validator")
	va.Canary = agent.CanaryConfig{Dir: filepath.Join(home, "p2p", "validator", "canaries"),
		Listen: []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"}}
	defer va.Close()
	agents.Add(1)
	go func() { defer agents.Done(); _ = va.Run(ctx) }()

	modelHash := types.Hash{}
	per := func(milli uint64) *uint256.Int { return new(uint256.Int).Div(types.OGPU(milli), uint256.NewInt(1000)) }
	provs := make([]*devProvider, 3)
	for i := range provs {
		acct := d.accts[3+i]
		nodeKey, err := p2p.LoadOrCreateKey(filepath.Join(home, "p2p", acct.name, "node_key"))
		if err != nil {
			return nil, err
		}
		dp := &devProvider{acct: acct, price: pricing.PerToken{Base: per(100), PerToken: per(40 + 10*uint64(i)), PerStage: per(100 + 20*uint64(i))}}
		access := agent.NewAccess(d.c)
		if dp.host, dp.store, err = newHost(acct.name, nodeKey, access, boot); err != nil {
			return nil, err
		}
		defer dp.host.Close()
		if i < 2 {
			if modelHash, err = dp.store.PutFile(modelPath); err != nil {
				return nil, err
			}
		}
		provs[i] = dp
	}
	st, err := os.Stat(modelPath)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "model %s: sha256 %x, %d bytes; prov1 and prov2 have it, prov3 fetches it from them through the DHT\n",
		filepath.Base(modelPath), modelHash, st.Size())

	start := func(dp *devProvider, lie bool) error {
		cfg := agent.ProviderConfig{
			Chain: d.c, Key: dp.acct.key, Host: dp.host, Store: dp.store, LLM: lo, Strategy: dp.price,
			Attributes: attrs, Bond: types.OGPU(200), StateDir: filepath.Join(home, "p2p", dp.acct.name, "state"),
			Logger: logger(dp.acct.name), Lie: lie, Pipeline: true,
		}
		if dp.store.Has(modelHash) {
			cfg.Models = []types.Hash{modelHash}
		} else {
			cfg.Want = []types.Hash{modelHash}
		}
		a, err := agent.NewProvider(cfg)
		if err != nil {
			return err
		}
		pctx, pcancel := context.WithCancel(ctx)
		dp.agent, dp.cancel, dp.done = a, pcancel, make(chan error, 1)
		ready := make(chan struct{})
		agents.Add(1)
		go func() {
			defer agents.Done()
			info, err := a.Prepare(pctx)
			if err == nil {
				err = a.Register(pctx, info)
			}
			close(ready)
			if err != nil {
				dp.done <- err
				return
			}
			dp.done <- a.Serve(pctx)
		}()
		<-ready
		select {
		case err := <-dp.done:
			return fmt.Errorf("%s: %w", dp.acct.name, err)
		default:
			return nil
		}
	}
	stop := func(dp *devProvider) {
		dp.cancel()
		<-dp.done
		dp.agent.Close()
	}
	for _, dp := range provs {
		if err := start(dp, false); err != nil {
			return nil, err
		}
		defer func() { dp.cancel() }()
	}
	fmt.Fprintf(w, "providers registered with their peer ids, %d hardware attributes (e.g. %s), runtime llama.cpp, and 200ogpu bonded each\n",
		len(attrs), attrs[0])
	if err := d.printBalances("before the LLM rounds"); err != nil {
		return nil, err
	}

	alice := d.accts[0]
	cAccess := agent.NewAccess(d.c)
	cHost, cStore, err := newHost("alice", alice.key, cAccess, boot)
	if err != nil {
		return nil, err
	}
	defer cHost.Close()
	client := agent.NewClient(d.c, alice.key, cHost, cStore, cAccess)
	client.Logger = logger("alice")
	job := agent.LLMJob{
		Model: modelHash, ModelSize: uint64(st.Size()), Prompt: "Once upon a time", MaxTokens: 48,
		Redundancy: 2, MaxPrice: types.OGPU(5),
		Req:     market.Requirements{MinStake: types.OGPU(100), Attributes: []string{"ram>=1Gi"}},
		Windows: market.Windows{Bid: 4, Reveal: 3, Execute: 25, Verify: 15},
	}
	report := &DevnetReport{}
	round := func(n int, title string) (*agent.LLMResult, error) {
		fmt.Fprintf(w, "\n== round %d: %s\n", n, title)
		fmt.Fprintf(w, "alice: ogpu job run --prompt %q --max-tokens %d --redundancy 2 --max-price 5ogpu\n", job.Prompt, job.MaxTokens)
		names := names(d)
		var streaming atomic.Bool // the stream and the chain events come from different goroutines
		res, err := client.RunLLM(ctx, job, func(f string, a ...any) {
			line := "-> " + names.Replace(fmt.Sprintf(f, a...))
			if streaming.Swap(false) {
				line = "\n" + line
			}
			fmt.Fprintln(w, line)
		}, func(piece string) {
			if !streaming.Swap(true) {
				piece = "-> streamed from the first winner: " + job.Prompt + piece
			}
			fmt.Fprint(w, piece)
		})
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(w, "verified text (%s, result %x...): %q\n", res.Outcome, res.Result[:6], res.Text)
		if res.Overruled {
			fmt.Fprintf(w, "(the streamed text came from %s, whose result was overruled)\n", d.name(res.StreamedFrom))
		}
		fmt.Fprintf(w, "job %d: providers paid %s, alice refunded %s, compensated %s, validator fee %s; %d blocks from post to payment, %s\n",
			res.Job, types.FormatAmount(res.Paid), types.FormatAmount(res.Refunded), types.FormatAmount(res.Compensated),
			types.FormatAmount(res.ValidatorFee), res.Completed-res.Posted, res.Elapsed.Round(time.Millisecond))
		report.Rounds = append(report.Rounds, res)
		return res, d.printBalances(fmt.Sprintf("after round %d", n))
	}
	canary := d.canaryDuringNextJob(ctx, va, alice.addr, &agents)
	if _, err := round(1, "an LLM job the two winners agree on"); err != nil {
		return nil, err
	}
	if report.Canary, err = d.canarySettled(ctx, va, canary); err != nil {
		return report, err
	}
	liar := provs[1]
	fmt.Fprintf(w, "\nprov2 restarts with the devnet-only --devnet-lie flag: it will change one token of its output\n")
	stop(liar)
	if err := start(liar, true); err != nil {
		return nil, err
	}
	if _, err := round(2, "prov2 lies"); err != nil {
		return nil, err
	}
	report.Liar = liar.acct.addr
	pv, err := d.c.Provider(ctx, liar.acct.addr)
	if err != nil {
		return nil, err
	}
	report.LiarSlashed = pv.Tombstoned
	if !pv.Tombstoned {
		return report, errors.New("the lying provider was not slashed")
	}
	fmt.Fprintf(w, "prov2 is tombstoned for fraud: reputation %d/1000, bonded %s\n", pv.Score, types.FormatAmount(pv.Bonded))
	if err := d.pipelineRound(ctx, client, report, names(d)); err != nil {
		return report, err
	}
	return report, nil
}

// names replaces every devnet address with its account name.
func names(d *devnet) *strings.Replacer {
	var pairs []string
	for _, a := range d.accts {
		pairs = append(pairs, a.addr.Hex(), a.name)
	}
	return strings.NewReplacer(pairs...)
}

// pipelineRound trains the example classifier, encrypts one test example
// under a fresh CKKS key, runs the 3-stage model as an encrypted pipeline
// job on prov1 and prov3 and prints the decrypted result next to the
// plaintext model's.
func (d *devnet) pipelineRound(ctx context.Context, client *agent.Client, report *DevnetReport, names *strings.Replacer) error {
	w := d.w
	fmt.Fprintf(w, "\n== round 3: an encrypted pipeline job (CKKS): 3 stages, each on 2 providers that never see the data\n")
	fmt.Fprintln(w, "alice: ogpu model train-example --out model.json")
	t0 := time.Now()
	m, tr, err := example.Train(example.Options{Seed: 1})
	if err != nil {
		return err
	}
	mh, err := m.Hash()
	if err != nil {
		return err
	}
	p, err := he.NewParams(m.Preset)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "-> trained %q in %s: %d stages on preset %s (uses %d of its %d levels), sha256 %x...; plaintext accuracy %.1f%% (train) %.1f%% (test), a linear model gets %.1f%%\n",
		m.Name, time.Since(t0).Round(time.Millisecond), len(m.Stages), m.Preset, p.Depth()-m.InputLevel(p, len(m.Stages)),
		p.Depth(), mh[:6], 100*tr.TrainAccuracy, 100*tr.TestAccuracy, 100*tr.LinearBaseline)
	fmt.Fprintf(w, "alice: ogpu he keygen --preset %s --log-slots %d\n", m.Preset, m.LogSlots)
	t0 = time.Now()
	sk, ek, err := he.GenerateKeys(m.Preset, m.LogSlots)
	if err != nil {
		return err
	}
	ekb, err := ek.Marshal()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "-> key %s in %s; the secret key stays with alice, the evaluation keys (%.1f MB: relinearization + %d rotations) go to the providers\n",
		sk.ID, time.Since(t0).Round(time.Millisecond), float64(len(ekb))/1e6, len(he.Rotations(ek.Params, m.LogSlots)))
	// The first test example the model gets right (the demo shows the
	// encrypted run agreeing with the plaintext one, not the model's
	// mistakes; the test accuracy above says how often it errs).
	k := 0
	for i := range tr.Test.X {
		if out, err := m.Forward(tr.Test.X[i]); err == nil && example.Argmax(out) == tr.Test.Y[i] {
			k = i
			break
		}
	}
	x, label := tr.Test.X[k], tr.Test.Y[k]
	fmt.Fprintf(w, "alice: ogpu job run --kind pipeline --model model.json --input x.json   (x = test example %d, true class %d %s)\n", k, label, example.Labels[label])
	job := agent.PipelineJob{Model: m, Key: sk, EvalKeys: ekb, Input: x, Redundancy: 2, MaxPrice: types.OGPU(1),
		Req:     market.Requirements{MinStake: types.OGPU(100)},
		Windows: market.Windows{Bid: 4, Reveal: 3, Execute: 120, Verify: 10}}
	res, err := client.RunPipeline(ctx, job, func(f string, a ...any) {
		fmt.Fprintln(w, "-> "+names.Replace(fmt.Sprintf(f, a...)))
	})
	if err != nil {
		return err
	}
	plain, err := m.Forward(x)
	if err != nil {
		return err
	}
	report.Pipeline, report.Plaintext = res, plain
	got, want := example.Argmax(res.Output), example.Argmax(plain)
	maxErr := example.MaxAbsDiff(plain, res.Output)
	fmt.Fprintf(w, "decrypted by alice: %s → class %d (%s)\n", example.FormatVector(res.Output), got, example.Labels[got])
	fmt.Fprintf(w, "plaintext model:    %s → class %d (%s); max difference %.2g; true class %d\n", example.FormatVector(plain), want, example.Labels[want], maxErr, label)
	fmt.Fprintf(w, "job %d: providers paid %s, alice refunded %s, validator fee %s; %d blocks from post to payment, %s\n",
		res.Job, types.FormatAmount(res.Paid), types.FormatAmount(res.Refunded), types.FormatAmount(res.ValidatorFee),
		res.Completed-res.Posted, res.Elapsed.Round(time.Millisecond))
	if got != want {
		return fmt.Errorf("the decrypted prediction %d differs from the plaintext one %d", got, want)
	}
	// Let the providers' last transactions land before the agents stop.
	if err := d.c.WaitHeight(ctx, res.Completed+2); err != nil {
		return err
	}
	return d.printBalances("after round 3")
}

// canaryDuringNextJob has the validator agent post a canary mirroring the
// next job client posts, and prints `ogpu query job` of both side by side,
// each read in the block it was posted in. The canary's job id (0 if none
// was posted) arrives on the channel.
func (d *devnet) canaryDuringNextJob(ctx context.Context, va *agent.Validator, client types.Address, agents *sync.WaitGroup) <-chan uint64 {
	out := make(chan uint64, 1)
	sctx, stop := context.WithCancel(ctx)
	blocks, err := d.c.Subscribe(sctx, 0)
	if err != nil {
		stop()
		out <- 0
		return out
	}
	agents.Add(1)
	go func() {
		defer agents.Done()
		posted := uint64(0)
		defer func() { out <- posted }()
		var src market.EventJobPosted
		var srcHeight int64
		for b := range blocks {
			for _, e := range node.EventsOf[market.EventJobPosted](b.Events) {
				if e.Client == client && srcHeight == 0 {
					src, srcHeight = e, b.Height
				}
			}
			if srcHeight != 0 {
				break
			}
		}
		stop()
		for range blocks { // until the subscription has stopped
		}
		if srcHeight == 0 {
			return
		}
		id, err := va.PostCanary(ctx, src.Job)
		if err != nil {
			fmt.Fprintf(d.w, "validator: no canary: %v\n", err)
			return
		}
		posted = id
		var canaryHeight int64
		for _, c := range va.Canaries() {
			if c.Job == id {
				canaryHeight = c.Posted
			}
		}
		left, lerr := d.queryJobText(ctx, src.Job, srcHeight)
		right, rerr := d.queryJobText(ctx, id, canaryHeight)
		if lerr != nil || rerr != nil {
			fmt.Fprintf(d.w, "query job: %v %v\n", lerr, rerr)
			return
		}
		fmt.Fprint(d.w, sideBySide(
			fmt.Sprintf("$ ogpu query job %d   (alice's job, in its block %d)", src.Job, srcHeight), left,
			fmt.Sprintf("$ ogpu query job %d   (?, in its block %d)", id, canaryHeight), right))
	}()
	return out
}

// queryJobText is what `ogpu query job ID` prints, read at height, and
// the job's seal (in the query's JSON; the text leaves it out).
func (d *devnet) queryJobText(ctx context.Context, id uint64, height int64) (string, error) {
	res, err := d.c.Query(ctx, chain.QueryJob+strconv.FormatUint(id, 10), nil, height, false)
	if err != nil {
		return "", err
	}
	var j chain.JobView
	if err := json.Unmarshal(res.Value, &j); err != nil {
		return "", err
	}
	var b strings.Builder
	j.WriteText(&b, res.Height)
	fmt.Fprintf(&b, "  seal:       %x\n", j.Seal)
	return b.String(), nil
}

// sideBySide prints two texts in columns.
func sideBySide(lt, left, rt, right string) string {
	l := append([]string{lt}, strings.Split(strings.TrimRight(left, "\n"), "\n")...)
	r := append([]string{rt}, strings.Split(strings.TrimRight(right, "\n"), "\n")...)
	width := 0
	for _, s := range l {
		width = max(width, len(s))
	}
	var b strings.Builder
	b.WriteString("\n-- a client job and a job posted by the validator agent, as anyone sees them (every field but id, client, input, seal and heights is the same; the seal line is from the query's JSON):\n")
	for i := range max(len(l), len(r)) {
		var a, c string
		if i < len(l) {
			a = l[i]
		}
		if i < len(r) {
			c = r[i]
		}
		fmt.Fprintf(&b, "%-*s | %s\n", width, a, c)
	}
	return b.String()
}

// canarySettled waits for the canary the validator posted to settle and
// prints how: agreed with its known answer, nothing is revealed.
func (d *devnet) canarySettled(ctx context.Context, va *agent.Validator, posted <-chan uint64) (*agent.CanaryStatus, error) {
	var id uint64
	select {
	case id = <-posted:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if id == 0 {
		return nil, errors.New("the validator agent posted no canary during round 1")
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		for _, c := range va.Canaries() {
			if c.Job != id || !c.Done {
				continue
			}
			j, err := d.c.Job(ctx, id)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(d.w, "\n-- job %d was the validator's canary (its seal is hash(validator, hash(known answer, salt)); the salt never left the validator)\n", id)
			fmt.Fprintf(d.w, "canary job %d, posted from shell %s for prompt %q: settled %s on %x...; the validator's known answer (re-executed) was %x...\n",
				id, c.Shell.Hex(), c.Prompt, c.Outcome, c.Result[:6], c.Answer[:6])
			if c.Outcome != "agreed" || c.Result != c.Answer || c.Claimed || j.CanaryBy != (types.Address{}) {
				return &c, fmt.Errorf("canary %d: outcome %s, claimed %v, CanaryBy %s; want agreed on the known answer, nothing revealed", id, c.Outcome, c.Claimed, j.CanaryBy.Hex())
			}
			fmt.Fprintf(d.w, "the providers answered it right, so nothing was revealed: on chain job %d stays a job like any other\n", id)
			return &c, nil
		}
		select {
		case <-wctx.Done():
			return nil, fmt.Errorf("canary %d did not settle in 30s", id)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
