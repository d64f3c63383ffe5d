package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is a long-lived child process (a validator or a provider) with its
// output appended to Log. Exits the harness did not ask for are recorded:
// a crash is a finding.
type Proc struct {
	Name string
	Bin  string
	Args []string
	Log  string

	mu         sync.Mutex
	cmd        *exec.Cmd
	done       chan struct{}
	expectExit bool
	paused     bool
	starts     int
	unexpected []string
}

// Start runs the process (again, after Kill: same arguments, same home).
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && p.done != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("%s is already running (pid %d)", p.Name, p.cmd.Process.Pid)
		}
	}
	if err := os.MkdirAll(filepath.Dir(p.Log), 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(p.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "==== e2e: start %d of %s at %s\n", p.starts+1, p.Name, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(p.Bin, p.Args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("cannot start %s: %w", p.Name, err)
	}
	p.cmd, p.done, p.expectExit, p.paused = cmd, make(chan struct{}), false, false
	p.starts++
	done := p.done
	go func() {
		err := cmd.Wait()
		logf.Close()
		p.mu.Lock()
		if !p.expectExit {
			p.unexpected = append(p.unexpected, fmt.Sprintf("%s (pid %d) exited on its own: %v", p.Name, cmd.Process.Pid, err))
		}
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// Kill sends SIGKILL (kill -9) and waits for the exit.
func (p *Proc) Kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	if cmd == nil {
		p.mu.Unlock()
		return
	}
	p.expectExit = true
	p.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// Stop sends SIGINT and waits up to grace for the exit, then kills.
func (p *Proc) Stop(grace time.Duration) {
	p.mu.Lock()
	cmd, done, paused := p.cmd, p.done, p.paused
	if cmd == nil {
		p.mu.Unlock()
		return
	}
	p.expectExit = true
	p.mu.Unlock()
	if paused {
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(grace):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
	}
}

// Pause sends SIGSTOP; Resume sends SIGCONT.
func (p *Proc) Pause() error  { return p.signalPaused(syscall.SIGSTOP, true) }
func (p *Proc) Resume() error { return p.signalPaused(syscall.SIGCONT, false) }

func (p *Proc) signalPaused(sig syscall.Signal, paused bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || !p.running() {
		return fmt.Errorf("%s is not running", p.Name)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("%s: %v: %w", p.Name, sig, err)
	}
	p.paused = paused
	return nil
}

func (p *Proc) running() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Running says whether the process is alive.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running()
}

// Unexpected lists the exits the harness did not cause.
func (p *Proc) Unexpected() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.unexpected...)
}

// Tail is the end of the process's log, at most n bytes.
func (p *Proc) Tail(n int) string {
	b, _ := os.ReadFile(p.Log)
	if len(b) > n {
		b = b[len(b)-n:]
		if i := strings.IndexByte(string(b), '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}
