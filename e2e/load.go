package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node/agent"
)

// Load posts jobs continuously, as users would: `ogpu job run` processes,
// one at a time per client account, until Max jobs were started or Stop.
// Client 1 (the second) alternates encrypted pipeline jobs (CKKS, the
// 3-stage example classifier on Net.Pipeline's inputs; its first job is
// one) and LLM jobs; the others post LLM jobs only.
type Load struct {
	n       *Net
	max     int
	stop    chan struct{}
	ctx     context.Context // cancelled on abort: running jobs are killed
	abort   context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	started int
	results []LoadResult
	// unposted counts the runs retried (see jobRun).
	unposted int
	// runs counts each client's `ogpu job run` processes, retries
	// included (names their logs).
	runs [maxClients]int
}

// LoadResult is one `ogpu job run`: its result, or why it failed.
type LoadResult struct {
	Client  string
	Kind    string // market.KindInference or market.KindPipeline
	Job     uint64
	Outcome string
	Err     string
}

// StartLoad starts clients (at most maxClients) posting jobs until max
// were started (max 0: until Stop).
func (n *Net) StartLoad(clients, max int) *Load {
	n.T.Helper()
	if clients < 1 || clients > maxClients {
		n.T.Fatalf("load: %d clients, want 1..%d", clients, maxClients)
	}
	l := &Load{n: n, max: max, stop: make(chan struct{})}
	l.ctx, l.abort = context.WithCancel(context.Background())
	for i := 0; i < clients; i++ {
		l.wg.Add(1)
		go l.client(i)
	}
	n.T.Cleanup(func() { l.abort(); l.Stop() })
	return l
}

// next reserves a job to start; false once Max were started or on Stop.
func (l *Load) next() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.stop:
		return false
	default:
	}
	if l.max > 0 && l.started >= l.max {
		return false
	}
	l.started++
	return true
}

// prompts are shared by the clients: two clients' jobs often have the same
// prompt, hence the same output blob at the same providers, and each must
// get its own verified result (TestSamePromptTwoClients in node/agent).
var prompts = []string{"Once upon a time", "The little dog", "One day, a girl named Lily", "Tom and his mom", "The sun was"}

// pipelineClient is the client that alternates LLM and pipeline jobs.
const pipelineClient = 1

func (l *Load) client(i int) {
	defer l.wg.Done()
	n := l.n
	for k := 0; l.next(); k++ {
		var r LoadResult
		if i == pipelineClient && k%2 == 0 {
			r = l.pipelineJob(i, k/2)
		} else {
			r = l.llmJob(i, k)
		}
		l.mu.Lock()
		l.results = append(l.results, r)
		l.mu.Unlock()
		n.T.Logf("load: %s %s job %d: %s%s", r.Client, r.Kind, r.Job, r.Outcome, r.Err)
		select {
		case <-l.stop:
			return
		default:
		}
	}
}

// windows are every load job's: short auctions, room to execute.
var windows = []string{"--redundancy", "2", "--max-price", "5ogpu", "--bid-blocks", "4", "--reveal-blocks", "3",
	"--execute-blocks", "40", "--verify-blocks", "20", "--listen", "/ip4/127.0.0.1/tcp/0", "--timeout", "4m", "-o", "json"}

