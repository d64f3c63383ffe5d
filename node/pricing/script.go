package pricing

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/types"
)

// DefaultScriptTimeout is how long a pricing script may run by default.
const DefaultScriptTimeout = 5 * time.Second

// MaxScriptOutput is the most a pricing script may print on stdout.
const MaxScriptOutput = 4 << 10

// stderrTail is how much of a script's stderr an error quotes (the end).
const stderrTail = 1 << 10

// waitDelay is how long a script's output may stay open after it exits
// (held by a process it left running) before the agent stops reading.
const waitDelay = time.Second

// Script prices jobs by running an operator's program; the package doc has
// the contract.
type Script struct {
	// Path is the program, relative to the agent's working directory or
	// absolute; it is run directly, not through a shell.
	Path string
	// Timeout bounds one run; 0 means DefaultScriptTimeout.
	Timeout time.Duration
	// Dir is the program's working directory ("": the agent's).
	Dir string
}

// ScriptError is a pricing script's failure: it did not run, did not
// finish, or answered with something other than a price within the cap.
type ScriptError struct {
	Path   string
	Reason string
	Stderr string // the end of its stderr, trimmed
	Err    error  // the underlying error, if any (context.DeadlineExceeded on a timeout)
}

func (e *ScriptError) Error() string {
	msg := fmt.Sprintf("pricing script %s: %s", e.Path, e.Reason)
	if e.Stderr != "" {
		msg += "; its stderr ends: " + e.Stderr
	}
	return msg
}

// Unwrap returns the underlying error.
func (e *ScriptError) Unwrap() error { return e.Err }

func (s *Script) timeout() time.Duration {
	if s.Timeout == 0 {
		return DefaultScriptTimeout
	}
	return s.Timeout
}

// Check reports whether the script can run: an executable regular file,
// a usable timeout and working directory. Price checks the same first.
func (s *Script) Check() error {
	fail := func(format string, args ...any) error {
		return &ScriptError{Path: s.Path, Reason: fmt.Sprintf(format, args...)}
	}
	if s.Path == "" {
		return errors.New("pricing script: no path given")
	}
	if s.Timeout < 0 {
		return fail("timeout %s is negative: use a positive duration, or 0 for %s", s.Timeout, DefaultScriptTimeout)
	}
	fi, err := os.Stat(s.Path)
	if err != nil {
		return &ScriptError{Path: s.Path, Reason: "cannot use it: check the path", Err: err}
	}
	if !fi.Mode().IsRegular() {
		return fail("not a regular file")
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return fail("not executable: run chmod +x %s (and start it with a #! line)", s.Path)
	}
	if s.Dir != "" {
		if fi, err := os.Stat(s.Dir); err != nil || !fi.IsDir() {
			return fail("working directory %s is not a directory", s.Dir)
		}
	}
	return nil
}

