package console

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserProviderPage opens a provider's page in headless Chromium
// (the page of the agent this console runs), then runs an agreed job
// through the chain: the earnings figures move to the exact payment live,
// without a reload, and the cumulative chart is drawn under the strict
// CSP. A bond with a bare number is refused on the page; one with its
// unit reaches the agent and the page says so. It writes
// provider-earning.png, provider-full.png and providers.png.
func TestBrowserProviderPage(t *testing.T) {
	fake := &fakeAgent{}
	e := startEnvOpts(t, 3, func(e *env) Options {
		fake.addr = e.addr(1)
		return Options{Provider: fake}
	})
	model := sha256.Sum256([]byte("browser provider model"))
	e.registerProviders(t, model)
	p1 := e.addr(1)

	c := openChrome(t, 90*time.Second)
	ctx, shot := c.ctx, c.shot

	// The token URL first (the cookie authorises the forms), then the page.
	page := e.srv.URL + "/providers/" + p1.Hex()
	c.login(e.s, e.srv.Listener.Addr())
	if err := chromedp.Do(ctx, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#earn-total"))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__noReload = true`)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("live").classList.contains("on")`, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		t.Fatalf("the provider page's event stream did not open: %v", err)
	}
	before, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#earn-total")))
	if err != nil || before != "0ogpu" {
		t.Fatalf("earned before any job: %q (%v), want 0ogpu", before, err)
	}

	e.agreedJob(t, model)
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`window.__noReload === true && document.getElementById("earn-total").textContent === "1ogpu" && document.getElementById("earn-day").textContent === "1ogpu"`, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		shown, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("earn-total").textContent`))
		t.Fatalf("the earnings did not reach 1ogpu live, without a reload (shown %q): %v", shown, err)
	}
	if ChartsEmbedded() {
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`(() => { const c = document.querySelector("#earn-chart canvas"); return !!c && c.width > 300 && c.height > 100; })()`, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
			t.Fatalf("the earnings chart was not drawn: %v", err)
		}
		if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#speed-chart canvas").length`)); err != nil || n != 1 {
			t.Fatalf("the speed chart: %d canvases (%v), want 1", n, err)
		}
	} else if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(".note").length`)); err != nil || n == 0 {
		t.Fatalf("without the chart library the page does not say so (%v)", err)
	}
	shot("provider-earning.png")

	// A bond with a bare number is refused on the page, calling nothing.
	bond := `form[action="/api/provider/bond"]`
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS(bond+` input[name="amount"]`), "10"),
		chromedp.Click(chromedp.CSS(bond+" button")),
	); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("flash").textContent.includes("write the unit")`, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("a bare-number bond was not refused on the page: %v", err)
	}
	if calls := fake.Calls(); len(calls) != 0 {
		t.Fatalf("a refused bond reached the agent: %v", calls)
	}
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS(bond+` input[name="amount"]`), "5ogpu"),
		chromedp.Click(chromedp.CSS(bond+" button")),
	); err != nil {
		t.Fatal(err)
	}
	// A success reloads the page (the stake shown is the chain's) with
	// the agent's answer.
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("#flash.good"))); err != nil {
		t.Fatalf("the bond's result is not on the page: %v", err)
	}
	if msg, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#flash"))); err != nil || !strings.Contains(msg, "bonded 5ogpu") {
		t.Fatalf("the page says %q (%v), want bonded 5ogpu", msg, err)
	}
	if got := strings.Join(fake.Calls(), "; "); got != "bond 5ogpu" {
		t.Fatalf("agent calls %q, want one bond of 5ogpu", got)
	}
	if ChartsEmbedded() {
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`!!document.querySelector("#earn-chart canvas")`, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
			t.Fatalf("the earnings chart was not drawn after the reload: %v", err)
		}
	}
	c.fullShot("provider-full.png")

	// The list: the moniker, a script, is text; its link opens the page.
	if err := chromedp.Do(ctx, chromedp.Navigate(e.srv.URL+"/providers"), chromedp.WaitVisible(chromedp.CSS("#providers"))); err != nil {
		t.Fatal(err)
	}
	asText, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`[...document.querySelectorAll("#providers tbody td a")].some(a => a.textContent === `+fmt.Sprintf("%q", evilProvider)+` && a.getAttribute("href") === "/providers/`+p1.Hex()+`") && document.querySelectorAll("main script").length === 0`))
	if err != nil || !asText {
		t.Fatalf("the moniker %q is not shown as a link's text (%v)", evilProvider, err)
	}
	shot("providers.png")
}
