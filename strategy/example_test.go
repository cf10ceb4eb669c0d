package strategy_test

import (
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/strategy"
)

// exTime is a fixed read/write time so the outputs below are stable; exNow
// is it in microseconds.
var (
	exTime = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	exNow  = bigtable.Time(exTime)
)

// rel prints a timestamp relative to exNow.
func rel(ts bigtable.Timestamp) string {
	d := ts.Time().Sub(exNow.Time())
	if d < 0 {
		return "now" + d.String()
	}
	return "now+" + d.String()
}

func ExampleOneSecond() {
	p := strategy.OneSecond()
	ts, _ := p.WriteTimestamp(exTime, 30*time.Minute)
	fmt.Println(p, "GC rule:", p.GCPolicy())
	fmt.Println("a 30m cell is written at", rel(ts), "(its expiry instant)")
	// Output:
	// one-second GC rule: age() > 1000000
	// a 30m cell is written at now+30m0s (its expiry instant)
}

func ExampleDefaultExpiry() {
	p := strategy.DefaultExpiry(48 * time.Hour)
	def, _ := p.DefaultTimestamp(exTime)
	short, _ := p.WriteTimestamp(exTime, time.Hour)
	long, _ := p.WriteTimestamp(exTime, 72*time.Hour)
	fmt.Println(p, "GC rule:", p.GCPolicy())
	fmt.Println("default cell:", rel(def))
	fmt.Println("1h cell:     ", rel(short))
	fmt.Println("72h cell:    ", rel(long))
	// Output:
	// default-expiry(D=48h0m0s) GC rule: age() > 2d
	// default cell: now+0s
	// 1h cell:      now-47h0m0s
	// 72h cell:     now+24h0m0s
}

func ExampleSequence() {
	p := strategy.Sequence(3)
	ts, _ := p.SequenceTimestamp(7)
	fmt.Println(p, "GC rule:", p.GCPolicy())
	fmt.Println("revision 7 is written at timestamp", ts)
	// Output:
	// sequence(N=3) GC rule: versions() > 3
	// revision 7 is written at timestamp 7000
}

func ExampleUnmanaged() {
	p := strategy.Unmanaged()
	fmt.Println(p, p.Managed())
	// Output: unmanaged false
}

func ExampleWithMaxVersions() {
	p := strategy.DefaultExpiry(time.Hour, strategy.WithMaxVersions(2))
	fmt.Println(p, "GC rule:", p.GCPolicy())
	// Output: default-expiry(D=1h0m0s)+maxversions(2) GC rule: (age() > 1h || versions() > 2)
}

func ExampleWithDefaultTTL() {
	bare := strategy.OneSecond()
	_, err := bare.DefaultTimestamp(exTime)
	fmt.Println(errors.Is(err, strategy.ErrServerTimestamp))

	p := strategy.OneSecond(strategy.WithDefaultTTL(15 * time.Minute))
	ts, _ := p.DefaultTimestamp(exTime)
	fmt.Println(rel(ts))
	// Output:
	// true
	// now+15m0s
}

func ExampleSingleValue() {
	p := strategy.DefaultExpiry(time.Hour, strategy.SingleValue())
	fmt.Println(p, p.IsSingleValue())
	// Output: default-expiry(D=1h0m0s)+single-value true
}

func ExampleMillis() {
	fmt.Println(strategy.Millis(1234567), strategy.Millis(-1))
	// Output: 1234000 -1000
}

func ExamplePolicy_Kind() {
	fmt.Println(strategy.OneSecond().Kind(), strategy.Sequence(1).Kind() == strategy.KindSequence)
	// Output: one-second true
}

func ExamplePolicy_Managed() {
	fmt.Println(strategy.Unmanaged().Managed(), strategy.OneSecond().Managed())
	// Output: false true
}

func ExamplePolicy_DefaultTTL() {
	fmt.Println(strategy.DefaultExpiry(48*time.Hour).DefaultTTL(), strategy.OneSecond().DefaultTTL())
	// Output: 48h0m0s 0s
}