// Price implements Strategy: it runs the script with j on stdin and reads
// its answer. A skip or an empty answer wraps ErrNoBid; every failure is a
// *ScriptError. When ctx ends first, the error wraps ctx's.
func (s *Script) Price(ctx context.Context, j JobView) (*uint256.Int, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	limit, err := j.maxPrice()
	if err != nil {
		return nil, err
	}
	in, err := json.Marshal(j)
	if err != nil {
		return nil, err
	}
	path, err := filepath.Abs(s.Path)
	if err != nil {
		return nil, &ScriptError{Path: s.Path, Reason: "cannot resolve the path", Err: err}
	}
	rctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	cmd := exec.CommandContext(rctx, path)
	cmd.Dir = s.Dir
	cmd.Env = scriptEnv()
	cmd.Stdin = bytes.NewReader(append(in, '\n'))
	var stdout capped
	var stderr tail
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = waitDelay
	ownGroup(cmd)
	runErr := cmd.Run()
	killGroup(cmd) // whatever it left running

	fail := func(reason string, err error) error {
		return &ScriptError{Path: s.Path, Reason: reason, Stderr: stderr.String(), Err: err}
	}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("pricing script %s: stopped: %w", s.Path, ctx.Err())
	case errors.Is(rctx.Err(), context.DeadlineExceeded):
		return nil, fail(fmt.Sprintf("no answer within %s: killed it and its children (set a longer timeout, or answer sooner)", s.timeout()), context.DeadlineExceeded)
	case errors.As(runErr, &exit):
		return nil, fail(fmt.Sprintf("exited with %s", exit.ProcessState), runErr)
	case errors.Is(runErr, exec.ErrWaitDelay):
		return nil, fail("exited but left a process holding its stdout or stderr open: redirect that process's output, or do not leave it running", runErr)
	case runErr != nil:
		return nil, fail("cannot run it", runErr)
	case stdout.over:
		return nil, fail(fmt.Sprintf("printed more than %d bytes: print one amount", MaxScriptOutput), nil)
	}

	price, skip, err := parseAnswer(stdout.buf.String())
	switch {
	case err != nil:
		return nil, fail(err.Error(), err)
	case price == nil:
		return nil, fmt.Errorf("%w: pricing script %s: %s", ErrNoBid, s.Path, skip)
	case price.Gt(limit):
		return nil, fail(fmt.Sprintf("price %s is above job %d's max price %s", types.FormatAmount(price), j.ID, types.FormatAmount(limit)), nil)
	}
	return price, nil
}

// parseAnswer reads a script's stdout: a price, or a reason not to bid.
func parseAnswer(out string) (price *uint256.Int, skip string, err error) {
	out = strings.TrimSpace(out)
	if out == "" {
		return nil, "printed nothing (no bid)", nil
	}
	if !strings.HasPrefix(out, "{") {
		if n := strings.Count(out, "\n") + 1; n > 1 {
			return nil, "", fmt.Errorf("printed %d lines: print one amount, e.g. 4.5ogpu", n)
		}
		p, err := types.ParseAmount(out)
		return p, "", err
	}
	var ans struct {
		Price json.RawMessage `json:"price"`
		Skip  *string         `json:"skip"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ans); err != nil || dec.More() {
		if err == nil {
			err = errors.New("more than one JSON value")
		}
		return nil, "", fmt.Errorf(`cannot read the JSON answer %q (%v): want {"price":"4.5ogpu"} or {"skip":"reason"}`, out, err)
	}
	switch {
	case ans.Skip != nil && ans.Price != nil:
		return nil, "", fmt.Errorf(`answer %q has both price and skip: give one`, out)
	case ans.Skip != nil:
		if *ans.Skip == "" {
			return nil, "skipped (no reason given)", nil
		}
		return nil, "skipped: " + *ans.Skip, nil
	case ans.Price == nil:
		return nil, "", fmt.Errorf(`answer %q has neither price nor skip`, out)
	}
	var s string
	if err := json.Unmarshal(ans.Price, &s); err != nil {
		var n json.Number
		if err := json.Unmarshal(ans.Price, &n); err != nil {
			return nil, "", fmt.Errorf(`price %s is neither a string nor a number: write "4.5ogpu" or an integer of base units`, ans.Price)
		}
		s = n.String()
	}
	p, err := types.ParseAmount(s)
	return p, "", err
}

// scriptEnv is the script's whole environment.
func scriptEnv() []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	return []string{"PATH=" + path, "HOME=" + os.Getenv("HOME")}
}

// capped keeps the first MaxScriptOutput bytes written to it and notes
// whether there were more; it never refuses a write, so the script does
// not block on a full pipe.
type capped struct {
	buf  bytes.Buffer
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := MaxScriptOutput - c.buf.Len(); len(p) > room {
		c.buf.Write(p[:max(room, 0)])
		c.over = true
	} else {
		c.buf.Write(p)
	}
	return len(p), nil
}

// tail keeps the last stderrTail bytes written to it.
type tail struct{ b []byte }

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > stderrTail {
		t.b = append(t.b[:0], t.b[len(t.b)-stderrTail:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	return strings.TrimSpace(strings.ToValidUTF8(string(t.b), "?"))
}
