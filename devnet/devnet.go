// Package devnet runs the whole oGPU market end to end in one process and
// prints every step: what `ogpud devnet` (and `make devnet`) shows.
//
// Run starts a single-validator CometBFT chain (chain ogpu-devnet, 200 ms
// blocks) in a temporary home, with demo accounts funded in genesis, and
// makes two transfers and a refused nonce replay. Its genesis audits every
// agreed task (audit_rate_bps 10000, so that the audits can be watched; a
// network audits 1 in 20) with a network's stake rule (a caught lie costs
// at least 20 × its price). It then starts a validator agent, three
// provider agents and a client (alice) on loopback libp2p and runs the
// market rounds in order:
//
//  1. an LLM job (stories260K on llama.cpp, two replicas) whose winners
//     agree, are audited and paid, beside a canary the validator agent
//     posts that looks like alice's job and settles on its known answer;
//  2. the same job with prov2 restarted as a liar: the validator's
//     re-generation differs from its output, and it is slashed and
//     tombstoned while alice still gets the verified text;
//  3. a cartel (audit.go): prov10 and prov11 lie the same way and underbid
//     everyone, so they hold both slots and their results agree; the
//     random audit drawn from the beacon re-executes the task, and both
//     are slashed and tombstoned while alice is compensated;
//  4. a lone bidder (audit.go): a job only prov12 can take (it asks for
//     more stake than the others have) runs on its one slot and is
//     audited before it is paid: "audited", not "agreed";
//  5. an encrypted 3-stage CKKS pipeline job that alice decrypts and
//     compares with the plaintext model;
//  6. a split inference job: the model cut into 2 layer slices, served by
//     four more providers (prov4 to prov7, two per stage, each running its
//     slice in a supervised worker process), run as 2 replica chains in
//     lockstep; prov5, in stage 0, nudges the residuals it sends, so the
//     text is still the whole model's but the chain finds the stage whose
//     outputs differ on the same input, the validator agent re-executes it
//     and the liar is slashed and tombstoned, while stage 1 of the honest
//     chain is audited and paid. Split inference is not confidential, and
//     the round says so;
//  7. the Ethereum bridge, against go-ethereum's simulated backend in this
//     process (the bridge is on from genesis, named at the address the
//     contract will have): the validator registers its bridge key, the
//     token and bridge are deployed with the chain's valset 0 and lock
//     what the genesis allocated outside the reserve; an Ethereum holder
//     deposits 50 oGPU for carol (who had none), credited once its block
//     is final and the validator attested it in a vote extension; carol
//     pays an LLM job with it and withdraws 20 oGPU to Ethereum, which the
//     validator signs, a relayer pays on Ethereum, and the attested
//     Withdrawn event closes; both chains' books are printed and must
//     agree (locked on Ethereum = 21M − the app-chain's reserve);
//  8. a job posted through the web console's form (console.go);
//  9. the OpenAI-compatible gateway (gateway.go): alice serves the
//     gateway on loopback in session mode; it buys a session from prov1
//     and prov3 by auction and answers two chat completions over HTTP
//     with vouchers and no transaction; prov3 restarts as a liar, the
//     third answer's lanes differ, the gateway disputes both receipts,
//     the validator agent judges them and the chain slashes prov3;
//  10. fine-tuning (finetune.go): prov8 and prov9 train alice's text and
//     agree; then prov9 perturbs one step and loses the step-bisection
//     game.
//
// The transcript has the chain's events and the agents' log lines as they
// happen, and the balances with the supply check (everything adds up to
// the cap) before the transfers, before the rounds and after each round.
// Nothing outside the temporary home is touched. Run returns a Report of
// what happened, for tests.
//
// To add a round, write it as a method of devnet in a file of its own
// (as llm.go and pipeline.go do), `func (d *devnet) xRound(report *Report)
// error`, and list it in Run's rounds. It prints its title with
// beginRound (which numbers it), runs its job through d.client on the
// agents of agents.go (d.va, d.provs, d.model), prints chain events with
// d.names() applied, records its result in a field of Report, and ends
// with printBalances("after round N"). A round that needs providers
// configured otherwise restarts them with stopProvider and
// startProvider(p, configure), as liarRound does; one that needs more
// providers makes them with newProvider, as cartelRound does (splitRound
// builds its own: its stores hold slices), with accounts funded in
// startChain's genesis; startProvider returns once the agent follows the
// chain, so a job posted next is one it sees. A
// goroutine of its own goes through goAgent, so that the agents' stop
// waits for it. Split stages run in child processes of this executable
// (runtime/stagehost): its main calls stagehost.MaybeServe first, as
// cmd/ogpud does and this package's TestMain does.
package devnet

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/ogpu-network/ogpu/console"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/types"
)

