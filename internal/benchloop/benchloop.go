// Package benchloop runs the sides of an interleaved benchmark: every
// iteration runs each side once, rotating which goes first, so load from
// other processes hits them alike, and it times each side's wall time and
// the process's CPU time (user and system) spent during it. On a machine
// loaded by other work, waiting for a core inflates wall times at random
// and CPU time much less. CPU time is the whole process's: the client's
// work, the GC running during the call, and an in-process server's.
// For bttl's benchmarks (ttlclient's); it imports only the standard
// library.
package benchloop

import (
	"syscall"
	"testing"
	"time"
)

// Result is what Run measured: per side, the total wall and CPU time over
// N iterations.
type Result struct {
	N         int
	Wall, CPU map[string]time.Duration
}

// Run runs impls[name] for each of names once per iteration of b.Loop,
// rotating which goes first, and returns the totals.
func Run(b *testing.B, names []string, impls map[string]func()) Result {
	r := Result{Wall: map[string]time.Duration{}, CPU: map[string]time.Duration{}}
	for i := 0; b.Loop(); i++ {
		for k := range names {
			name := names[(i+k)%len(names)]
			c0 := ProcessCPU(b)
			t0 := time.Now()
			impls[name]()
			r.Wall[name] += time.Since(t0)
			r.CPU[name] += ProcessCPU(b) - c0
		}
		r.N++
	}
	return r
}

// ReportEach reports each side's name-ns/op and name-cpu-ns/op.
func (r Result) ReportEach(b *testing.B, names []string) {
	for _, name := range names {
		b.ReportMetric(float64(r.Wall[name].Nanoseconds())/float64(r.N), name+"-ns/op")
	}
	for _, name := range names {
		b.ReportMetric(float64(r.CPU[name].Nanoseconds())/float64(r.N), name+"-cpu-ns/op")
	}
}

// ReportRatio reports side a's times over side base's: a/base (wall) and
// a/base-cpu.
func (r Result) ReportRatio(b *testing.B, a, base string) {
	b.ReportMetric(float64(r.Wall[a])/float64(r.Wall[base]), a+"/"+base)
	b.ReportMetric(float64(r.CPU[a])/float64(r.CPU[base]), a+"/"+base+"-cpu")
}

// ProcessCPU is the process's CPU time so far, user and system.
func ProcessCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
