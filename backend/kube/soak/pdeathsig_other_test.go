//go:build !linux

package soak_test

import "os/exec"

// setPdeathsig does nothing here: a replica process stops when its
// standard input closes, which the test process's death also does.
func setPdeathsig(*exec.Cmd) {}
