//go:build !unix

package pricing

import "os/exec"

// ownGroup leaves the default: a timeout kills the script's process only.
func ownGroup(*exec.Cmd) {}

// killGroup has no process group to kill outside unix.
func killGroup(*exec.Cmd) {}
