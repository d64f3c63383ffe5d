package gateway

import (
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/types"
)

func TestStopper(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stops   []string
		pieces  []string
		want    string
		stopped bool
	}{
		{"no stops", nil, []string{"a", "b", "c"}, "abc", false},
		{"cut inside a piece", []string{"."}, []string{"one. two"}, "one", true},
		{"stop across pieces", []string{"END"}, []string{"abc E", "N", "D more"}, "abc ", true},
		{"a false start is released", []string{"END"}, []string{"abc E", "N", "x"}, "abc ENx", false},
		{"the earliest stop wins", []string{"zz", "b"}, []string{"azzb"}, "a", true},
		{"multi-byte text passes whole", []string{"é!"}, []string{"café", " ok"}, "café ok", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := stopper{stops: tc.stops}
			var out strings.Builder
			for _, p := range tc.pieces {
				out.WriteString(s.push(p))
			}
			if !s.stopped {
				out.WriteString(s.flush())
			}
			if out.String() != tc.want || s.stopped != tc.stopped {
				t.Fatalf("got %q stopped %v, want %q %v", out.String(), s.stopped, tc.want, tc.stopped)
			}
			// The whole text cut at once gives the same answer.
			whole, stopped := cutAtStop(strings.Join(tc.pieces, ""), tc.stops)
			if whole != tc.want || stopped != tc.stopped {
				t.Fatalf("cutAtStop: %q %v", whole, stopped)
			}
		})
	}
}

func TestFlights(t *testing.T) {
	now := time.Unix(1000, 0)
	fs := flights{window: time.Minute, now: func() time.Time { return now }}
	p1, p2 := bodyPrint([]byte(`{"a":1,"b":[1,2]}`)), bodyPrint([]byte(`{"a":2}`))
	k := requestKey("chat", "", p1)
	if requestKey("completion", "", p1) == k || requestKey("chat", "x", p1) == k || requestKey("chat", "", p2) == k {
		t.Fatal("distinct requests share a key")
	}
	// The same request serialized in another order or spacing is the
	// same request; an Idempotency-Key alone names one.
	if bodyPrint([]byte(` { "b":[1, 2], "a":1 }`)) != p1 {
		t.Fatal("a reordered body has another print")
	}
	if requestKey("chat", "x", p1) != requestKey("chat", "x", p2) || requestKey("chat", "x", p1) == requestKey("chat", "y", p1) {
		t.Fatal("an idempotency key does not name its request alone")
	}
	// A request that fails before anything is posted is forgotten: its
	// retry runs afresh.
	f := fs.add(k, p1)
	if fs.join(k) != f {
		t.Fatal("a running flight is not joined")
	}
	fs.end(f)
	if fs.join(k) != nil {
		t.Fatal("a flight that posted nothing is still joined")
	}
	// A posted one is joined until the window has passed.
	f = fs.add(k, p1)
	fs.setDispatched(f)
	fs.end(f)
	now = now.Add(59 * time.Second)
	if fs.join(k) != f {
		t.Fatal("a posted flight is not joined within the window")
	}
	now = now.Add(2 * time.Second)
	if fs.join(k) != nil {
		t.Fatal("a posted flight is joined after the window")
	}
}

func TestLedger(t *testing.T) {
	now := time.Date(2026, 3, 1, 23, 59, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	path := filepath.Join(t.TempDir(), "ledger.json")
	l, err := openLedger(path, types.OGPU(5), types.OGPU(10), clock)
	if err != nil {
		t.Fatal(err)
	}
	var e *Error
	if _, err := l.reserve(types.OGPU(6)); !errors.As(err, &e) || e.Status != http.StatusPaymentRequired || e.Code != CodeBudgetExceeded || !e.NoRetry {
		t.Fatalf("over the per-request cap: %v", err)
	}
	r1, err := l.reserve(types.OGPU(5))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := l.reserve(types.OGPU(5))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.reserve(uint256.NewInt(1)); err == nil {
		t.Fatal("a reservation beyond the day's budget")
	}
	// Reservations are on disk before they are granted.
	l2, err := openLedger(path, types.OGPU(5), types.OGPU(10), clock)
	if err != nil || !l2.state.Spent.Eq(types.OGPU(10)) {
		t.Fatalf("reloaded: %+v, %v", l2.state, err)
	}
	r1.settle(types.OGPU(2))
	r1.settle(types.OGPU(0)) // settled once
	r2.settle(nil)           // unknown: the worst case stays
	if _, spent := l.spent(); !spent.Eq(types.OGPU(7)) {
		t.Fatalf("spent %s, want 7 oGPU", spent)
	}
	if _, err := l.reserve(types.OGPU(4)); err == nil {
		t.Fatal("7 + 4 fits a budget of 10")
	}
	r3, err := l.reserve(types.OGPU(3))
	if err != nil {
		t.Fatal(err)
	}
	// A new UTC day starts from zero; a reservation of the day before
	// settles into the new day without taking its own amount back out.
	now = now.Add(2 * time.Minute)
	if day, spent := l.spent(); day != "2026-03-02" || !spent.IsZero() {
		t.Fatalf("new day: %s %s", day, spent)
	}
	r3.settle(types.OGPU(1))
	if _, spent := l.spent(); !spent.Eq(types.OGPU(1)) {
		t.Fatalf("after the late settlement: %s", spent)
	}
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := openLedger(path, types.OGPU(5), types.OGPU(10), clock); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("a corrupt ledger: %v", err)
	}
}

func TestLoadOrCreateKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "home")
	path := filepath.Join(dir, "gateway.key")
	k, created, err := LoadOrCreateKey(path)
	if err != nil || !created || !strings.HasPrefix(k, keyPrefix) || len(k) != len(keyPrefix)+64 {
		t.Fatalf("created %q %v %v", k, created, err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v", st.Mode(), err)
	}
	k2, created, err := LoadOrCreateKey(path)
	if err != nil || created || k2 != k {
		t.Fatalf("reloaded %q %v %v", k2, created, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateKey(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a world-readable key file: %v", err)
	}
	short := filepath.Join(dir, "short.key")
	if err := os.WriteFile(short, []byte("1234\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateKey(short); err == nil {
		t.Fatal("a guessable key was accepted")
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{KeyFile: "k", LedgerFile: "l"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"no key file", func(c *Config) { c.KeyFile = "" }, "key file"},
		{"no ledger", func(c *Config) { c.LedgerFile = "" }, "ledger file"},
		{"bad listen", func(c *Config) { c.Listen = "8080" }, "listen"},
		{"wildcard CORS", func(c *Config) { c.CORSOrigins = []string{"*"} }, "CORS origin"},
		{"host with a scheme", func(c *Config) { c.AllowedHosts = []string{"http://x"} }, "allowed host"},
		{"zero budget", func(c *Config) { c.BudgetPerDay = new(uint256.Int) }, "budget per day"},
		{"alias named like a hash", func(c *Config) {
			c.Models = []ModelConfig{{Name: "sha256:ab", Model: "sha256:" + strings.Repeat("a", 64)}}
		}, "want a name"},
		{"bad hash", func(c *Config) { c.Models = []ModelConfig{{Name: "m", Model: "sha256:xyz"}} }, "64 hex"},
		{"unknown template", func(c *Config) {
			c.Models = []ModelConfig{{Name: "m", Model: strings.Repeat("a", 64), Template: "jinja2"}}
		}, "chatml"},
		{"max tokens beyond the context", func(c *Config) { c.DefaultMaxTokens, c.ContextLength = 600, 512 }, "default max tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mod(&c)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want %q", err, tc.want)
			}
		})
	}
}

func TestRenderPlainAndTemplates(t *testing.T) {
	msgs := []llm.ChatMessage{{Role: "system", Content: "Tell a story."}, {Role: "user", Content: "Once upon a time"}}
	if got := renderPlain(msgs); got != "Tell a story.\nOnce upon a time" {
		t.Fatalf("plain: %q", got)
	}
	if got := renderPlain(msgs[1:]); got != "Once upon a time" {
		t.Fatalf("one message is the prompt itself: %q", got)
	}
	ms := &models{log: testLogger(t), byHash: map[types.Hash]*model{}}
	m := &model{tmpl: "chatml"}
	m.once.Do(func() {})
	p, how, err := ms.render(m, msgs)
	if err != nil || how != "chatml" || !strings.HasSuffix(p, "<|im_start|>assistant\n") {
		t.Fatalf("chatml: %q %s %v", p, how, err)
	}
	// A model whose own template llama.cpp does not know is rendered
	// plain, and says so.
	m = &model{meta: &llm.ChatMeta{ChatTemplate: "{{ custom }}"}}
	m.once.Do(func() {})
	p, how, err = ms.render(m, msgs)
	if err != nil || how != TemplatePlain || p != renderPlain(msgs) {
		t.Fatalf("unknown template: %q %s %v", p, how, err)
	}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t, "test"}, nil))
}

func TestParseModelHash(t *testing.T) {
	h := strings.Repeat("ab", 32)
	for _, s := range []string{"sha256:" + h, "0x" + h, h, "sha256:" + strings.ToUpper(h)} {
		got, err := ParseModelHash(s)
		if err != nil || modelID(got) != "sha256:"+h {
			t.Fatalf("%s: %s %v", s, modelID(got), err)
		}
	}
	for _, s := range []string{"", "sha256:", "sha256:" + h[:62], "sha256:" + h + "00", "sha256:" + strings.Repeat("g", 64)} {
		if _, err := ParseModelHash(s); err == nil {
			t.Fatalf("%q parsed", s)
		}
	}
}

