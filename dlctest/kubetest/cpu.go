package kubetest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// CPU is CPU time (user and system) used so far: by this process, and by
// the control plane it started (StartControlPlane's kube-apiserver and
// etcd, its children).
type CPU struct {
	Self, APIServer, Etcd time.Duration
}

// Sub returns the CPU time used between before and c.
func (c CPU) Sub(before CPU) CPU {
	return CPU{Self: c.Self - before.Self, APIServer: c.APIServer - before.APIServer, Etcd: c.Etcd - before.Etcd}
}

// Add returns c and o added up (windows measured apart).
func (c CPU) Add(o CPU) CPU {
	return CPU{Self: c.Self + o.Self, APIServer: c.APIServer + o.APIServer, Etcd: c.Etcd + o.Etcd}
}

// Total is the three's CPU time together.
func (c CPU) Total() time.Duration { return c.Self + c.APIServer + c.Etcd }

// Known reports whether the control plane's CPU time could be read (it
// is zero where there is no /proc, or no control plane was started).
func (c CPU) Known() bool { return c.APIServer > 0 }

// CPUNow reads the CPU time used so far by this process and by its
// children named kube-apiserver and etcd from /proc/<pid>/stat; it is all
// zero where there is no /proc (not Linux). Its resolution is /proc's, a
// hundredth of a second: measure over many operations. It reads every
// process's stat, a few milliseconds of CPU: read it at a window's ends,
// not in a loop inside one.
func CPUNow() CPU {
	var c CPU
	self := os.Getpid()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid … utime stime: fields 1, 2, 4, 14 and 15;
		// comm may hold spaces and parentheses.
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 13 {
			continue
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(s[:open]))
		ppid, _ := strconv.Atoi(f[1])
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		used := time.Duration(utime+stime) * time.Second / clockTicks
		switch comm := s[open+1 : end]; {
		case pid == self:
			c.Self += used
		case ppid == self && comm == "kube-apiserver":
			c.APIServer += used
		case ppid == self && comm == "etcd":
			c.Etcd += used
		}
	}
	return c
}

// clockTicks is the unit of /proc's CPU times per second (USER_HZ), 100
// on every Linux Go runs on.
const clockTicks = 100
