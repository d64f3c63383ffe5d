package cli

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/holiman/uint256"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/ogpu-network/ogpu/gateway"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/metrics"
	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/types"
)

// newGatewayCmd is ogpu gateway: flags and the [gateway] table of
// config.toml become a gateway.Config and a gateway.JobConfig; the gateway
// package does the rest.
func newGatewayCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "Serve the network as an OpenAI-compatible API on 127.0.0.1:8080, paid from --from's account",
		Long: `Serve GET /v1/models, POST /v1/chat/completions and POST /v1/completions
(streaming or not) for OpenAI clients: the official SDKs, LiteLLM, chat UIs,
curl, paid from --from's account.

Session mode (--mode session, or auto, the default): one auction opens a
session of --session-redundancy providers per model, its budget locked in
escrow; requests then go straight to those providers over libp2p, paid by
signed vouchers with no transaction per request, every request to each
lane and the outputs compared. The next session is opened before the
current one runs low, and the old one closed when drained. Counting tokens
needs the model's file (--model NAME=FILE.gguf, or the model in the
client's blob store). In auto mode a request no session can serve runs in
job mode and says why (ogpu.fallback).

Job mode (--mode job): each request becomes one on-chain LLM job:
providers bid, the winners run it, their results are compared, and only
verified text is returned (streams send the first winner's tokens as they
come, and end with an error event if the verified text differs).

Every answer carries usage.cost (oGPU) and an "ogpu" object with the mode,
the job or session, providers, prices and what was charged.

Clients authenticate with Authorization: Bearer KEY, the key in
HOME/gateway.key (made on first start, mode 0600):

  export OPENAI_BASE_URL=http://127.0.0.1:8080/v1
  export OPENAI_API_KEY=$(cat ~/.ogpu/gateway.key)

Spending is capped per request (the worst case: every provider's price cap,
the validator fee and the transaction fee) and per UTC day (persisted in
HOME/gateway-ledger.json); a request beyond either is refused with 402 before
anything is posted. Requests with a Host header other than localhost,
127.0.0.1, [::1] or an --allow-host, and bodies that are not JSON, are
refused; no CORS header is sent unless --cors-origin names the page.

Settings come from flags, then OGPU_GATEWAY_* environment variables, then
the [gateway] table of HOME/config.toml (keys as the flag names).`,
		Args: cobra.NoArgs,
		RunE: runGateway,
	}
	f := cmd.Flags()
	f.String("from", "", "name or address of the paying key in the wallet (required)")
	f.String("addr", gateway.DefaultListen, "HTTP address to serve on (loopback unless you mean otherwise)")
	addMetricsFlag(cmd, metricsGatewayListen)
	f.StringArray("allow-host", nil, "host name accepted in the Host header besides localhost, 127.0.0.1, [::1] (repeatable)")
	f.StringArray("cors-origin", nil, "web page origin allowed to call the API, e.g. http://localhost:3000 (repeatable; none by default)")
	f.StringArray("model", nil, "model clients may name: NAME=sha256:HEX, NAME=FILE.gguf or FILE.gguf (named after the file); a local file gives the chat template, context and tokenizer (repeatable)")
	f.StringArray("template", nil, "NAME=TEMPLATE: render NAME's chats with plain or a llama.cpp template (chatml, llama3, ...) instead of the model's own (repeatable)")
	f.Uint64("max-tokens", gateway.DefaultMaxTokens, "max_tokens when a request gives none")
	f.Uint64("context", 0, "the providers' context in tokens (default 2048, what ogpud provider run loads)")
	f.String("max-per-request", types.FormatAmount(gateway.DefaultMaxPerRequest), "cap on what one request may cost at worst")
	f.String("budget-per-day", types.FormatAmount(gateway.DefaultBudgetPerDay), "cap on what all requests of one UTC day may cost")
	f.Int("max-concurrent", gateway.DefaultMaxConcurrent, "requests in flight at most (beyond: 429)")
	f.Duration("retry-window", gateway.DefaultRetryWindow, "a retried request (SDK retry header or Idempotency-Key) within this long after the first ended replays its answer instead of paying again")
	f.Uint16("redundancy", 2, "providers running each request (their results are compared)")
	f.String("max-price-base", "0.2ogpu", "price cap per provider per request, plus --max-price-per-token × max_tokens")
	f.String("max-price-per-token", "0.1ogpu", "price cap per provider per token of max_tokens")
	f.StringArray("require", nil, "provider attribute requirement, e.g. gpu/vendor/nvidia or ram>=32Gi (repeatable)")
	f.String("class", "", "determinism class the providers must be in")
	f.String("min-stake", "0ogpu", "stake the providers must have bonded beyond the minimum")
	f.Uint64("bid-blocks", gateway.DefaultJobWindows.Bid, "blocks of sealed bidding per job")
	f.Uint64("reveal-blocks", gateway.DefaultJobWindows.Reveal, "blocks of bid reveals per job")
	f.Uint64("execute-blocks", gateway.DefaultJobWindows.Execute, "blocks from the award to the last result commitment")
	f.Uint64("verify-blocks", gateway.DefaultJobWindows.Verify, "blocks to reveal results")
	f.String("mode", "auto", "session (requests paid by vouchers on a leased session), job (one on-chain job per request), or auto (session, with job mode when no session can be opened)")
	f.Bool("pool", false, "in job mode, post pool jobs (a fixed reward of --max-price-* per replica, claimed on sight) instead of auctions")
	f.Uint16("session-redundancy", 2, "lanes of a session: providers running each request (their outputs are compared)")
	f.String("session-budget", types.FormatAmount(gateway.DefaultSessionBudget), "budget per lane of a session (opening locks lanes × budget; what is not earned comes back after the close)")
	f.String("session-max-price", types.FormatAmount(gateway.DefaultSessionMaxPrice), "price cap per output token in a session's auction")
	f.Uint64("session-input-price-bps", gateway.DefaultSessionInputBps, "price of a prompt token as a share of an output token, in 1/10000")
	f.Uint64("session-blocks", gateway.DefaultSessionBlocks, "blocks a session serves from its award")
	f.Uint64("session-grace", gateway.DefaultSessionGrace, "blocks after a session for the providers' last redemptions")
	f.Uint64("session-renew-requests", gateway.DefaultSessionRenewRequests, "open the next session when the current one can pay fewer requests like the last")
	f.Uint64("session-renew-blocks", gateway.DefaultSessionRenewBlocks, "open the next session when the current one expires within this many blocks")
	f.Uint64("session-audit-bps", gateway.DefaultGatewayAuditBps, "answers per 10000 asked again as a job (in auto mode) to check the session's providers; a lane that answered otherwise is disputed on chain (0: no audits)")
	f.Duration("session-retry", gateway.DefaultSessionRetryOpenAfter, "after a session could not be opened, serve requests without one (job mode in auto) this long before trying again")
	f.String("log-level", "info", "debug, info, warn or error")
	addP2PFlags(cmd, []string{"/ip4/0.0.0.0/tcp/0", "/ip4/0.0.0.0/udp/0/quic-v1"})
	return cmd
}

