package console

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// RequireChromiumEnv makes TestBrowserJobTimeline fail, not skip, without
// Chromium (CI sets it).
const RequireChromiumEnv = "OGPU_REQUIRE_CHROMIUM"

// ScreenshotsEnv names a directory for the screenshots (default: the
// test's temporary directory, logged).
const ScreenshotsEnv = "OGPU_CONSOLE_SCREENSHOTS"

func needChromium(t *testing.T) string {
	t.Helper()
	skip := t.Skipf
	if os.Getenv(RequireChromiumEnv) == "1" {
		skip = t.Fatalf
	}
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	skip("chromium is not installed: TestBrowserJobTimeline opens the console in headless Chromium (apt-get install chromium fonts-liberation; .ci/run does)")
	return ""
}

// TestBrowserJobTimeline opens the explorer and a job's page in headless
// Chromium on a real node, then cancels the job through the chain and
// checks that the page's timeline reaches "settled" live, without a reload;
// it writes 1280×800 screenshots of both pages.
func TestBrowserJobTimeline(t *testing.T) {
	e := startEnv(t, 3)
	id, _ := e.postJob(t)
	c := openChrome(t, 60*time.Second)
	ctx, shot := c.ctx, c.shot

	// The explorer, opened with the token URL: the token becomes a cookie
	// and leaves the address bar; the live height moves.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.s.URL(e.srv.Listener.Addr())),
		chromedp.WaitVisible(chromedp.CSS("#blocks")),
	); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`/^#\d+$/.test(document.getElementById("live-height").textContent) && location.hash === ""`, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		t.Fatalf("the explorer's live height never moved, or the token stayed in the URL: %v", err)
	}
	authorized, err := chromedp.Run(ctx, chromedp.Evaluate[int](`fetch("/api/whoami", {method: "POST"}).then(r => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if authorized != 200 {
		t.Fatalf("an action from the page after the token exchange: %d, want 200", authorized)
	}
	// New blocks join the list live.
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector("#blocks tbody tr td a").textContent === document.getElementById("latest").textContent && document.querySelectorAll("#blocks tbody tr.new").length > 0`, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		t.Fatalf("new blocks did not join the block list live: %v", err)
	}
	shot("explorer.png")

	// A script in the validator's moniker is shown as text, not run.
	if err := chromedp.Do(ctx, chromedp.Navigate(e.srv.URL+"/validators"), chromedp.WaitVisible(chromedp.CSS("table.grid"))); err != nil {
		t.Fatal(err)
	}
	asText, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector("table.grid tbody td").textContent === `+fmt.Sprintf("%q", evilMoniker)+` && document.querySelectorAll("main script").length === 0`))
	if err != nil || !asText {
		t.Fatalf("the moniker %q is not shown as text (%v)", evilMoniker, err)
	}
	shot("validators.png")

	// The job page, then the job settles (cancelled) through the chain.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", e.srv.URL, id)),
		chromedp.WaitVisible(chromedp.CSS("#timeline")),
	); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__noReload = true`)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("live").classList.contains("on")`, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		t.Fatalf("the job page's event stream did not open: %v", err)
	}
	settled, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('#steps li[data-step="settled"]').classList.contains("done")`))
	if err != nil || settled {
		t.Fatalf("the open job is shown settled before its cancel (%v)", err)
	}
	e.cancelJob(t, id)
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`window.__noReload === true && document.querySelector('#steps li[data-step="settled"]').classList.contains("done") && document.querySelector("#timeline tbody").textContent.includes("job_cancelled")`, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("the timeline did not reach settled live, without a reload: %v", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("job-state").textContent === "cancelled" && document.getElementById("job-locked").textContent === "0ogpu"`, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		state, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("job-state").textContent + " / " + document.getElementById("job-locked").textContent`))
		t.Fatalf("the job's state and escrow were not refreshed live (shown: %s): %v", state, err)
	}
	shot("job-cancelled.png")

	// An awarded job whose providers never deliver: the page follows it
	// live through award, the no-shows and settlement.
	pool, claim := e.poolJob(t)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", e.srv.URL, pool)),
		chromedp.WaitVisible(chromedp.CSS("#timeline")),
	); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__noReload = true`)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("live").classList.contains("on")`, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		t.Fatalf("the job page's event stream did not open: %v", err)
	}
	claim()
	all := `window.__noReload === true && ["posted", "award", "results", "settled"].every(s => document.querySelector('#steps li[data-step="' + s + '"]').classList.contains("done"))`
	// The claim window is 200 blocks (20 s): the award comes after it.
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](all, chromedp.WithPollingTimeout(90*time.Second))); err != nil {
		shown, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#timeline tbody").textContent`))
		t.Fatalf("the pool job's timeline did not reach settled live (shown: %s): %v", shown, err)
	}
	shot("job.png")
}
