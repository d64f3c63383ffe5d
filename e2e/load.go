package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/ogpu-network/ogpu/node/agent"
)

// Load posts LLM jobs continuously, as users would: `ogpu job run`
// processes, one at a time per client account, through the unperturbed
// nodes, until Max jobs were started or Stop.
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
}

// LoadResult is one `ogpu job run`: its result, or why it failed.
type LoadResult struct {
	Client  string
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

func (l *Load) client(i int) {
	defer l.wg.Done()
	n := l.n
	for k := 0; l.next(); k++ {
		// node0 and node1 are never perturbed: a client's own node being
		// down is its operator's problem, not the protocol's.
		args := []string{"--home", n.clientHome(i), "--password-file", n.password, "--node", n.RPC[i%2],
			"job", "run", "--from", clientName(i), "--model", n.Model, "--prompt", prompts[(i+k)%len(prompts)], "--max-tokens", "16",
			"--stages", "1", "--redundancy", "2", "--max-price", "5ogpu", "--bid-blocks", "4", "--reveal-blocks", "3",
			"--execute-blocks", "40", "--verify-blocks", "20", "--listen", "/ip4/127.0.0.1/tcp/0", "--timeout", "4m", "-o", "json"}
		ctx, cancel := context.WithTimeout(l.ctx, 5*time.Minute)
		cmd := exec.CommandContext(ctx, n.ogpuBin, args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		cancel()
		r := LoadResult{Client: clientName(i)}
		var res agent.LLMResult
		switch {
		case err != nil:
			r.Err = fmt.Sprintf("%v: %s", err, lastLine(stderr.String()))
		case json.Unmarshal(out, &res) != nil:
			r.Err = fmt.Sprintf("unreadable result %q", out)
		default:
			r.Job, r.Outcome = res.Job, res.Outcome
		}
		l.mu.Lock()
		l.results = append(l.results, r)
		l.mu.Unlock()
		n.T.Logf("load: %s job %d: %s%s", r.Client, r.Job, r.Outcome, r.Err)
		select {
		case <-l.stop:
			return
		default:
		}
	}
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

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
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
