package devnet

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"time"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/console"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/types"
)

// The devnet serves the web console on loopback from the start of the
// market rounds (alice's client page, with her key held by the devnet's
// process), so that a person can watch every round in a browser; round 8
// drives it as a browser would.

// ConsoleReport is round 8: a job alice posts through the console's form.
type ConsoleReport struct {
	URL string
	Job uint64
	// State is the job's state when the round ended (completed), Paid
	// what it paid, and Listed whether alice's page lists it.
	State  string
	Paid   *uint256.Int
	Listed bool
	// Prov1Earned is what prov1's provider page says it earned in all.
	Prov1Earned string
}

// startConsole serves the console until the agents stop.
func (d *devnet) startConsole() error {
	models := []console.ModelChoice{{Name: "stories260K", Hash: d.model, Size: d.modelSize}}
	alice := console.ClientOf(d.ctx, d.client, models, d.logger("console"))
	alice.Windows = market.Windows{Bid: 4, Reveal: 3, Execute: 25, Verify: 15}
	s, err := console.New(d.c, console.Options{Client: alice, Provider: console.ProviderOf(d.provs[0].agent)})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ctx := d.ctx
	d.goAgent(func() { _ = s.Serve(ctx, ln) })
	d.console = s
	d.consoleAddr = ln.Addr()
	fmt.Fprintf(d.w, "console: open %s (alice's jobs at /client, prov1's dashboard at /providers/%s; the token in the #fragment authorises actions)\n", s.URL(ln.Addr()), d.provs[0].acct.addr.Hex())
	return nil
}

// browser is what round 8 uses to drive the console: an HTTP client with
// a cookie jar that sends the Origin a browser sends.
type browser struct {
	base string
	http *http.Client
}

func (b *browser) post(path string, form url.Values) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.base)
	return b.http.Do(req)
}

func (b *browser) get(path string) (string, error) {
	res, err := b.http.Get(b.base + path)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	if err != nil {
		return "", err
	}
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", path, res.Status)
	}
	return string(body), nil
}

// consoleRound posts an LLM job from alice's console page as a browser
// would (the token exchanged for its cookie, then the form's POST), and
// follows the job's page until it settles.
func (d *devnet) consoleRound(report *Report) error {
	d.beginRound("the web console: alice posts a job through its form and follows it to payment")
	w := d.w
	jar, err := cookiejar.New(nil)
	if err != nil {
		return err
	}
	b := &browser{base: "http://" + d.consoleAddr.String(), http: &http.Client{Jar: jar, Timeout: 90 * time.Second}}
	rep := &ConsoleReport{URL: d.console.URL(d.consoleAddr)}
	report.Console = rep

	// Without the token the form is refused.
	form := url.Values{"model": {d.model.Hex()}, "prompt": {"Once upon a time, a dog"}, "max_tokens": {"24"}, "redundancy": {"2"}, "max_price": {"5ogpu"}, "mode": {"auction"}}
	res, err := b.post("/api/jobs", form)
	if err != nil {
		return err
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		return fmt.Errorf("the console accepted a post without its token: %s", res.Status)
	}
	fmt.Fprintf(w, "a post without the console token: %s\n", res.Status)
	res, err = b.post("/api/session", url.Values{"token": {d.console.Token()}})
	if err != nil {
		return err
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		return fmt.Errorf("the console refused its own token: %s", res.Status)
	}
	res, err = b.post("/api/jobs", form)
	if err != nil {
		return err
	}
	res.Body.Close()
	if _, err := fmt.Sscanf(res.Request.URL.Path, "/jobs/%d", &rep.Job); err != nil || res.StatusCode != http.StatusOK {
		return fmt.Errorf("the console's post did not lead to a job page: %s at %s", res.Status, res.Request.URL)
	}
	fmt.Fprintf(w, "alice: POST /api/jobs (prompt %q, 24 tokens, 2 providers, cap 5ogpu) -> job %d: %s%s\n", form.Get("prompt"), rep.Job, b.base, res.Request.URL.Path)
	var st struct{ State, Phase, Locked string }
	for last := ""; ; time.Sleep(300 * time.Millisecond) {
		body, err := b.get(fmt.Sprintf("/api/jobs/%d", rep.Job))
		if err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			return err
		}
		if st.State != last {
			fmt.Fprintf(w, "   job page: %s — %s\n", st.State, st.Phase)
			last = st.State
		}
		if st.State == "completed" || st.State == "expired" || st.State == "cancelled" {
			break
		}
		if d.ctx.Err() != nil {
			return d.ctx.Err()
		}
	}
	rep.State = st.State
	j, err := d.c.Job(d.ctx, rep.Job)
	if err != nil {
		return err
	}
	rep.Paid = j.Paid
	if st.State != "completed" || j.Paid.IsZero() {
		return fmt.Errorf("the console's job %d ended %s, paid %s", rep.Job, st.State, types.FormatAmount(j.Paid))
	}
	if err := d.pageShowsSettled(b, rep.Job); err != nil {
		return err
	}
	client, err := b.get("/client")
	if err != nil {
		return err
	}
	rep.Listed = strings.Contains(client, fmt.Sprintf(`href="/jobs/%d"`, rep.Job))
	fmt.Fprintf(w, "job %d settled through the console: paid %s; alice's page lists it: %v\n", rep.Job, types.FormatAmount(j.Paid), rep.Listed)

	// prov1's dashboard: what it earned in all, as its page says.
	prov1 := d.provs[0].acct.addr
	body, err := b.get("/api/providers/" + prov1.Hex() + "/earnings")
	if err != nil {
		return err
	}
	var earn struct {
		Day, Total string
	}
	if err := json.Unmarshal([]byte(body), &earn); err != nil {
		return fmt.Errorf("prov1's earnings: %w", err)
	}
	rep.Prov1Earned = earn.Total
	fmt.Fprintf(w, "prov1's console page (/providers/%s): earned %s in the last 24 h, %s in all\n", prov1.Hex(), earn.Day, earn.Total)
	return nil
}

// settledWithin is how many blocks the job page has to show a completed
// job settled.
const settledWithin = 25

// pageShowsSettled waits for job's page to mark the "settled" step done.
// The page's timeline comes from the node's indexer, which indexes a
// block after the block is committed: the state can say "completed" a
// moment before the indexer has the job_completed event.
func (d *devnet) pageShowsSettled(b *browser, job uint64) error {
	st, err := d.c.RPC.Status(d.ctx)
	if err != nil {
		return err
	}
	until := st.SyncInfo.LatestBlockHeight + settledWithin
	for {
		page, err := b.get(fmt.Sprintf("/jobs/%d", job))
		if err != nil {
			return err
		}
		if strings.Contains(page, `data-step="settled" class="done"`) {
			return nil
		}
		h, err := d.c.CommittedHeight(d.ctx)
		if err != nil {
			return err
		}
		if h >= until {
			why := ""
			if _, after, ok := strings.Cut(page, "the timeline cannot be read from the node's indexer"); ok {
				why, _, _ = strings.Cut(after, "</p>")
				why = ": the timeline cannot be read from the node's indexer" + why
			}
			return fmt.Errorf("the page of job %d does not show it settled %d blocks after the job completed%s", job, settledWithin, why)
		}
		if err := d.c.WaitHeight(d.ctx, h+1); err != nil {
			return err
		}
	}
}