// gatewayFlagsFromConfig fills the gateway flags not given on the command
// line from OGPU_GATEWAY_* and the [gateway] table of HOME/config.toml.
func gatewayFlagsFromConfig(cmd *cobra.Command) error {
	v := viper.New()
	v.SetEnvPrefix("OGPU_GATEWAY")
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	v.AutomaticEnv()
	file := filepath.Join(homeFlag(cmd), "config.toml")
	if _, err := os.Stat(file); err == nil {
		v.SetConfigFile(file)
		if err := v.ReadInConfig(); err != nil {
			return fmt.Errorf("cannot read config %s: %w", file, err)
		}
	}
	var errs []error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed || f.Name == "home" {
			return
		}
		key := "gateway." + f.Name
		_ = v.BindEnv(key, "OGPU_GATEWAY_"+strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_")))
		if !v.IsSet(key) {
			return
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			if err := sv.Replace(v.GetStringSlice(key)); err != nil {
				errs = append(errs, fmt.Errorf("gateway.%s: %w", f.Name, err))
			}
			return
		}
		if err := f.Value.Set(v.GetString(key)); err != nil {
			errs = append(errs, fmt.Errorf("gateway.%s in %s or the environment: %w", f.Name, file, err))
		}
	})
	return errors.Join(errs...)
}

