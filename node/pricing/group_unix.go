//go:build unix

package pricing

import (
	"os/exec"
	"syscall"
)

// ownGroup starts the script in a process group of its own, and makes a
// timeout kill the whole group, so that its children (a sleep, a curl) die
// with it.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

// killGroup kills what is left of the script's process group after it
// exited.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