func ExamplePolicy_Versions() {
	fmt.Println(strategy.Sequence(5).Versions(), strategy.OneSecond(strategy.WithMaxVersions(2)).Versions())
	// Output: 5 2
}

func ExamplePolicy_IsSingleValue() {
	fmt.Println(strategy.OneSecond().IsSingleValue(), strategy.OneSecond(strategy.SingleValue()).IsSingleValue())
	// Output: false true
}

func ExamplePolicy_MaxAge() {
	fmt.Println(strategy.OneSecond().MaxAge(), strategy.DefaultExpiry(time.Hour).MaxAge(), strategy.Sequence(3).MaxAge())
	// Output: 1s 1h0m0s 0s
}

func ExamplePolicy_Validate() {
	err := strategy.Sequence(0).Validate()
	fmt.Println(errors.Is(err, strategy.ErrInvalidPolicy))
	fmt.Println(err)
	// Output:
	// true
	// bttl: invalid policy: sequence(N=0): must keep at least 1 version
}

func ExamplePolicy_GCPolicy() {
	// The rule to set with bigtable.AdminClient.SetGCPolicy.
	for _, p := range []strategy.Policy{strategy.OneSecond(), strategy.DefaultExpiry(24 * time.Hour), strategy.Sequence(10)} {
		fmt.Println(p.GCPolicy())
	}
	// Output:
	// age() > 1000000
	// age() > 1d
	// versions() > 10
}

func ExamplePolicy_WriteTimestamp() {
	p := strategy.DefaultExpiry(48 * time.Hour)
	ts, _ := p.WriteTimestamp(exTime, 2*time.Hour)
	fmt.Println(rel(ts), ts%1000 == 0)

	_, err := p.WriteTimestamp(exTime, 0)
	fmt.Println(errors.Is(err, strategy.ErrInvalidTTL))
	// Output:
	// now-46h0m0s true
	// true
}

func ExamplePolicy_DefaultTimestamp() {
	ts, _ := strategy.DefaultExpiry(48 * time.Hour).DefaultTimestamp(exTime)
	fmt.Println(rel(ts))
	_, err := strategy.Sequence(3).DefaultTimestamp(exTime)
	fmt.Println(errors.Is(err, strategy.ErrServerTimestamp))
	// Output:
	// now+0s
	// true
}

func ExamplePolicy_SequenceTimestamp() {
	p := strategy.Sequence(3)
	ts, _ := p.SequenceTimestamp(42)
	fmt.Println(ts)
	_, err := p.SequenceTimestamp(0)
	fmt.Println(errors.Is(err, strategy.ErrInvalidSequence))
	// Output:
	// 42000
	// true
}

func ExamplePolicy_CheckExplicit() {
	one := strategy.OneSecond()
	// On a one-second family an explicit timestamp is the expiry instant:
	// a "real" timestamp (now) has already expired.
	_, err := one.CheckExplicit(exNow, exNow)
	fmt.Println(errors.Is(err, strategy.ErrAlreadyExpired))
	ts, _ := one.CheckExplicit(exNow, exNow+1_500_123)
	fmt.Println(rel(ts))
	// Output:
	// true
	// now+1.5s
}

func ExampleNewExplicitCheck() {
	// One check for a mutation's cells of a family, at one clock reading.
	p := strategy.DefaultExpiry(time.Hour)
	c := strategy.NewExplicitCheck(p, exNow)
	for _, ts := range []bigtable.Timestamp{exNow - 10_000_000, exNow - 2*3_600_000_000} {
		_, err := c.Check(ts)
		fmt.Println(err == nil, errors.Is(err, strategy.ErrAlreadyExpired))
	}
	// Output:
	// true false
	// false true
}

func ExampleExplicitCheck_Check() {
	c := strategy.NewExplicitCheck(strategy.Sequence(3), exNow)
	ts, err := c.Check(7000)
	fmt.Println(ts, err)
	_, err = c.Check(7500) // not seq*1000
	fmt.Println(errors.Is(err, strategy.ErrInvalidSequence))
	// Output:
	// 7000 <nil>
	// true
}