// gatewaySettings are the gateway's literals from the flags.
type gatewaySettings struct {
	cfg  gateway.Config
	jc   gateway.JobConfig
	sc   gateway.SessionConfig
	mode string
}

// gatewayConfig turns the flags into the gateway's literals.
func gatewayConfig(cmd *cobra.Command) (gatewaySettings, error) {
	cfg, jc, err := gatewayJobConfig(cmd)
	gs := gatewaySettings{cfg: cfg, jc: jc}
	if err != nil {
		return gs, err
	}
	f := cmd.Flags()
	gs.mode, _ = f.GetString("mode")
	switch gs.mode {
	case "session", "job", "auto":
	default:
		return gs, fmt.Errorf("--mode %q: want session, job or auto", gs.mode)
	}
	gs.jc.Pool, _ = f.GetBool("pool")
	sc := gateway.SessionConfig{Req: jc.Req}
	sc.Redundancy, _ = f.GetUint16("session-redundancy")
	for name, dst := range map[string]**uint256.Int{"session-budget": &sc.Budget, "session-max-price": &sc.MaxPrice} {
		s, _ := f.GetString(name)
		a, err := types.ParseAmount(s)
		if err != nil {
			return gs, fmt.Errorf("--%s: %w", name, err)
		}
		*dst = a
	}
	sc.InputPriceBps, _ = f.GetUint64("session-input-price-bps")
	sc.Blocks, _ = f.GetUint64("session-blocks")
	sc.Grace, _ = f.GetUint64("session-grace")
	sc.RenewRequests, _ = f.GetUint64("session-renew-requests")
	sc.RenewBlocks, _ = f.GetUint64("session-renew-blocks")
	sc.RetryOpenAfter, _ = f.GetDuration("session-retry")
	sc.AuditBps, _ = f.GetUint64("session-audit-bps")
	sc.Windows = market.Windows{Bid: jc.Windows.Bid, Reveal: jc.Windows.Reveal}
	sc.LedgerDir = filepath.Join(homeFlag(cmd), "client", "sessions")
	gs.sc = sc
	if gs.mode != "job" {
		if err := sc.Validate(); err != nil {
			return gs, err
		}
	}
	return gs, nil
}

