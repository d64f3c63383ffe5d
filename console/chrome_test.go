package console

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chrome is the headless Chromium of one browser test: a 1280×800 tab and
// the directory its screenshots go to (ScreenshotsEnv, else the test's
// temporary directory).
type chrome struct {
	t   *testing.T
	ctx context.Context
	dir string
}

// openChrome starts Chromium for t (failing or skipping as needChromium
// says when there is none); everything in the tab must end within timeout.
func openChrome(t *testing.T, timeout time.Duration) *chrome {
	t.Helper()
	bin := needChromium(t)
	c := &chrome{t: t, dir: screenshotDir(t)}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.WindowSize(1280, 800), chromedp.Flag("disable-gpu", true))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	ctx, cancel := context.WithTimeout(bctx, timeout)
	t.Cleanup(func() { cancel(); bcancel(); acancel() })
	c.ctx = ctx
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatal(err)
	}
	return c
}

// shot writes a screenshot of the tab's viewport as name.
func (c *chrome) shot(name string) {
	c.t.Helper()
	c.write(name, chromedp.CaptureScreenshot())
}

// fullShot writes a screenshot of the whole page as name.
func (c *chrome) fullShot(name string) {
	c.t.Helper()
	c.write(name, chromedp.FullScreenshot(100))
}

func (c *chrome) write(name string, capture chromedp.Action[[]byte]) {
	c.t.Helper()
	png, err := chromedp.Run(c.ctx, capture)
	if err != nil {
		c.t.Fatal(err)
	}
	p := filepath.Join(c.dir, name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		c.t.Fatal(err)
	}
	c.t.Logf("screenshot: %s", p)
}

// login opens the URL s printed for the listener at addr and waits until
// its token became the cookie: it left the address bar, script cannot
// read it, and the console accepted it.
func (c *chrome) login(s *Server, addr net.Addr) {
	c.t.Helper()
	if err := chromedp.Do(c.ctx, chromedp.Navigate(s.URL(addr)), chromedp.WaitVisible(chromedp.CSS("#blocks"))); err != nil {
		c.t.Fatal(err)
	}
	if _, err := chromedp.Run(c.ctx, chromedp.Poll[bool](`location.hash === "" && document.cookie === "" && document.documentElement.dataset.token === "accepted"`, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		c.t.Fatalf("the token stayed in the URL, its cookie is readable from script, or the console refused it: %v", err)
	}
}

// screenshotDir is where the browser tests write screenshots.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(ScreenshotsEnv)
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