// jobRun runs `ogpu job run` for client i with args and returns its
// stdout. Client i posts through node i%2 (node i%2+2 while that one is
// being perturbed, as a user whose node is down uses another), which is
// killed, paused and cut off in turn like every validator: a run must ride
// out its node's perturbation once its job is posted. A run that could not
// post its job because its node went down under it (or was still catching
// up) is retried (for up to 2 minutes) and counted in Unposted, not as a
// failure.
func (l *Load) jobRun(i int, args ...string) ([]byte, error) {
	n := l.n
	until := time.Now().Add(2 * time.Minute)
	for {
		v := n.clientNode(i)
		full := append([]string{"--home", n.clientHome(i), "--password-file", n.password, "--node", n.RPC[v],
			"--broadcast", n.RPC[(v+1)%len(n.RPC)], "job", "run", "--from", clientName(i)}, append(args, windows...)...)
		ctx, cancel := context.WithTimeout(l.ctx, 5*time.Minute)
		cmd := exec.CommandContext(ctx, n.ogpuBin, full...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		start := time.Now()
		out, err := cmd.Output()
		cancel()
		errText := stderr.String()
		l.keepRun(i, clientRun{Node: v, Args: full, Start: start, End: time.Now(), Err: err, Stdout: out, Stderr: errText})
		if err == nil {
			return out, nil
		}
		if unposted(errText) && l.ctx.Err() == nil && time.Now().Before(until) {
			l.mu.Lock()
			l.unposted++
			l.mu.Unlock()
			n.T.Logf("load: %s posted nothing through node%d (%s): retrying", clientName(i), v, lastLines(errText, 1))
			time.Sleep(time.Second)
			continue
		}
		return nil, fmt.Errorf("%v; its last lines:\n%s", err, lastLines(errText, failLines))
	}
}

// failLines is how many of a failed run's last stderr lines its error
// keeps (a panic's trace ends with the goroutine that panicked, not with
// what panicked).
const failLines = 20

// clientRun is one `ogpu job run` process.
type clientRun struct {
	Node       int // the validator it used
	Args       []string
	Start, End time.Time
	Err        error // how it exited; nil: status 0
	Stdout     []byte
	Stderr     string
}

// keepRun writes client i's run to OGPU_E2E_LOGS=DIR, if set, as
// DIR/clientN-run-NNN[-job-J].log (the temporary directory of the run goes
// with the test).
func (l *Load) keepRun(i int, r clientRun) {
	dir := os.Getenv(LogsEnv)
	if dir == "" {
		return
	}
	l.mu.Lock()
	l.runs[i]++
	k := l.runs[i]
	l.mu.Unlock()
	path, err := writeRunLog(dir, clientName(i), k, r)
	if err != nil {
		l.n.T.Logf("%s=%s: cannot keep %s's run %d: %v", LogsEnv, dir, clientName(i), k, err)
		return
	}
	if r.Err != nil {
		l.n.T.Logf("load: %s's failed run %d: %s", clientName(i), k, path)
	}
}

// postedJob matches the line `ogpu job run` prints once its job is
// posted.
var postedJob = regexp.MustCompile(`(?m)^posted (?:pipeline |pool )?job (\d+)`)

// writeRunLog writes run k of client to dir as client-run-NNN.log, with
// -job-J before .log once the run printed that it posted job J: a header
// (command, node, start, duration, exit), then its whole stderr and
// stdout. It returns the file's path.
func writeRunLog(dir, client string, k int, r clientRun) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	name := fmt.Sprintf("%s-run-%03d", client, k)
	if m := postedJob.FindStringSubmatch(r.Stderr); m != nil {
		name += "-job-" + m[1]
	}
	exit := "exit status 0"
	if r.Err != nil {
		exit = r.Err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s run %d through node%d: ogpu %s\n", client, k, r.Node, strings.Join(r.Args, " "))
	fmt.Fprintf(&b, "# started %s, ran %s: %s\n", r.Start.UTC().Format(time.RFC3339Nano), r.End.Sub(r.Start).Round(time.Millisecond), exit)
	fmt.Fprintf(&b, "# --- stderr (%d bytes)\n%s", len(r.Stderr), r.Stderr)
	if r.Stderr != "" && !strings.HasSuffix(r.Stderr, "\n") {
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "# --- stdout (%d bytes)\n%s", len(r.Stdout), r.Stdout)
	path := filepath.Join(dir, name+".log")
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}

// unposted says whether a failed run's stderr shows that it posted no job
// because its node did not answer, or refused the transaction while
// catching up after its restart (CometBFT: "endpoint is closed while node
// is catching up").
func unposted(stderr string) bool {
	posted := strings.Contains(stderr, "posted job") || strings.Contains(stderr, "posted pipeline job") || strings.Contains(stderr, "posted pool job")
	return !posted && (strings.Contains(stderr, "cannot reach node") || strings.Contains(stderr, "while node is catching up"))
}

// Unposted counts the runs retried because their node went down before
// they posted their job.
func (l *Load) Unposted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.unposted
}

// llmJob generates 16 tokens of a prompt, the whole model on each of 2
// providers.
func (l *Load) llmJob(i, k int) LoadResult {
	r := LoadResult{Client: clientName(i), Kind: market.KindInference}
	out, err := l.jobRun(i, "--model", l.n.Model, "--prompt", prompts[(i+k)%len(prompts)], "--max-tokens", "16", "--stages", "1")
	var res agent.LLMResult
	switch {
	case err != nil:
		r.Err = err.Error()
	case json.Unmarshal(out, &res) != nil:
		r.Err = fmt.Sprintf("unreadable result %q", out)
	default:
		r.Job, r.Outcome = res.Job, res.Outcome
	}
	return r
}

// pipelineJob runs the example classifier on test example k (of
// len(n.Pipeline.Inputs), in turn) as an encrypted 3-stage pipeline job,
// 2 providers a stage. The client decrypts the output: on a verified
// result its predicted class must be the plaintext model's (else the run
// counts as failed).
func (l *Load) pipelineJob(i, k int) LoadResult {
	pl := l.n.Pipeline
	r := LoadResult{Client: clientName(i), Kind: market.KindPipeline}
	out, err := l.jobRun(i, "--kind", "pipeline", "--model", pl.Model, "--input", pl.Inputs[k%len(pl.Inputs)])
	var res struct {
		Job             uint64
		Outcome         string
		Prediction      int  `json:"prediction"`
		PlainPrediction *int `json:"plaintext_prediction"`
	}
	switch {
	case err != nil:
		r.Err = err.Error()
	case json.Unmarshal(out, &res) != nil:
		r.Err = fmt.Sprintf("unreadable result %q", out)
	default:
		r.Job, r.Outcome = res.Job, res.Outcome
		if res.Outcome == "verified" && (res.PlainPrediction == nil || *res.PlainPrediction != res.Prediction) {
			r.Err = fmt.Sprintf("decrypted prediction %d, plaintext model's %v (input %s)", res.Prediction, res.PlainPrediction, pl.Inputs[k%len(pl.Inputs)])
		}
	}
	return r
}

// Stop starts no more jobs and waits for the running ones to end.
func (l *Load) Stop() {
	l.mu.Lock()
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.mu.Unlock()
	l.wg.Wait()
}

// Results are the finished runs so far.
func (l *Load) Results() []LoadResult {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]LoadResult(nil), l.results...)
}

// Done counts the finished runs.
func (l *Load) Done() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.results)
}

// lastLines is s's last n lines, without surrounding white space.
func lastLines(s string, n int) string {
	s = strings.TrimSpace(s)
	i := len(s)
	for ; n > 0 && i >= 0; n-- {
		i = strings.LastIndexByte(s[:i], '\n')
	}
	return s[i+1:]
}

// countLines counts the lines of the file at path containing s.
func countLines(path, s string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	k := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			k++
		}
	}
	return k
}