// gatewayJobConfig turns the flags into the gateway's and job mode's
// literals.
func gatewayJobConfig(cmd *cobra.Command) (gateway.Config, gateway.JobConfig, error) {
	var cfg gateway.Config
	var jc gateway.JobConfig
	if err := gatewayFlagsFromConfig(cmd); err != nil {
		return cfg, jc, err
	}
	f := cmd.Flags()
	home := homeFlag(cmd)
	amount := func(name string) (*uint256.Int, error) {
		s, _ := f.GetString(name)
		a, err := types.ParseAmount(s)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", name, err)
		}
		return a, nil
	}
	var err error
	cfg.Listen, _ = f.GetString("addr")
	cfg.KeyFile = filepath.Join(home, "gateway.key")
	cfg.LedgerFile = filepath.Join(home, "gateway-ledger.json")
	cfg.AllowedHosts, _ = f.GetStringArray("allow-host")
	cfg.CORSOrigins, _ = f.GetStringArray("cors-origin")
	models, _ := f.GetStringArray("model")
	templates, _ := f.GetStringArray("template")
	if cfg.Models, err = gateway.ParseModelSpecs(models, templates); err != nil {
		return cfg, jc, err
	}
	cfg.DefaultMaxTokens, _ = f.GetUint64("max-tokens")
	cfg.ContextLength, _ = f.GetUint64("context")
	if cfg.MaxPerRequest, err = amount("max-per-request"); err != nil {
		return cfg, jc, err
	}
	if cfg.BudgetPerDay, err = amount("budget-per-day"); err != nil {
		return cfg, jc, err
	}
	cfg.MaxConcurrent, _ = f.GetInt("max-concurrent")
	cfg.RetryWindow, _ = f.GetDuration("retry-window")
	jc.Redundancy, _ = f.GetUint16("redundancy")
	if jc.MaxPriceBase, err = amount("max-price-base"); err != nil {
		return cfg, jc, err
	}
	if jc.MaxPricePerToken, err = amount("max-price-per-token"); err != nil {
		return cfg, jc, err
	}
	if jc.Req.MinStake, err = amount("min-stake"); err != nil {
		return cfg, jc, err
	}
	jc.Req.Attributes, _ = f.GetStringArray("require")
	jc.Req.Class, _ = f.GetString("class")
	w := market.Windows{}
	w.Bid, _ = f.GetUint64("bid-blocks")
	w.Reveal, _ = f.GetUint64("reveal-blocks")
	w.Execute, _ = f.GetUint64("execute-blocks")
	w.Verify, _ = f.GetUint64("verify-blocks")
	jc.Windows = w
	if err := cfg.Validate(); err != nil {
		return cfg, jc, err
	}
	return cfg, jc, jc.Validate()
}

func runGateway(cmd *cobra.Command, _ []string) error {
	gs, err := gatewayConfig(cmd)
	if err != nil {
		return err
	}
	cfg := gs.cfg
	if from, _ := cmd.Flags().GetString("from"); from == "" {
		return errors.New("--from is required: the wallet key that pays for the requests")
	}
	level, _ := cmd.Flags().GetString("log-level")
	logger, err := agentLogger(cmd.ErrOrStderr(), level)
	if err != nil {
		return err
	}
	quietLlama(level)
	cfg.Logger = logger
	if cfg.Wrap, err = gatewayMetricsWrap(cmd); err != nil {
		return err
	}
	if cfg.Wrap != nil {
		cfg.OnSpent = metrics.AddGatewaySpent
	}
	ctx, stop := waitCtx(cmd)
	defer stop()
	cl, closeFn, err := clientSession(cmd, ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	cl.Logger = logger
	gs.sc.Logger = logger
	backend, what, err := gatewayBackend(cl, gs)
	if err != nil {
		return err
	}
	srv, err := gateway.New(cfg, cl.Chain, cl.Store, backend)
	if err != nil {
		return err
	}
	if sb, ok := backend.(*gateway.SessionBackend); ok && cfg.Wrap != nil {
		metrics.WatchGatewaySessions(func() int { return len(sb.Sessions()) })
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		srv.Close()
		return fmt.Errorf("cannot listen on %s: %w (choose another with --addr)", cfg.Listen, err)
	}
	if err := serveMetrics(ctx, cmd); err != nil {
		_ = ln.Close()
		srv.Close()
		return err
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "ogpu gateway: http://%s/v1, paying from %s (%s)\n", ln.Addr(), cl.Address().Hex(), what)
	fmt.Fprintf(w, "  export OPENAI_BASE_URL=http://%s/v1\n  export OPENAI_API_KEY=$(cat %s)\n", ln.Addr(), cfg.KeyFile)
	fmt.Fprintf(w, "  caps: %s per request, %s per UTC day (ledger %s)\n", types.FormatAmount(cfg.MaxPerRequest), types.FormatAmount(cfg.BudgetPerDay), cfg.LedgerFile)
	return srv.Serve(ctx, ln, 10*time.Second)
}

// gatewayBackend makes the backend --mode asks for (gateway.NewBackend).
func gatewayBackend(cl *agent.Client, gs gatewaySettings) (gateway.Backend, string, error) {
	return gateway.NewBackend(cl, gs.mode, gs.jc, gs.sc)
}
