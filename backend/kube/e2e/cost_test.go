package e2e_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// settle waits, polling, until done holds, for at most two minutes.
func settle(b *testing.B, done func(*testing.B) bool) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !done(b) {
		if time.Now().After(deadline) {
			b.Fatal("the control plane did not settle in 2 minutes")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cost is the CPU a sub-benchmark's operations took, from startCost to
// report.
type cost struct {
	b            *testing.B
	on           bool
	self, server time.Duration
}

// startCost begins counting CPU, if on and the machine tells (Linux).
func startCost(b *testing.B, on bool) cost {
	c := cost{b: b, on: on}
	if on {
		c.self, c.server = cpuNow()
	}
	return c
}

// report reports the CPU since startCost per operation: cpu-ms/op of this
// process and server-cpu-ms/op of the API server and etcd.
func (c cost) report() {
	if !c.on {
		return
	}
	self, server := cpuNow()
	if server == 0 {
		return // not told: no /proc
	}
	n := float64(c.b.N)
	c.b.ReportMetric(float64(self-c.self)/float64(time.Millisecond)/n, "cpu-ms/op")
	c.b.ReportMetric(float64(server-c.server)/float64(time.Millisecond)/n, "server-cpu-ms/op")
}

// cpuNow returns the CPU time (user and system) this process has used,
// and that of its children named etcd and kube-apiserver (the envtest
// control plane this process started), read from /proc: 0 where there is
// none.
func cpuNow() (self, server time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	me := strconv.Itoa(os.Getpid())
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ... utime stime: fields 4, 14 and 15.
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open || end+2 > len(s) {
			continue
		}
		comm, f := s[open+1:end], strings.Fields(s[end+2:])
		if len(f) < 13 || f[1] != me || (comm != "etcd" && comm != "kube-apiserver") {
			continue
		}
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		server += time.Duration(utime+stime) * time.Second / clockTicks
	}
	return self, server
}

// clockTicks is the unit of /proc's CPU times per second (USER_HZ), 100
// on every Linux Go runs on.
const clockTicks = 100
