package agent

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	cmtbytes "github.com/cometbft/cometbft/libs/bytes"
	rpcclient "github.com/cometbft/cometbft/rpc/client"
	ctypes "github.com/cometbft/cometbft/rpc/core/types"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// errorLog records the messages of the error records a logger writes.
type errorLog struct {
	mu   sync.Mutex
	msgs []string
}

func (l *errorLog) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelError }
func (l *errorLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
	l.mu.Lock()
	l.msgs = append(l.msgs, b.String())
	l.mu.Unlock()
	return nil
}
func (l *errorLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *errorLog) WithGroup(string) slog.Handler      { return l }

// TestSaveSecretsConcurrent: the provider saves its bid secrets from many
// goroutines at once (bids on several jobs, reveals, commits). Every save
// must succeed, and the file left must hold every secret: a restart reads
// it to reveal. The soak found "cannot save bid secrets: rename
// secrets.json.tmp" 20 times on one provider: two saves shared one
// temporary file, the second rename found it gone, and a bid sealed
// between them could be lost (its deposit forfeited at the reveal).
func TestSaveSecretsConcurrent(t *testing.T) {
	dir := t.TempDir()
	log := &errorLog{}
	newProv := func() *Provider {
		return &Provider{cfg: ProviderConfig{StateDir: dir}, log: slog.New(log),
			bids: map[taskKey]*bidSecret{}, results: map[taskKey]*resultSecret{}}
	}
	p := newProv()
	const workers, saves = 8, 25
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range saves {
				p.mu.Lock()
				p.bids[taskKey{uint64(w), uint16(i)}] = &bidSecret{Price: uint256.NewInt(uint64(i + 1)), Salt: randomHash()}
				p.mu.Unlock()
				p.saveSecrets()
			}
		}()
	}
	wg.Wait()
	if len(log.msgs) > 0 {
		t.Fatalf("%d saves failed, the first: %s", len(log.msgs), log.msgs[0])
	}
	q := newProv()
	q.loadSecrets()
	if len(q.bids) != workers*saves {
		t.Fatalf("the saved file holds %d bid secrets, want %d: a stale save was written last", len(q.bids), workers*saves)
	}
}

// soakJobs are the jobs a provider held when it restarted in the soak,
// as the node lists them: pipeline job 19, whose stage 0 runs and whose
// stage 2 (won by the same provider) waits for stage 1 to settle, next to
// slots that need nothing more of it.
func soakJobs(me, other types.Address) []chain.JobView {
	slot := func(a types.Address) chain.SlotView { return chain.SlotView{Provider: a} }
	committed := chain.SlotView{Provider: me, Committed: true}
	noShow := chain.SlotView{Provider: me, NoShow: true}
	job := func(id uint64, kind string, state market.JobState, tasks ...chain.TaskView) chain.JobView {
		return chain.JobView{Job: &market.Job{ID: id, Kind: kind, State: state}, Tasks: tasks}
	}
	task := func(stage uint16, status verifier.TaskStatus, cd uint64, slots ...chain.SlotView) chain.TaskView {
		return chain.TaskView{Stage: stage, Status: status.String(), CommitDeadline: cd, Slots: slots}
	}
	return []chain.JobView{
		job(19, market.KindPipeline, market.JobRunning,
			task(0, verifier.TaskExecuting, 238, slot(me), slot(other)),
			task(1, verifier.TaskWaiting, 0, slot(other), slot(other)),
			task(2, verifier.TaskWaiting, 0, slot(other), slot(me))),
		job(20, market.KindInference, market.JobRunning, task(0, verifier.TaskExecuting, 240, committed, slot(other))),
		job(21, market.KindInference, market.JobRunning, task(0, verifier.TaskExecuting, 240, noShow, slot(other))),
		job(22, market.KindInference, market.JobRunning, task(0, verifier.TaskExecuting, 200, slot(me), slot(other))), // window over
		job(23, market.KindPipeline, market.JobRunning,
			task(0, verifier.TaskSettled, 150, slot(me), slot(other)),
			task(1, verifier.TaskWaiting, 0, committed, slot(other))),
		job(24, market.KindInference, market.JobCompleted, task(0, verifier.TaskSettled, 150, slot(me))),
		job(25, market.KindFinetune, market.JobRunning, task(0, verifier.TaskExecuting, 240, slot(me))),
		job(26, market.KindInference, market.JobRunning, task(0, verifier.TaskExecuting, 240, slot(other), slot(me))),
	}
}