func ExamplePolicy_LiveFrom() {
	p := strategy.DefaultExpiry(48 * time.Hour)
	// The read filter keeps timestamps >= LiveFrom(now).
	fmt.Println(rel(p.LiveFrom(exNow)))
	// Output: now-47h59m59.999s
}

func ExamplePolicy_IsLive() {
	p := strategy.OneSecond()
	ts, _ := p.WriteTimestamp(exTime, time.Minute)
	fmt.Println(p.IsLive(ts, exNow), p.IsLive(ts, exNow+bigtable.Timestamp(time.Minute/time.Microsecond)))
	// Output: true false
}

func ExamplePolicy_AllExpired() {
	p := strategy.OneSecond()
	// Past the largest timestamp Bigtable stores, no one-second cell is
	// live: LiveFrom saturates, AllExpired says so.
	end := strategy.MaxTimestamp + 500
	fmt.Println(p.AllExpired(exNow), p.AllExpired(end), p.LiveFrom(end) == strategy.MaxTimestamp, p.IsLive(strategy.MaxTimestamp, end))
	// Output: false true true false
}

func ExamplePolicy_Expiry() {
	p := strategy.DefaultExpiry(48 * time.Hour)
	ts, _ := p.WriteTimestamp(exTime, time.Hour)
	fmt.Println(rel(p.Expiry(ts)))
	// Output: now+1h0m0s
}

// Options are typed by the strategies that take them: an option a
// strategy cannot take does not compile there (Sequence takes none;
// DefaultExpiry does not take WithDefaultTTL, its d is the default TTL).
// Options every age strategy takes can be shared.
func ExampleAgeOption() {
	shared := []strategy.AgeOption{strategy.WithMaxVersions(1), strategy.WithWriteTime()}
	fmt.Println(strategy.DefaultExpiry(time.Hour, shared...))
	fmt.Println(strategy.OneSecond(strategy.WithDefaultTTL(time.Minute), shared[0], shared[1]))
	// Output:
	// default-expiry(D=1h0m0s)+maxversions(1)+writetime
	// one-second+maxversions(1)+writetime
}

// What types cannot express, Validate refuses with a *PolicyError naming
// the parameter at fault.
func ExamplePolicyError() {
	err := strategy.DefaultExpiry(2*time.Hour, strategy.WithMaxTTL(time.Hour, strategy.RefuseLonger)).Validate()
	var pe *strategy.PolicyError
	fmt.Println(errors.As(err, &pe), pe.Param)
	fmt.Println(err)
	// Output:
	// true max TTL
	// bttl: invalid policy: default-expiry(D=2h0m0s)+maxttl(1h0m0s): default TTL 2h0m0s is over the max TTL 1h0m0s
}

func ExampleSchema_Validate() {
	s := strategy.Schema{
		"clicks":  strategy.DefaultExpiry(48 * time.Hour),
		"bad fam": strategy.Unmanaged(),
	}
	fmt.Println(s.Validate())
	// Output: bttl: invalid policy: family name "bad fam": want 1 to 64 of [-_.a-zA-Z0-9], not starting with - or .
}

// A write-time companion: its qualifier for column "token", and its value
// read back.
func ExampleWriteTimeColumn() {
	fmt.Printf("%q\n", strategy.WriteTimeColumn("token"))
	// Output: "\xff\xffbttl.wt\x00token"
}

func ExampleWriteTimeValue() {
	v := strategy.WriteTimeValue(bigtable.Timestamp(1_700_000_000_123_456))
	fmt.Println(len(v), v)
	// Output: 8 [0 6 10 36 24 32 32 120]
}

func ExampleParseWriteTime() {
	wt, err := strategy.ParseWriteTime(strategy.WriteTimeValue(1_700_000_000_123_456))
	fmt.Println(wt, err)
	_, err = strategy.ParseWriteTime([]byte("short"))
	fmt.Println(err)
	// Output:
	// 1700000000123000 <nil>
	// bttl: write-time companion value is not 8 bytes
}

func ExampleWithIdleTTL() {
	// Sessions live 30 minutes after their last read.
	p := strategy.OneSecond(strategy.WithIdleTTL(30*time.Minute, strategy.DefaultIdleDebounce))
	fmt.Println(p)
	// Output: one-second+idle(30m0s,debounce=0.1)
}

