package main

import (
	"fmt"
	"runtime"
	"syscall"
)

func numCPU() int { return runtime.NumCPU() }

// fdLimit returns this process's descriptor limit, soft/hard (Go raises the soft one to the hard
// one at start; the children inherit the same).
func fdLimit() string {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return "unknown"
	}
	return fmt.Sprintf("%d/%d", rl.Cur, rl.Max)
}