// TestResumeTasksEveryStage: a restarted provider resumes every slot it
// holds that still needs its work, whatever the stage: the running stage
// 0 of pipeline job 19 and its waiting stage 2 (the soak: job 19's stage
// 2 forgotten after a restart, its provider slashed as a no-show at
// height 294), and the executing inference task 26; not what it committed,
// missed, cannot commit any more, or that another mechanism resumes.
func TestResumeTasksEveryStage(t *testing.T) {
	me, other := types.Address{1}, types.Address{2}
	got := resumeTasks(soakJobs(me, other), me, 230)
	want := []taskKey{{19, 0}, {19, 2}, {26, 0}}
	var keys []taskKey
	for _, r := range got {
		keys = append(keys, r.taskKey)
	}
	if !slices.Equal(keys, want) {
		t.Fatalf("resumed %v, want %v", keys, want)
	}
}

// downNode is a node that is down for its first queries, then lists
// jobs: a fake of the RPC client (only the methods resume calls), since
// what is tested is the agent's answer to the outage.
type downNode struct {
	rpcclient.Client
	jobs []byte
	mu   sync.Mutex
	down int // queries still refused
	asks int
}

func (d *downNode) ABCIQueryWithOptions(_ context.Context, path string, _ cmtbytes.HexBytes, _ rpcclient.ABCIQueryOptions) (*ctypes.ResultABCIQuery, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asks++
	if d.down > 0 {
		d.down--
		return nil, errors.New("dial tcp 127.0.0.1:26657: connect: connection refused")
	}
	if !strings.HasPrefix(path, chain.QueryJobs) {
		return &ctypes.ResultABCIQuery{Response: abci.QueryResponse{Code: 1, Log: "not served by this fake: " + path}}, nil
	}
	return &ctypes.ResultABCIQuery{Response: abci.QueryResponse{Value: d.jobs, Height: 230}}, nil
}

func (d *downNode) Status(context.Context) (*ctypes.ResultStatus, error) {
	return &ctypes.ResultStatus{SyncInfo: ctypes.SyncInfo{LatestBlockHeight: 230}}, nil
}

// TestResumeWaitsForTheNode: a provider restarted while its node is down
// asks for its jobs until the node answers, then resumes its tasks (the
// soak: one refused listing and the resumed task was never run, its
// provider slashed as a no-show); if the agent stops first, it gives up
// without hanging.
func TestResumeWaitsForTheNode(t *testing.T) {
	me, other := types.Address{1}, types.Address{2}
	bz, err := json.Marshal(soakJobs(me, other))
	if err != nil {
		t.Fatal(err)
	}
	prov := func(d *downNode) *Provider {
		return &Provider{cfg: ProviderConfig{Chain: &node.Client{RPC: d}}, addr: me,
			log: slog.New(slog.NewTextHandler(testWriter{t, "prov"}, nil))}
	}
	d := &downNode{jobs: bz, down: 3}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	got, err := prov(d).resumable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.asks != 4 || len(got) != 3 || got[1].taskKey != (taskKey{19, 2}) {
		t.Fatalf("asked %d times, resumed %+v: want 4 asks (3 refused) and the 3 tasks", d.asks, got)
	}

	d = &downNode{jobs: bz, down: 1 << 30}
	ctx, cancel = context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if got, err := prov(d).resumable(ctx); err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("node never back: resumed %v, err %v; want the context's end", got, err)
	}
}

// TestDueReveals: a bid is revealed once its job's last bid block is
// committed (the chain takes the reveal in the next block), not a block
// later on the job_revealing event; never twice, never past the window.
func TestDueReveals(t *testing.T) {
	bid := func(bidEnd, revealEnd uint64) *bidSecret {
		return &bidSecret{Price: uint256.NewInt(1), BidEnd: bidEnd, RevealEnd: revealEnd}
	}
	bids := map[taskKey]*bidSecret{
		{1, 0}: bid(10, 13), {1, 1}: bid(10, 13), {1, 2}: bid(10, 13),
		{2, 0}: bid(12, 15),
		{3, 0}: {Price: uint256.NewInt(1)}, // saved by an older version: the event reveals it
	}
	if got := dueReveals(bids, 9); len(got) != 0 {
		t.Fatalf("at height 9 (bidding): %v, want nothing", got)
	}
	if got := dueReveals(bids, 10); !slices.Equal(got, []dueReveal{{1, 13}}) {
		t.Fatalf("once block 10 (job 1's BidEnd) is committed: %v, want job 1 (its three stages in one go)", got)
	}
	bids[taskKey{1, 0}].revealing = true
	bids[taskKey{1, 1}].Revealed = true
	if got := dueReveals(bids, 12); !slices.Equal(got, []dueReveal{{1, 13}, {2, 15}}) {
		t.Fatalf("at 12: %v, want job 1's last stage and job 2", got)
	}
	if got := dueReveals(bids, 13); !slices.Equal(got, []dueReveal{{2, 15}}) {
		t.Fatalf("at 13 (job 1's window closes with it): %v, want job 2 only", got)
	}
}