// Options configure Run.
type Options struct {
	// Keep keeps the temporary home.
	Keep bool
	// Model is the GGUF file the providers serve (default: the shared
	// stories260K.gguf, found by agent.FindModel).
	Model string
	// Threads per llama.cpp context (default 1: every agent runs its own
	// contexts on the same machine).
	Threads int
}

// Report is what the devnet did, for tests.
type Report struct {
	// Rounds are the LLM jobs of rounds 1 and 2.
	Rounds []*agent.LLMResult
	// Liar is the provider that lied in round 2; LiarSlashed whether the
	// chain slashed it.
	Liar        types.Address
	LiarSlashed bool
	Height      int64
	// Pipeline is the encrypted 3-stage job of round 5; Plaintext the same
	// model's output computed in the clear on the same input.
	Pipeline  *agent.PipelineResult
	Plaintext []float64
	// Canary is the canary the validator agent posted during round 1.
	Canary *agent.CanaryStatus
	// Cartel is round 3, the cartel caught by a random audit; Lone round
	// 4, the lone bidder audited before it is paid (audit.go).
	Cartel *CartelReport
	Lone   *LoneReport
	// Split is the split inference job of round 6.
	Split *SplitReport
	// Bridge is round 7's trip through the Ethereum bridge.
	Bridge *BridgeReport
	// Gateway is round 9: the OpenAI-compatible gateway over a session.
	Gateway *GatewayReport
	// Console is round 8: a job posted through the web console.
	Console *ConsoleReport
	// Finetune is round 10: fine-tune jobs, agreed and with a liar.
	Finetune *FinetuneReport
	// Metrics are the ogpu_app_* families scraped from the devnet's
	// /metrics after each round, summed over their labels.
	Metrics []map[string]float64
}

// devnet is one run: the chain, its accounts and, from startAgents on,
// the agents (agents.go). Rounds are its methods.
type devnet struct {
	// ctx is Run's context; from startAgents to stopAgents the agents'
	// one, which stopAgents cancels.
	ctx   context.Context
	w     io.Writer
	c     *node.Client
	home  string
	opts  Options
	accts []account
	// round is the number of the last round begun.
	round int
	// eth is the simulated Ethereum of the bridge round (bridge.go).
	eth *ethDevnet
	// metricsURL is where the devnet serves its ogpu_* series (metrics.go).
	metricsURL string
	// console serves the web console at consoleAddr (console.go).
	console     *console.Server
	consoleAddr net.Addr
	agents
}

// Run runs the devnet, printing to w: transfers, then the market rounds
// run by the agents. It stops at the first step that fails.
func Run(ctx context.Context, w io.Writer, opts Options) (*Report, error) {
	start := time.Now()
	home, err := os.MkdirTemp("", "ogpu-devnet-")
	if err != nil {
		return nil, err
	}
	if !opts.Keep {
		defer os.RemoveAll(home)
	}
	d := &devnet{ctx: ctx, w: w, home: home, opts: opts}
	n, err := d.startChain()
	defer d.eth.close()
	if err != nil {
		return nil, err
	}
	defer n.Close()
	if err := d.printBalances("before"); err != nil {
		return nil, err
	}
	if err := d.transfers(); err != nil {
		return nil, err
	}

	report := &Report{}
	if err := d.marketRounds(report, []func(*Report) error{
		d.agreedRound,
		d.liarRound,
		d.cartelRound,
		d.loneBidderRound,
		d.pipelineRound,
		d.splitRound,
		d.bridgeRound,
		d.consoleRound,
		d.gatewayRound,
		d.finetuneRound,
	}); err != nil {
		return nil, err
	}
	st, err := d.c.RPC.Status(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "\ndevnet done at height %d, app hash %X, in %s\n", st.SyncInfo.LatestBlockHeight, st.SyncInfo.LatestAppHash, time.Since(start).Round(time.Millisecond))
	if opts.Keep {
		fmt.Fprintf(w, "home kept at %s\n", home)
	}
	report.Height = st.SyncInfo.LatestBlockHeight
	return report, nil
}

// marketRounds starts the agents, runs rounds in order and stops the
// agents: every agent goroutine has stopped (and logged its last line)
// before it returns.
func (d *devnet) marketRounds(report *Report, rounds []func(*Report) error) error {
	defer d.stopAgents()
	if err := d.startAgents(); err != nil {
		return err
	}
	if err := d.startMetrics(); err != nil {
		return err
	}
	if err := d.startConsole(); err != nil {
		return err
	}
	for _, round := range rounds {
		if err := round(report); err != nil {
			return err
		}
		m, err := d.printMetrics(fmt.Sprintf("after round %d", d.round))
		if err != nil {
			return err
		}
		report.Metrics = append(report.Metrics, m)
	}
	return nil
}

// beginRound prints the title of the next round and returns its number.
func (d *devnet) beginRound(title string) int {
	d.round++
	fmt.Fprintf(d.w, "\n== round %d: %s\n", d.round, title)
	return d.round
}
