package pricing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/types"
)

// testJob is an inference job capped at 10 oGPU per replica, for 64 tokens.
func testJob() JobView {
	j := &market.Job{
		ID: 42, Client: types.BytesToAddress([]byte{0xc1}), Kind: market.KindInference, Mode: market.ModeAuction,
		Model: types.BytesToHash([]byte{0xab}), ModelSize: 1 << 20, Stages: 1, Redundancy: 2,
		MaxPrice: types.OGPU(10), MaxTokens: 64, Req: market.Requirements{Attributes: []string{"gpu/nvidia"}},
	}
	return NewJobView(j, 1234, Provider{Address: types.BytesToAddress([]byte{0x9a}).Hex(), Attributes: []string{"gpu/nvidia/h100"}, TokensPerSecond: 812.5})
}

// writeScript writes an executable /bin/sh script with body into dir.
func writeScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func amount(t *testing.T, s string) *uint256.Int {
	t.Helper()
	a, err := types.ParseAmount(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestNewJobView(t *testing.T) {
	j := testJob()
	if j.ID != 42 || j.Kind != "inference" || j.Mode != "auction" || j.MaxPrice != types.OGPU(10).Dec() || j.MaxTokens != 64 ||
		j.Height != 1234 || j.Model != strings.Repeat("0", 62)+"ab" || j.Client != types.BytesToAddress([]byte{0xc1}).Hex() ||
		!reflect.DeepEqual(j.Require, []string{"gpu/nvidia"}) || j.Provider.TokensPerSecond != 812.5 {
		t.Fatalf("%+v", j)
	}
	// Empty lists are [] in JSON, not null: scripts iterate them.
	bz, err := json.Marshal(NewJobView(&market.Job{}, 1, Provider{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"require":[]`, `"attributes":[]`, `"max_price":"0"`} {
		if !strings.Contains(string(bz), want) {
			t.Errorf("%s lacks %s", bz, want)
		}
	}
}

func TestPerToken(t *testing.T) {
	huge := new(uint256.Int).SetAllOne()
	tests := []struct {
		name      string
		s         PerToken
		maxTokens uint64
		maxPrice  string
		kind      string
		want      string // base units; "" when no bid
		errHas    string
	}{
		{name: "base plus tokens", s: PerToken{Base: uint256.NewInt(100), PerToken: uint256.NewInt(7)}, maxTokens: 64, maxPrice: "1000", want: "548"},
		{name: "no token budget counts one", s: PerToken{Base: uint256.NewInt(100), PerToken: uint256.NewInt(7)}, maxTokens: 0, maxPrice: "1000", want: "107"},
		{name: "at the cap", s: PerToken{PerToken: uint256.NewInt(10)}, maxTokens: 100, maxPrice: "1000", want: "1000"},
		{name: "nil is zero", s: PerToken{}, maxTokens: 5, maxPrice: "0", want: "0"},
		{name: "above the cap", s: PerToken{PerToken: uint256.NewInt(10)}, maxTokens: 101, maxPrice: "1000", errHas: "above its max price"},
		{name: "product overflows", s: PerToken{PerToken: huge}, maxTokens: 2, maxPrice: "1000", errHas: "overflows"},
		{name: "sum overflows", s: PerToken{Base: huge, PerToken: uint256.NewInt(1)}, maxTokens: 1, maxPrice: "1000", errHas: "overflows"},
		{name: "bad cap", s: PerToken{}, maxTokens: 1, maxPrice: "ten", errHas: "not a decimal amount"},
		{name: "pipeline stage", s: PerToken{Base: uint256.NewInt(100), PerToken: uint256.NewInt(7), PerStage: uint256.NewInt(300)}, kind: "pipeline", maxPrice: "1000", want: "300"},
		{name: "pipeline without a stage price", s: PerToken{Base: uint256.NewInt(100), PerToken: uint256.NewInt(7)}, kind: "pipeline", maxPrice: "1000", want: "107"},
		{name: "inference ignores the stage price", s: PerToken{Base: uint256.NewInt(100), PerToken: uint256.NewInt(7), PerStage: uint256.NewInt(300)}, maxTokens: 2, maxPrice: "1000", want: "114"},
		{name: "stage price above the cap", s: PerToken{PerStage: uint256.NewInt(1001)}, kind: "pipeline", maxPrice: "1000", errHas: "above its max price"},
		{name: "session: per output token, no base", s: PerToken{Base: uint256.NewInt(100), PerToken: uint256.NewInt(7)}, kind: "session", maxPrice: "10", want: "7"},
		{name: "session token price above the cap", s: PerToken{PerToken: uint256.NewInt(11)}, kind: "session", maxPrice: "10", errHas: "above its max price"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := testJob()
			j.MaxTokens, j.MaxPrice = tt.maxTokens, tt.maxPrice
			if tt.kind != "" {
				j.Kind = tt.kind
			}
			got, err := tt.s.Price(context.Background(), j)
			if tt.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("got %v, %v; want an error with %q", got, err, tt.errHas)
				}
				if tt.name != "bad cap" && !errors.Is(err, ErrNoBid) {
					t.Fatalf("%v is not ErrNoBid", err)
				}
				return
			}
			if err != nil || got.Dec() != tt.want {
				t.Fatalf("got %v, %v; want %s", got, err, tt.want)
			}
		})
	}
}

// TestScriptAnswers runs real scripts: their answers, refusals and failures.
func TestScriptAnswers(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("OGPU_PRICING_TEST_SECRET", "do not pass me on")
	tests := []struct {
		name   string
		body   string
		want   string // a price; "" for no bid or an error
		noBid  string // ErrNoBid with this in the message
		errHas []string
	}{
		{name: "ogpu", body: "echo 4.5ogpu", want: "4.5ogpu"},
		{name: "base units", body: "echo 4500000000000000000", want: "4.5ogpu"},
		{name: "json", body: `echo '{"price":"4.5ogpu"}'`, want: "4.5ogpu"},
		{name: "json number", body: `echo '{"price": 1000}'`, want: "1000"},
		{name: "json over lines", body: `printf '{\n  "price": "2ogpu"\n}\n'`, want: "2ogpu"},
		{name: "by max tokens", want: "64007",
			body: `tokens=$(sed -n 's/.*"max_tokens":\([0-9]*\).*/\1/p')
echo $((tokens * 1000 + 7))`},
		{name: "at the cap", body: "echo 10ogpu", want: "10ogpu"},
		{name: "minimal environment", want: "1ogpu",
			body: `if [ -n "$OGPU_PRICING_TEST_SECRET" ]; then echo "env leaked" >&2; exit 1; fi
[ -n "$PATH" ] && echo 1ogpu`},
		{name: "skip", body: `echo '{"skip":"all GPUs busy"}'`, noBid: "skipped: all GPUs busy"},
		{name: "skip without reason", body: `echo '{"skip":""}'`, noBid: "no reason given"},
		{name: "silent", body: "exit 0", noBid: "printed nothing"},
		{name: "garbage", body: "echo cheap", errHas: []string{`invalid amount "cheap"`}},
		{name: "decimal without denom", body: "echo 4.5", errHas: []string{`invalid amount "4.5"`}},
		{name: "negative", body: "echo -5", errHas: []string{`invalid amount "-5"`}},
		{name: "fraction of a base unit", body: "echo 0.0000000000000000001ogpu", errHas: []string{"at most 18 decimal places"}},
		{name: "over the cap", body: "echo 10.000000000000000001ogpu", errHas: []string{"above job 42's max price 10ogpu"}},
		{name: "two lines", body: "echo 1ogpu; echo 2ogpu", errHas: []string{"printed 2 lines"}},
		{name: "json price and skip", body: `echo '{"price":"1ogpu","skip":"x"}'`, errHas: []string{"both price and skip"}},
		{name: "json unknown field", body: `echo '{"prise":"1ogpu"}'`, errHas: []string{"cannot read the JSON answer", "prise"}},
		{name: "json fraction", body: `echo '{"price": 1.5}'`, errHas: []string{`invalid amount "1.5"`}},
		{name: "non-zero exit", body: "echo 1ogpu; echo 'no model loaded' >&2; exit 3", errHas: []string{"exit status 3", "no model loaded"}},
		{name: "oversized", body: "i=0; while [ $i -lt 600 ]; do echo 12345678; i=$((i+1)); done", errHas: []string{"more than 4096 bytes"}},
		{name: "stderr tail", body: "i=0; while [ $i -lt 500 ]; do echo line$i >&2; i=$((i+1)); done; exit 1", errHas: []string{"line499"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Script{Path: writeScript(t, dir, "price"+strconv.Itoa(i), tt.body)}
			got, err := s.Price(context.Background(), testJob())
			switch {
			case tt.want != "":
				if err != nil || !got.Eq(amount(t, tt.want)) {
					t.Fatalf("got %v, %v; want %s", got, err, tt.want)
				}
			case tt.noBid != "":
				if !errors.Is(err, ErrNoBid) || !strings.Contains(err.Error(), tt.noBid) || !strings.Contains(err.Error(), s.Path) {
					t.Fatalf("got %v, %v; want no bid with %q", got, err, tt.noBid)
				}
			default:
				var se *ScriptError
				if !errors.As(err, &se) || errors.Is(err, ErrNoBid) || got != nil {
					t.Fatalf("got %v, %v; want a *ScriptError", got, err)
				}
				for _, want := range append(tt.errHas, "pricing script "+s.Path) {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q lacks %q", err, want)
					}
				}
				if len(se.Stderr) > stderrTail {
					t.Errorf("stderr quote is %d bytes", len(se.Stderr))
				}
			}
		})
	}
}

// TestScriptSeesJob: the script's stdin is the job as JSON, it runs in Dir,
// and a relative Path is the agent's.
func TestScriptSeesJob(t *testing.T) {
	dir := t.TempDir()
	work := t.TempDir()
	path := writeScript(t, dir, "record", "cat > job.json; echo 3ogpu")
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, path)
	if err != nil {
		t.Fatal(err)
	}
	s := &Script{Path: rel, Dir: work}
	if _, err := s.Price(context.Background(), testJob()); err != nil {
		t.Fatal(err)
	}
	bz, err := os.ReadFile(filepath.Join(work, "job.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got JobView
	if err := json.Unmarshal(bz, &got); err != nil {
		t.Fatalf("stdin %q: %v", bz, err)
	}
	if want := testJob(); !reflect.DeepEqual(got, want) {
		t.Fatalf("script saw %+v\nwant %+v", got, want)
	}
	for _, key := range []string{`"max_tokens":64`, `"tokens_per_second":812.5`, `"max_price":"10000000000000000000"`} {
		if !strings.Contains(string(bz), key) {
			t.Errorf("stdin %s lacks %s", bz, key)
		}
	}
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// waitDead waits until pid is gone; a killed process can take a moment.
func waitDead(t *testing.T, pid int) {
	t.Helper()
	for range 200 {
		if !alive(pid) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("process %d is still running", pid)
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	bz, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(bz)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// TestScriptTimeout: a script that does not answer in time is killed with
// its children.
func TestScriptTimeout(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc to see whether the child died")
	}
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	s := &Script{
		Path:    writeScript(t, dir, "slow", "sleep 30 &\necho $! > "+pidFile+"\nwait"),
		Timeout: 300 * time.Millisecond,
	}
	got, err := s.Price(context.Background(), testJob())
	var se *ScriptError
	if !errors.As(err, &se) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no answer within 300ms") {
		t.Fatalf("got %v, %v; want a timeout", got, err)
	}
	waitDead(t, readPid(t, pidFile))
}

// TestScriptLeavesChild: a script that answers but leaves a child holding
// its stdout fails, and the child is killed.
func TestScriptLeavesChild(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc to see whether the child died")
	}
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	s := &Script{Path: writeScript(t, dir, "leaves", "sleep 30 &\necho $! > "+pidFile+"\necho 1ogpu")}
	if _, err := s.Price(context.Background(), testJob()); err == nil || !strings.Contains(err.Error(), "left a process") {
		t.Fatalf("got %v", err)
	}
	waitDead(t, readPid(t, pidFile))

	// Its output sent elsewhere, a background child is fine, and killed.
	s.Path = writeScript(t, dir, "detached", "sleep 30 >/dev/null 2>&1 &\necho $! > "+pidFile+"\necho 1ogpu")
	if got, err := s.Price(context.Background(), testJob()); err != nil || !got.Eq(types.OGPU(1)) {
		t.Fatalf("got %v, %v", got, err)
	}
	waitDead(t, readPid(t, pidFile))
}

// TestScriptCancelled: the caller's context ending stops the script, and
// the error says so rather than blaming the script.
func TestScriptCancelled(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Script{Path: writeScript(t, dir, "slow", "sleep 30"), Timeout: time.Minute}
	done := make(chan error, 1)
	go func() {
		_, err := s.Price(ctx, testJob())
		done <- err
	}()
	cancel()
	err := <-done
	var se *ScriptError
	if !errors.Is(err, context.Canceled) || errors.As(err, &se) {
		t.Fatalf("got %v; want context.Canceled", err)
	}
}

func TestScriptCheck(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\necho 1ogpu\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := writeScript(t, dir, "good", "echo 1ogpu")
	tests := []struct {
		name   string
		s      Script
		errHas string
	}{
		{"no path", Script{}, "no path given"},
		{"missing", Script{Path: filepath.Join(dir, "nope")}, "check the path"},
		{"directory", Script{Path: dir}, "not a regular file"},
		{"not executable", Script{Path: plain}, "chmod +x " + plain},
		{"negative timeout", Script{Path: good, Timeout: -time.Second}, "negative"},
		{"bad dir", Script{Path: good, Dir: filepath.Join(dir, "nope")}, "not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.s.Check(); err == nil || !strings.Contains(err.Error(), tt.errHas) {
				t.Fatalf("Check: %v; want %q", err, tt.errHas)
			}
			if _, err := tt.s.Price(context.Background(), testJob()); err == nil || !strings.Contains(err.Error(), tt.errHas) {
				t.Fatalf("Price: %v; want %q", err, tt.errHas)
			}
		})
	}
	if err := (&Script{Path: good}).Check(); err != nil {
		t.Fatal(err)
	}
}

// TestDocExample runs the example script of docs/pricing-scripts.md.
func TestDocExample(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "pricing-scripts.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```sh\n#!/bin/sh\n")
	body, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/pricing-scripts.md has no ```sh block starting with #!/bin/sh")
	}
	s := &Script{Path: writeScript(t, t.TempDir(), "price.sh", body)}
	tests := []struct {
		name  string
		edit  func(*JobView)
		want  string
		noBid string
	}{
		{"64 tokens", func(*JobView) {}, "0.0628ogpu", ""},
		{"no budget", func(j *JobView) { j.MaxTokens = 0 }, "0.1012ogpu", ""},
		{"cap just enough", func(j *JobView) { j.MaxPrice = amount(t, "0.0628ogpu").Dec() }, "0.0628ogpu", ""},
		{"cap too low", func(j *JobView) { j.MaxPrice = amount(t, "0.062799ogpu").Dec() }, "", "above the cap"},
		{"tiny cap", func(j *JobView) { j.MaxPrice = "999" }, "", "above the cap"},
		{"pipeline", func(j *JobView) { j.Kind = market.KindPipeline }, "", "inference jobs only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := testJob()
			tt.edit(&j)
			got, err := s.Price(context.Background(), j)
			if tt.noBid != "" {
				if !errors.Is(err, ErrNoBid) || !strings.Contains(err.Error(), tt.noBid) {
					t.Fatalf("got %v, %v; want no bid: %s", got, err, tt.noBid)
				}
				return
			}
			if err != nil || !got.Eq(amount(t, tt.want)) {
				t.Fatalf("got %v, %v; want %s", got, err, tt.want)
			}
		})
	}
}