// TestStreamReconcile: what a stream sends once the verified text is
// known, given the provisional tokens it already sent. Driven through the
// answer's callbacks as a backend calls them.
func TestStreamReconcile(t *testing.T) {
	s := &Server{now: time.Now}
	for _, tc := range []struct {
		name     string
		pieces   []string
		verified string
		stops    []string
		want     string // the text the client ends up with
		errCode  string
	}{
		{"stream complete", []string{"Once", " upon", " a time"}, "Once upon a time", nil, "Once upon a time", ""},
		{"stream lost midway: the rest comes from the verified text", []string{"Once", " up"}, "Once upon a time", nil, "Once upon a time", ""},
		{"a mangled piece stops the live text", []string{"caf", "\uFFFD", "\uFFFD", " ok"}, "café ok", nil, "café ok", ""},
		{"a wrong stream cannot be retracted", []string{"Once", " upin"}, "Once upon a time", nil, "Once upin", CodeResultOverruled},
		{"a stop sequence in the verified rest", []string{"Once"}, "Once upon. A time", []string{"."}, "Once upon", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecording()
			g := &gen{route: routeChat, modelName: "m", stream: true, includeUsage: true, stops: tc.stops}
			a := newAnswer(s, g, rec, types.OGPU(1))
			a.dispatched(Dispatch{Job: 7, Height: 3})
			for _, p := range tc.pieces {
				a.token(p)
			}
			res := &Result{Text: tc.verified, Tokens: 4, Verified: true, Receipt: Receipt{Mode: "job", Job: 7, Charged: types.OGPU(1)}}
			a.complete(res)
			rec.finish()
			status, h, chunks, done, _ := rec.from(0)
			if status != http.StatusOK || h.Get("X-Should-Retry") != "false" || h.Get("X-Ogpu-Job") != "7" || !done {
				t.Fatalf("status %d, headers %v", status, h)
			}
			var evs []sseEvent
			for _, c := range chunks {
				for _, line := range strings.Split(strings.TrimSuffix(string(c), "\n\n"), "\n") {
					if d, ok := strings.CutPrefix(line, "data: "); ok {
						evs = append(evs, sseEvent{data: d})
					} else if c, ok := strings.CutPrefix(line, ": "); ok {
						evs = append(evs, sseEvent{comment: c})
					}
				}
			}
			got := parseStream(t, evs)
			if got.text != tc.want || got.errCode != tc.errCode || got.done != (tc.errCode == "") || !got.roleFirst {
				t.Fatalf("stream %+v, want text %q, error %q", got, tc.want, tc.errCode)
			}
			if tc.errCode != "" && (got.errOgpu == nil || !got.errOgpu.Overruled || got.errOgpu.Job != 7) {
				t.Fatalf("the error event's ogpu: %+v", got.errOgpu)
			}
		})
	}
}

// TestParseModelSpecs: names from files or hashes, template overrides for
// known names only; anything else is refused saying what is wanted.
func TestParseModelSpecs(t *testing.T) {
	hash := "sha256:" + strings.Repeat("ab", 32)
	got, err := ParseModelSpecs([]string{"tiny=" + hash}, []string{"tiny=chatml"})
	if err != nil || len(got) != 1 || got[0].Name != "tiny" || got[0].Model != hash || got[0].Template != "chatml" {
		t.Fatalf("got %+v, %v", got, err)
	}
	for _, bad := range [][2][]string{
		{{"x=/no/such/file.gguf"}, nil},
		{{"x=sha256:zz"}, nil},
		{{"tiny=" + hash}, {"other=chatml"}},
		{{"tiny=" + hash}, {"chatml"}},
	} {
		if _, err := ParseModelSpecs(bad[0], bad[1]); err == nil || !strings.Contains(err.Error(), "want") {
			t.Errorf("%v %v: %v", bad[0], bad[1], err)
		}
	}
}

// TestLedgerOnSpent: the metrics hook hears what is spent for good (a
// settled cost, a fee outside requests), not reservations nor an unknown
// cost, and hears a settlement once however often it is called.
func TestLedgerOnSpent(t *testing.T) {
	clock := func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }
	l, err := openLedger(filepath.Join(t.TempDir(), "ledger.json"), types.OGPU(5), types.OGPU(10), clock)
	if err != nil {
		t.Fatal(err)
	}
	heard := new(uint256.Int)
	l.onSpent = func(a *uint256.Int) { heard.Add(heard, a) }
	r1, err := l.reserve(types.OGPU(5))
	if err != nil {
		t.Fatal(err)
	}
	if !heard.IsZero() {
		t.Fatalf("a reservation was reported spent: %s", heard)
	}
	r1.settle(types.OGPU(2))
	r1.settle(types.OGPU(2))
	r2, err := l.reserve(types.OGPU(1))
	if err != nil {
		t.Fatal(err)
	}
	r2.settle(nil)
	l.add(types.OGPU(1))
	if !heard.Eq(types.OGPU(3)) {
		t.Fatalf("heard %s spent, want 3 oGPU (2 settled + 1 fee)", types.FormatAmount(heard))
	}
}