// The debounce is WithIdleTTL's second argument, a fraction of the idle
// TTL.
func ExampleWithIdleTTL_debounce() {
	p := strategy.OneSecond(strategy.WithIdleTTL(30*time.Minute, 0.25))
	// Refreshed once less than 22m30s remain: at most one rewrite per 7m30s.
	fmt.Println(p.IdleDebounce(), p.NeedsIdleRefresh(exNow+bigtable.Timestamp(23*time.Minute/time.Microsecond), exNow))
	fmt.Println(p.NeedsIdleRefresh(exNow+bigtable.Timestamp(22*time.Minute/time.Microsecond), exNow))
	// Output:
	// 0.25 false
	// true
}

func ExamplePolicy_IdleTTL() {
	fmt.Println(strategy.DefaultExpiry(time.Hour, strategy.WithIdleTTL(10*time.Minute, strategy.DefaultIdleDebounce)).IdleTTL())
	// Output: 10m0s
}

func ExamplePolicy_IdleDebounce() {
	fmt.Println(strategy.OneSecond(strategy.WithIdleTTL(time.Hour, strategy.DefaultIdleDebounce)).IdleDebounce())
	// Output: 0.1
}

func ExamplePolicy_NeedsIdleRefresh() {
	p := strategy.OneSecond(strategy.WithIdleTTL(time.Hour, strategy.DefaultIdleDebounce))
	in := func(d time.Duration) bigtable.Timestamp { return exNow + bigtable.Timestamp(d/time.Microsecond) }
	fmt.Println(p.NeedsIdleRefresh(in(55*time.Minute), exNow)) // within the debounce (6m)
	fmt.Println(p.NeedsIdleRefresh(in(50*time.Minute), exNow)) // 10m idle: refresh
	fmt.Println(p.NeedsIdleRefresh(in(3*time.Hour), exNow))    // written with a longer TTL: kept
	fmt.Println(p.NeedsIdleRefresh(exNow, exNow))              // expired: never revived
	// Output:
	// false
	// true
	// false
	// false
}

func ExamplePolicy_IdleRefreshTimestamp() {
	p := strategy.DefaultExpiry(time.Hour, strategy.WithIdleTTL(10*time.Minute, strategy.DefaultIdleDebounce))
	ts, _ := p.IdleRefreshTimestamp(exTime)
	fmt.Println(rel(ts), rel(p.Expiry(ts)))
	// Output: now-50m0s now+10m0s
}

// MilliEnd closes a timestamp's millisecond for a range; for the last
// millisecond, where +1000 would overflow, it is 0: no end.
func ExampleMilliEnd() {
	fmt.Println(strategy.MilliEnd(1_234_567))
	fmt.Println(strategy.MilliEnd(strategy.MaxTimestamp))
	// Output:
	// 1235000
	// 0
}

// ExpiryTime is exact past the largest int64 microsecond, where Expiry
// saturates: a default-expiry cell at the largest timestamp expires D
// after it.
func ExamplePolicy_ExpiryTime() {
	p := strategy.DefaultExpiry(48 * time.Hour)
	exact := p.ExpiryTime(strategy.MaxTimestamp)
	fmt.Println(exact.Sub(time.UnixMicro(int64(strategy.MaxTimestamp))))
	fmt.Println(p.Expiry(strategy.MaxTimestamp) == strategy.MaxTimestamp)
	// Output:
	// 48h0m0s
	// true
}

// Remaining is a cell's TTL left at a read time, in microseconds, exact;
// ok is false when it does not fit in int64.
func ExamplePolicy_Remaining() {
	p := strategy.DefaultExpiry(48 * time.Hour)
	now := strategy.MaxTimestamp - bigtable.Timestamp((24 * time.Hour).Microseconds())
	left, ok := p.Remaining(strategy.MaxTimestamp, now)
	fmt.Println(time.Duration(left)*time.Microsecond, ok)
	_, ok = p.Remaining(strategy.MaxTimestamp, 0)
	fmt.Println(ok)
	// Output:
	// 72h0m0s true
	// false
}
