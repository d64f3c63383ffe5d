package cli

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/ogpu-network/ogpu/console"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/metrics"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/node/pricing"
	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/runtime/hardware"
	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/wallet"
)

// addP2PFlags adds the libp2p flags of every agent.
func addP2PFlags(cmd *cobra.Command, listen []string) {
	f := cmd.Flags()
	f.StringArray("listen", listen, "libp2p listen multiaddr (repeatable)")
	f.StringArray("bootstrap", nil, "libp2p peer to join the DHT through, /ip4/…/p2p/ID (repeatable; registered providers are always used)")
}

// openHost starts a libp2p host with key, a blob store under dir and the
// bootstrap peers from the flags and the chain.
// A nil listen takes --listen.
func openHost(ctx context.Context, cmd *cobra.Command, c *node.Client, key *ecdsa.PrivateKey, dir string, access *agent.Access, logger *slog.Logger, listen []string) (*p2p.Host, *blobstore.Store, error) {
	store, err := blobstore.Open(filepath.Join(dir, "blobs"))
	if err != nil {
		return nil, nil, err
	}
	if listen == nil {
		listen, _ = cmd.Flags().GetStringArray("listen")
	}
	boot, _ := cmd.Flags().GetStringArray("bootstrap")
	self, err := p2p.PeerIDOf(&key.PublicKey)
	if err != nil {
		return nil, nil, err
	}
	boot = append(boot, agent.ChainBootstrap(ctx, c, self.String())...)
	pc := p2p.Config{Key: key, Listen: listen, Bootstrap: boot, Store: store, Authorize: access.Authorize, Logger: logger}
	if metricsAddr(cmd) != "" {
		pc.OnBlobBytes = metrics.ObserveBlobBytes
	}
	h, err := p2p.New(ctx, pc)
	if err != nil {
		return nil, nil, err
	}
	return h, store, nil
}

func agentLogger(w io.Writer, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lv})), nil
}

// quietLlama keeps llama.cpp's own logging (through slog.Default) out of
// the output unless --log-level is debug.
func quietLlama(level string) {
	if level != "debug" {
		slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	}
}

// ---- ogpud provider run

func newProviderCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "provider", Short: "Run a provider agent: bid on jobs, run them with llama.cpp, get paid"}
	run := &cobra.Command{
		Use:   "run",
		Short: "Run a provider agent against a node until interrupted",
		Long: `Run a provider agent against any full node (--node). The agent imports the
--model files into its content-addressed store (HOME/provider/blobs), detects
the hardware, measures tokens per second, registers (or updates) the provider
record with its libp2p peer id and bonds --bond; then it follows the chain:
prices every posted job it can run (built-in per-token price, or
--pricing-script), seals and reveals bids, and on an award fetches the prompt
from the client, generates, commits and reveals the result hash and serves
the output. The account key comes from the ogpu wallet (--wallet, --from;
password from --password-file or OGPU_PASSWORD).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := waitCtx(cmd)
			defer stop()
			c, err := dialNode(cmd)
			if err != nil {
				return err
			}
			return runProviderAgent(ctx, cmd, c, homeFlag(cmd), true)
		},
	}
	run.Flags().String("node", "http://127.0.0.1:26657", "RPC address of the node")
	addBroadcastFlag(run.Flags(), "--node")
	addProviderFlags(run)
	addMetricsFlag(run, metricsProviderListen)
	addConsoleFlag(run, "this agent's auction decisions, speed, reachability, pricing and stake actions, and the explorer")
	cmd.AddCommand(run)
	return cmd
}

func addProviderFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.String("wallet", "~/.ogpu", "ogpu wallet home holding the provider's key (keystore/)")
	f.String("from", "", "name or address of the provider's key in the wallet")
	f.String("password-file", "", "read the key password from this file (else OGPU_PASSWORD or a prompt)")
	f.StringArray("model", nil, "GGUF model file to serve (repeatable)")
	f.StringArray("want-model", nil, "sha256 of a model to fetch from peers and serve (repeatable)")
	f.StringArray("slice", nil, "GGUF slice (ogpu model split) to serve as a stage of split jobs (repeatable)")
	f.StringArray("want-slice", nil, "sha256 of a slice (from a split manifest) to fetch from peers and serve (repeatable)")
	f.String("pricing-script", "", "executable that reads the job as JSON on stdin and prints a price (docs/pricing-scripts.md)")
	f.String("price-base", "0.1ogpu", "built-in strategy: price per job")
	f.String("price-per-token", "0.05ogpu", "built-in strategy: price per token of the job's budget")
	f.String("price-stage", "0.1ogpu", "built-in strategy: price per encrypted pipeline stage")
	f.Bool("pipeline", true, "offer encrypted pipeline stages (CKKS on this CPU; the data stays encrypted)")
	f.Bool("finetune", true, "offer fine-tune jobs on the served models (their LM head, in this build's training class)")
	f.Int("finetune-every", agent.DefaultFinetuneEvery, "keep a fine-tune checkpoint every this many steps (the rest are recomputed when a game asks)")
	f.String("bond", "", "keep this much stake bonded (bonds the difference at start)")
	f.Bool("auto-unjail", true, "once a jail term (for a missed deadline) is over, send the unjail so the provider bids again; --auto-unjail=false leaves it to ogpu tx provider unjail")
	if f.Lookup("moniker") == nil { // ogpud start --provider: the node's name is the provider's
		f.String("moniker", "", "display name on chain, shown by consoles and explorers (at most 70 printable characters)")
	}
	f.Int("threads", 0, "llama.cpp threads (default min(4, CPUs)); part of the determinism class")
	f.Int("batch", 512, "llama.cpp batch size; part of the determinism class")
	f.String("log-level", "info", "debug, info, warn or error")
	f.Bool("devnet-lie", false, "DEVNET ONLY: change one token of every output, evaluate pipeline stages with a wrong weight (shows the dispute path; you will be slashed)")
	_ = f.MarkHidden("devnet-lie")
	f.Uint64("devnet-finetune-lie", 0, "DEVNET ONLY: perturb this step of every fine-tune job (shows the step-bisection game; you will be slashed)")
	_ = f.MarkHidden("devnet-finetune-lie")
	addP2PFlags(cmd, []string{"/ip4/0.0.0.0/tcp/4001", "/ip4/0.0.0.0/udp/4001/quic-v1"})
}

func walletKey(cmd *cobra.Command) (*ecdsa.PrivateKey, error) {
	dir, _ := cmd.Flags().GetString("wallet")
	w, err := wallet.Open(filepath.Join(expandHome(dir), "keystore"))
	if err != nil {
		return nil, err
	}
	return unlockFrom(cmd, w)
}

// unlockFrom unlocks --from in w with the password from --password-file,
// OGPU_PASSWORD or a prompt.
func unlockFrom(cmd *cobra.Command, w *wallet.Store) (*ecdsa.PrivateKey, error) {
	from, _ := cmd.Flags().GetString("from")
	if from == "" {
		return nil, fmt.Errorf("--from is required: the name or address of a key in the wallet at %s", w.Dir())
	}
	k, err := w.Find(from)
	if err != nil {
		return nil, fmt.Errorf("%w (create one with `ogpu keys add NAME`)", err)
	}
	pw, err := password(cmd, fmt.Sprintf("Password of %s: ", k.Name), false)
	if err != nil {
		return nil, err
	}
	return w.Unlock(k.Name, pw)
}

func llmOptions(cmd *cobra.Command) llm.Options {
	threads, _ := cmd.Flags().GetInt("threads")
	if threads <= 0 {
		threads = llm.DefaultThreads()
	}
	batch, _ := cmd.Flags().GetInt("batch")
	return llm.Options{Threads: threads, BatchSize: batch, ContextSize: 2048}
}

// runProviderAgent runs the provider agent; serveMetrics: serve its own
// /metrics (a node's endpoint serves them in `ogpud start`).
func runProviderAgent(ctx context.Context, cmd *cobra.Command, c *node.Client, home string, serveMetrics bool) error {
	f := cmd.Flags()
	level, _ := f.GetString("log-level")
	quietLlama(level)
	logger, err := agentLogger(cmd.ErrOrStderr(), level)
	if err != nil {
		return err
	}
	key, err := walletKey(cmd)
	if err != nil {
		return err
	}
	dir := filepath.Join(home, "provider")
	nodeKey, err := p2p.LoadOrCreateKey(filepath.Join(dir, "node_key"))
	if err != nil {
		return err
	}
	// One Access for the host and the provider: the rules the provider
	// binds its jobs' blobs to are the ones the host serves by, and they
	// are kept on disk, so a restart keeps them.
	access, err := agent.OpenAccess(c, filepath.Join(dir, "access"))
	if err != nil {
		return err
	}
	h, store, err := openHost(ctx, cmd, c, nodeKey, dir, access, logger, nil)
	if err != nil {
		return err
	}
	defer h.Close()
	cfg := agent.ProviderConfig{Chain: c, Key: key, Host: h, Store: store, LLM: llmOptions(cmd), StateDir: filepath.Join(dir, "state"), Logger: logger, Access: access}
	cfg.Moniker, _ = f.GetString("moniker")
	files, _ := f.GetStringArray("model")
	for _, file := range files {
		hash, err := store.PutFile(file)
		if err != nil {
			return fmt.Errorf("import model %s: %w", file, err)
		}
		logger.Info("serving model", "file", file, "sha256", fmt.Sprintf("%x", hash))
		cfg.Models = append(cfg.Models, hash)
	}
	sliceFiles, _ := f.GetStringArray("slice")
	for _, file := range sliceFiles {
		hash, err := store.PutFile(file)
		if err != nil {
			return fmt.Errorf("import slice %s: %w", file, err)
		}
		logger.Info("serving slice", "file", file, "sha256", fmt.Sprintf("%x", hash))
		cfg.Slices = append(cfg.Slices, hash)
	}
	wantSlices, _ := f.GetStringArray("want-slice")
	for _, s := range wantSlices {
		hash, err := parseHash("slice hash", s)
		if err != nil {
			return err
		}
		cfg.WantSlices = append(cfg.WantSlices, hash)
	}
	wants, _ := f.GetStringArray("want-model")
	for _, s := range wants {
		hash, err := parseHash("model hash", s)
		if err != nil {
			return err
		}
		cfg.Want = append(cfg.Want, hash)
	}
	if script, _ := f.GetString("pricing-script"); script != "" {
		cfg.Strategy = &pricing.Script{Path: script}
	} else {
		base, _ := f.GetString("price-base")
		per, _ := f.GetString("price-per-token")
		stage, _ := f.GetString("price-stage")
		var s pricing.PerToken
		if s.PerStage, err = types.ParseAmount(stage); err != nil {
			return fmt.Errorf("--price-stage: %w", err)
		}
		if s.Base, err = types.ParseAmount(base); err != nil {
			return fmt.Errorf("--price-base: %w", err)
		}
		if s.PerToken, err = types.ParseAmount(per); err != nil {
			return fmt.Errorf("--price-per-token: %w", err)
		}
		cfg.Strategy = s
	}
	if b, _ := f.GetString("bond"); b != "" {
		if cfg.Bond, err = types.ParseAmount(b); err != nil {
			return fmt.Errorf("--bond: %w", err)
		}
	}
	cfg.FetchProgress = progressBar(cmd.ErrOrStderr())
	cfg.Pipeline, _ = f.GetBool("pipeline")
	autoUnjail, _ := f.GetBool("auto-unjail")
	cfg.NoAutoUnjail = !autoUnjail
	cfg.Lie, _ = f.GetBool("devnet-lie")
	cfg.Finetune, _ = f.GetBool("finetune")
	cfg.FinetuneEvery, _ = f.GetInt("finetune-every")
	cfg.FinetuneLieAt, _ = f.GetUint64("devnet-finetune-lie")
	if cfg.Lie {
		logger.Warn("--devnet-lie: every output will have one token changed; the chain will slash this provider")
	}
	hw, err := hardware.Detect(ctx)
	if err != nil {
		return err
	}
	cfg.Attributes = hw.Attributes()
	if metricsAddr(cmd) != "" {
		cfg.OnGenerated = metrics.ObserveGeneration
		cfg.OnStageEvaluated = metrics.ObserveHEStage
	}
	p, err := agent.NewProvider(cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	if err := providerMetrics(ctx, cmd, c, p.Address(), serveMetrics); err != nil {
		return err
	}
	if err := startConsole(ctx, cmd, c, console.Options{Provider: console.ProviderOf(p)}); err != nil {
		return err
	}
	if len(cfg.Models) > 0 {
		if m, err := p.Model(cfg.Models[0]); err == nil {
			if tps, err := llm.MeasureTPS(ctx, m, 32); err == nil {
				cfg.Attributes = append(cfg.Attributes, hardware.TPSAttribute(tps))
				p.SetAttributes(cfg.Attributes)
				logger.Info("measured", "tokens_per_second", int(tps))
				if metricsAddr(cmd) != "" {
					metrics.SetTokensPerSecond(tps)
				}
			}
		}
	}
	fmt.Fprintf(cmd.OutOrStdout(), "provider %s: peer %s listening on %s\n", p.Address().Hex(), h.ID(), strings.Join(h.Addrs(), " "))
	err = p.Run(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// runValidatorAgent runs the validator agent with the node's operator key
// (HOME/config/operator_key.hex) until ctx ends.
func runValidatorAgent(ctx context.Context, cmd *cobra.Command, c *node.Client, home string, logger *slog.Logger) error {
	key, err := node.LoadOperatorKey(home)
	if err != nil {
		return err
	}
	// The validator agent serves only the inputs of input checks it found
	// available, to the task's providers (Access refuses unbound blobs);
	// its bindings are kept on disk across restarts.
	access, err := agent.OpenAccess(c, filepath.Join(home, "validator-agent", "access"))
	if err != nil {
		return err
	}
	h, store, err := openHost(ctx, cmd, c, key, filepath.Join(home, "validator-agent"), access, logger,
		[]string{"/ip4/0.0.0.0/tcp/0", "/ip4/0.0.0.0/udp/0/quic-v1"})
	if err != nil {
		return err
	}
	defer h.Close()
	v := agent.NewValidator(c, key, h, store, llmOptions(cmd))
	v.Logger = logger
	v.Access = access
	// Canaries (node/agent/canary.go): salts and answers kept here.
	v.Canary.Dir = filepath.Join(home, "validator-agent", "canaries")
	defer v.Close()
	logger.Info("validator agent running", "operator", v.Address().Hex(), "peer", h.ID())
	return v.Run(ctx)
}

// ---- ogpu job run / result

func newJobCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "job", Short: "Run jobs on the market and read their results"}
	run := &cobra.Command{
		Use:   "run",
		Short: "Post an LLM, encrypted pipeline or fine-tune job, serve its input to the winners, wait for the verified result",
		Long: `Post a job from --from's account and follow it to the end: the sealed-bid
auction, the award, the input served over libp2p to the winning providers
only, the result hashes committed and revealed on chain, the verification
outcome, the price paid and the refund. Results go to stdout, progress to
stderr.

--kind inference (default): an LLM generation of --prompt; the text is
streamed from the first winner as it is generated. With --model a local GGUF
file the job is planned: the whole model where --redundancy providers can
hold it, else split by layers into the fewest stages the providers'
advertised memory holds; --stages K (and --at L1,L2) chooses the split, and
--stages 1 the whole model. A split job runs each stage on --redundancy
providers in replica chains, in lockstep; its output is the whole model's,
token for token. Split inference is not confidential: every stage provider
(and a dispute's validators) can read the prompt and the output.

--kind pipeline: --model is a pipeline model file (ogpu model train-example
writes one) and --input a JSON array of numbers, which is encrypted here
under your CKKS key (created under HOME/he on first use, or --he-keys DIR),
or a ciphertext file from ogpu he encrypt. Each stage runs on --redundancy
providers, each streaming its output ciphertext to the next stage's provider;
only the decrypted result, computed here, is ever in the clear.

--kind finetune: --model is the base GGUF file (F32, its output matrix not
tied to the embeddings; providers must serve that model) and --data a UTF-8
text file. The job is planned here first (the base model's tokenizer counts
the steps; bad input is refused before anything is posted), then posted with
--epochs, --lr-micro, --ctx (tokens per datapoint, a multiple of 32; default
64), --stride and --validation. The dataset is served to the winners only.
Training progress is streamed from the first winner (a bar, and the loss of
each epoch); once the chain paid for a model, it is fetched from the paid
providers, checked (its trained tensors must hash to the final hash the
chain settled, every other byte must be the base model's) and written to
--out/finetune-JOB.gguf; --sample PROMPT then shows its greedy continuation.
Only the LM head is trained (llama.cpp #24305).
The execute window is sized from the step count unless --execute-blocks is
given.`,
		Args: cobra.NoArgs,
		RunE: runJobRun,
	}
	f := run.Flags()
	f.String("model", "", "model: sha256 hash, or a GGUF file (its sha256 is computed); default: the model most providers serve")
	f.String("kind", "inference", "inference (an LLM generation), pipeline (encrypted CKKS stages) or finetune (train a model's head on --data)")
	f.String("prompt", "", "inference: the prompt")
	f.String("input", "", "pipeline: a JSON array of numbers or a file with one (encrypted here), or a ciphertext file")
	f.String("he-keys", "", "pipeline: directory with secret.key and eval.keys (default HOME/he/PRESET-wWIDTH, created if missing)")
	f.Uint64("max-tokens", 64, "tokens to generate at most")
	f.Int("stages", 0, "inference: split the model into K stages (1: whole; 0: plan from the providers' memory; needs --model FILE)")
	f.String("at", "", "inference with --stages: cut points, the first layer of every stage after the first, e.g. 2,4")
	f.Int("ctx", llm.DefaultContextSize, "split inference: the providers' context size (frame bound); finetune: tokens per datapoint, a multiple of 32 (default 64)")
	f.Uint16("redundancy", 2, "providers running the job (their results must agree)")
	f.String("short", "", shortFlagHelp)
	f.String("max-price", "5ogpu", "price cap per provider (pipeline: per stage replica)")
	f.Bool("pool", false, "inference: post a pool job: --max-price is the fixed reward per provider, provider agents claim it and the --redundancy-th claim awards it at once (claims until bid + reveal blocks)")
	f.StringArray("require", nil, "attribute requirement, e.g. gpu/vendor/nvidia or ram>=32Gi (repeatable)")
	f.String("class", "", "determinism class the providers must be in (finetune: the training class, default this build's)")
	addFinetuneFlags(f)
	f.Int("sample-tokens", 32, "finetune: tokens to generate for --sample")
	f.Uint64("bid-blocks", 5, "blocks of sealed bidding")
	f.Uint64("reveal-blocks", 5, "blocks of bid reveals")
	f.Uint64("execute-blocks", 40, "blocks from the award to the last result commitment")
	f.Uint64("verify-blocks", 20, "blocks to reveal results")
	f.String("from", "", "name or address of the paying key (required)")
	f.Duration("timeout", 10*time.Minute, "give up waiting after this long (the job goes on on chain)")
	addP2PFlags(run, []string{"/ip4/0.0.0.0/tcp/0", "/ip4/0.0.0.0/udp/0/quic-v1"})
	_ = run.MarkFlagRequired("from")

	result := &cobra.Command{
		Use:   "result JOB",
		Short: "Fetch the verified output of a settled job from the providers that produced it (pipeline: and decrypt it; finetune: the verified model to --out)",
		Args:  cobra.ExactArgs(1),
		RunE:  runJobResult,
	}
	result.Flags().String("from", "", "key to fetch with (the job's client; providers serve outputs to the job's parties only)")
	result.Flags().Duration("timeout", time.Minute, "give up after this long")
	result.Flags().String("he-keys", "", "pipeline: directory with the secret key (default HOME/he/PRESET-wWIDTH)")
	result.Flags().String("save", "", "pipeline: also write the output ciphertext to this file")
	result.Flags().String("out", "", "finetune: where to write the verified model (default finetune-JOB.gguf)")
	result.Flags().String("sample", "", "finetune: a prompt to generate from with the verified model (greedy, here)")
	result.Flags().Int("sample-tokens", 32, "finetune: tokens to generate for --sample")
	addP2PFlags(result, []string{"/ip4/0.0.0.0/tcp/0"})
	_ = result.MarkFlagRequired("from")
	cmd.AddCommand(run, result)
	return cmd
}

// clientSession unlocks --from and starts a client host with its key.
func clientSession(cmd *cobra.Command, ctx context.Context) (*agent.Client, func(), error) {
	w, err := openWallet(cmd)
	if err != nil {
		return nil, nil, err
	}
	key, err := unlockFrom(cmd, w)
	if err != nil {
		return nil, nil, err
	}
	c, err := dialNode(cmd)
	if err != nil {
		return nil, nil, err
	}
	home, _ := cmd.Flags().GetString("home")
	access, err := agent.OpenAccess(c, filepath.Join(expandHome(home), "client", "access"))
	if err != nil {
		return nil, nil, err
	}
	logger, _ := agentLogger(cmd.ErrOrStderr(), "warn")
	h, store, err := openHost(ctx, cmd, c, key, filepath.Join(expandHome(home), "client"), access, logger, nil)
	if err != nil {
		return nil, nil, err
	}
	cl := agent.NewClient(c, key, h, store, access)
	cl.Logger = logger
	return cl, func() { h.Close() }, nil
}

// modelArg resolves --model: a 0x/hex sha256, or a file whose hash and
// size are computed.
func modelArg(s string) (types.Hash, uint64, error) {
	if st, err := os.Stat(s); err == nil && !st.IsDir() {
		return blobstore.HashFile(s)
	}
	h, err := parseHash("model", s)
	if err != nil {
		return types.Hash{}, 0, fmt.Errorf("--model %q is neither a file nor a sha256 hash", s)
	}
	return h, 0, nil
}

func runJobRun(cmd *cobra.Command, _ []string) error {
	f := cmd.Flags()
	t, _ := f.GetDuration("timeout")
	ctx, stop := waitCtx(cmd)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, t)
	defer cancel()
	pool, _ := f.GetBool("pool")
	switch kind, _ := f.GetString("kind"); kind {
	case market.KindPipeline:
		if pool {
			return errors.New("--pool: pool jobs run here are inference jobs (post a pipeline pool job with ogpu tx job post --mode pool)")
		}
		return runPipelineJob(ctx, cmd)
	case market.KindFinetune:
		return runFinetuneJob(ctx, cmd)
	case market.KindInference:
	default:
		return fmt.Errorf("--kind %q: use inference, pipeline or finetune", kind)
	}
	if p, _ := f.GetString("prompt"); p == "" {
		return errors.New("--prompt is required for an inference job")
	}
	var j agent.LLMJob
	var err error
	modelStr, _ := f.GetString("model")
	if modelStr == "" {
		c, err := dialNode(cmd)
		if err != nil {
			return err
		}
		if j.Model, err = c.PopularModel(ctx); err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "model %x (served by the most providers; choose with --model)\n", j.Model)
	} else if j.Model, j.ModelSize, err = modelArg(modelStr); err != nil {
		return err
	}
	j.Prompt, _ = f.GetString("prompt")
	j.MaxTokens, _ = f.GetUint64("max-tokens")
	if j.Redundancy, j.MaxPrice, j.Req, j.Windows, err = jobTerms(cmd); err != nil {
		return err
	}
	j.Short, _ = f.GetString("short")
	if pool {
		j.Mode = market.ModePool
	}
	if ranges, err := splitRanges(ctx, cmd, modelStr, j.Redundancy); err != nil {
		return err
	} else if ranges != nil {
		if pool {
			return errors.New("--pool: a split job is awarded by auction here (an account wins one slot across its stages); drop --pool or --stages")
		}
		return runSplitJob(ctx, cmd, modelStr, ranges, j)
	}
	cl, closeFn, err := clientSession(cmd, ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	progress, onText, done := streamText(cmd, j.Prompt)
	res, err := cl.RunLLM(ctx, j, progress, onText)
	done()
	if err != nil {
		return err
	}
	return printJobResult(cmd, res)
}

// streamText prints a job's progress to stderr and its text to stdout as
// it streams (after the prompt, unless the output is JSON), keeping the
// two apart; done ends the text's line.
func streamText(cmd *cobra.Command, prompt string) (progress agent.Progress, onText func(string), done func()) {
	errw, out := cmd.ErrOrStderr(), cmd.OutOrStdout()
	asJSON, streaming := jsonOutput(cmd), false
	progress = func(format string, a ...any) {
		if streaming {
			fmt.Fprintln(out)
			streaming = false
		}
		fmt.Fprintf(errw, format+"\n", a...)
	}
	onText = func(piece string) {
		if asJSON {
			return
		}
		if !streaming {
			fmt.Fprint(out, prompt)
			streaming = true
		}
		fmt.Fprint(out, piece)
	}
	done = func() {
		if streaming {
			fmt.Fprintln(out)
		}
	}
	return progress, onText, done
}

func printJobResult(cmd *cobra.Command, res *agent.LLMResult) error {
	out := cmd.OutOrStdout()
	if jsonOutput(cmd) {
		return output(cmd, res, nil)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "job %d %s: result %x\n", res.Job, res.Outcome, res.Result)
	if res.Overruled {
		fmt.Fprintf(out, "the streamed text was overruled; the verified text is:\n%s\n", res.Text)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "paid %s to providers, refunded %s, compensation %s, validator fee %s; %d blocks, %s\n",
		types.FormatAmount(res.Paid), types.FormatAmount(res.Refunded), types.FormatAmount(res.Compensated),
		types.FormatAmount(res.ValidatorFee), res.Completed-res.Posted, res.Elapsed.Round(time.Millisecond))
	return nil
}

func runJobResult(cmd *cobra.Command, args []string) error {
	id, err := strconv.ParseUint(args[0], 10, 64)
	if err != nil {
		return fmt.Errorf("job id %q: %w", args[0], err)
	}
	t, _ := cmd.Flags().GetDuration("timeout")
	ctx, stop := waitCtx(cmd)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, t)
	defer cancel()
	cl, closeFn, err := clientSession(cmd, ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	j, err := cl.Chain.Job(ctx, id)
	if err != nil {
		return err
	}
	switch j.Kind {
	case market.KindPipeline:
		return pipelineResult(ctx, cmd, cl, id)
	case market.KindFinetune:
		return finetuneResult(ctx, cmd, cl, id)
	}
	text, err := cl.FetchText(ctx, id)
	if err != nil {
		return err
	}
	return output(cmd, map[string]any{"job": id, "text": text}, func(w io.Writer) { fmt.Fprintln(w, text) })
}

func jsonOutput(cmd *cobra.Command) bool {
	f, _ := cmd.Flags().GetString("output")
	return f == "json"
}

// progressBar draws a one-line bar per model fetch on w:
// "model 270cba1b… [##########          ]  52%  0.6/1.2 MB".
func progressBar(w io.Writer) func(types.Hash, int64, int64) {
	var mu sync.Mutex
	last := map[types.Hash]int64{}
	return func(h types.Hash, done, total int64) {
		mu.Lock()
		defer mu.Unlock()
		if total <= 0 {
			return
		}
		pct := done * 100 / total
		if prev, ok := last[h]; ok && pct == prev && done != total {
			return
		}
		last[h] = pct
		n := int(pct / 5)
		fmt.Fprintf(w, "\rmodel %x… [%s%s] %3d%%  %.1f/%.1f MB", h[:4], strings.Repeat("#", n), strings.Repeat(" ", 20-n),
			pct, float64(done)/1e6, float64(total)/1e6)
		if done == total {
			fmt.Fprintln(w)
		}
	}
}
