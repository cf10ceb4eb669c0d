package strategy

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/internal/bttlerr"
)

// Kind names a strategy.
type Kind uint8

const (
	// KindUnmanaged is a family the library does not rewrite or filter.
	KindUnmanaged Kind = iota
	// KindOneSecond is one-second expiry: the timestamp is the expiry instant.
	KindOneSecond
	// KindDefaultExpiry is default expiry: the timestamp is offset by ttl-D.
	KindDefaultExpiry
	// KindSequence is sequence numbers: the timestamp is a version number.
	KindSequence
)

func (k Kind) String() string {
	switch k {
	case KindUnmanaged:
		return "unmanaged"
	case KindOneSecond:
		return "one-second"
	case KindDefaultExpiry:
		return "default-expiry"
	case KindSequence:
		return "sequence"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// OneSecondMaxAge is the GC max age a one-second-expiry family must carry.
const OneSecondMaxAge = time.Second

// MaxTimestamp is the largest timestamp Bigtable accepts at millisecond
// granularity.
const MaxTimestamp = bigtable.Timestamp(math.MaxInt64 - math.MaxInt64%1000)

// RealTimeFloor (2000-01-01T00:00:00Z) tells the two kinds of stored
// timestamps apart: one at or after it is taken for a real time (a write
// time, a server timestamp, an expiry instant), one before it for a
// sequence number, seq*1000 with seq below 946,684,800,000. A sequence
// scheme whose numbers are that large (milliseconds since the epoch, say)
// cannot be told from real times, and a real time before 2000 is not one
// bttl or a live system writes.
const RealTimeFloor = bigtable.Timestamp(946_684_800_000_000)

// MaxSequence is the largest sequence number a sequence family takes: the
// last one whose timestamp, seq*1000, sorts below RealTimeFloor. A larger
// one could not be told from a real time, by the adoption checks or by a
// reader, so it is refused like a real time written as a sequence.
const MaxSequence = int64(RealTimeFloor)/1000 - 1

// maxVersions is the largest max-versions limit a GC rule can hold:
// Bigtable's GcRule.max_num_versions is an int32 (the Go client's
// MaxVersionsPolicy converts without a check, so a larger n would wrap).
const maxVersions = math.MaxInt32

// Policy is the TTL policy of one column family: its strategy and parameters.
// The zero value is an unmanaged family. Build one with OneSecond,
// DefaultExpiry, Sequence or Unmanaged.
type Policy struct {
	kind        Kind
	defaultTTL  time.Duration // D for default expiry; optional default for one-second
	versions    int           // N for sequence; a union max-versions rule for the age strategies
	singleValue bool
	idleTTL     time.Duration // time-to-idle: a read cell is refreshed to expire idleTTL later
	debounce    float64       // fraction of idleTTL (WithIdleTTL)
	maxTTL      time.Duration // a cap on a cell's TTL; zero: no cap
	clampTTL    bool          // a TTL over maxTTL is lowered to it, not refused
	writeTime   bool          // every cell records its real write time (companion cell)
	// given records the options given with a zero or out-of-range value
	// that would otherwise read as "none" (WithMaxVersions(0),
	// WithMaxTTL(0, ...), WithIdleTTL(0, ...)), so Validate refuses them
	// instead of dropping them silently.
	given optionSet
	over  OverMaxTTL // WithMaxTTL's over, kept to refuse an undefined value
}

// optionSet is a set of options given to a policy's constructor.
type optionSet uint8

const (
	givenMaxVersions optionSet = 1 << iota
	givenMaxTTL
	givenIdleTTL
)

// OneSecond is one-second expiry: GC max age 1s, each cell's timestamp is the
// moment it expires. It cannot be adopted on a family that holds real
// timestamps: they would all expire.
func OneSecond(opts ...OneSecondOption) Policy {
	p := Policy{kind: KindOneSecond}
	for _, o := range opts {
		o.applyOneSecond(&p)
	}
	return p
}

// DefaultExpiry is default expiry with default TTL d: GC max age d, a cell
// that must live ttl is written at ms(now+ttl-D). Safe on an existing table.
func DefaultExpiry(d time.Duration, opts ...AgeOption) Policy {
	p := Policy{kind: KindDefaultExpiry, defaultTTL: d}
	for _, o := range opts {
		o.applyAge(&p)
	}
	return p
}

// Sequence is sequence numbers keeping the n highest versions of a column:
// GC max versions n, timestamp seq*1000. It takes no options: every option
// is about time, and a sequence family's timestamps are versions.
func Sequence(n int) Policy { return Policy{kind: KindSequence, versions: n} }

// Unmanaged declares a family the library passes through untouched: no
// rewrite, no read filter.
func Unmanaged() Policy { return Policy{} }

// Kind reports the policy's strategy.
func (p Policy) Kind() Kind { return p.kind }

// Managed reports whether the library rewrites and filters the family.
func (p Policy) Managed() bool { return p.kind != KindUnmanaged }

// DefaultTTL is the TTL given to a cell written without one (D for default
// expiry; zero when there is none).
func (p Policy) DefaultTTL() time.Duration { return p.defaultTTL }

// idleThreshold is the remaining TTL, in microseconds, below which a read
// cell is refreshed: idleTTL*(1-debounce), rounded down.
func (p Policy) idleThreshold() bigtable.Timestamp {
	return bigtable.Timestamp(float64(p.idleTTL/time.Microsecond) * (1 - p.IdleDebounce()))
}

// NeedsIdleRefresh reports whether a cell with timestamp ts, read at t, is
// due for a time-to-idle refresh: the family has an idle TTL, the cell is
// live at t, and its remaining TTL is below the idle TTL less the debounce.
func (p Policy) NeedsIdleRefresh(ts, t bigtable.Timestamp) bool {
	if p.idleTTL <= 0 || !p.IsLive(ts, t) {
		return false
	}
	left, ok := p.Remaining(ts, t)
	// !ok: more left than int64 microseconds hold, never due.
	return ok && left < p.idleThreshold()
}

// IdleRefreshTimestamp is the timestamp a time-to-idle refresh at now moves
// a cell to: the family's timestamp for a cell that must live the idle TTL
// (WriteTimestamp(now, IdleTTL())).
func (p Policy) IdleRefreshTimestamp(now time.Time) (bigtable.Timestamp, error) {
	if p.idleTTL <= 0 {
		return 0, fmt.Errorf("%w: %s has no idle TTL", ErrWrongCellOption, p)
	}
	return p.WriteTimestamp(now, p.idleTTL)
}

// MaxAge is the GC max age the family must carry (zero for sequence and
// unmanaged families).
func (p Policy) MaxAge() time.Duration {
	switch p.kind {
	case KindOneSecond:
		return OneSecondMaxAge
	case KindDefaultExpiry:
		return p.defaultTTL
	}
	return 0
}

func (p Policy) String() string {
	s := p.kind.String()
	switch p.kind {
	case KindDefaultExpiry:
		s += fmt.Sprintf("(D=%s)", p.defaultTTL)
	case KindSequence:
		s += fmt.Sprintf("(N=%d)", p.versions)
	}
	if p.given&givenMaxVersions != 0 {
		s += fmt.Sprintf("+maxversions(%d)", p.versions)
	}
	if p.singleValue {
		s += "+single-value"
	}
	if p.given&givenIdleTTL != 0 {
		s += fmt.Sprintf("+idle(%s,debounce=%g)", p.idleTTL, p.debounce)
	}
	if p.given&givenMaxTTL != 0 {
		s += fmt.Sprintf("+maxttl(%s)", p.maxTTL)
		switch p.over {
		case RefuseLonger:
		case ClampLonger:
			s += "+clamp"
		default:
			s += "+" + p.over.String()
		}
	}
	if p.writeTime {
		s += "+writetime"
	}
	return s
}

// Validate reports a policy that cannot work: a *PolicyError, wrapping
// ErrInvalidPolicy, naming the parameter at fault. The options' types keep
// out what does not fit the strategy; Validate checks the values: each in
// range, and none over the max TTL.
func (p Policy) Validate() error {
	bad := func(param Param, format string, a ...any) error {
		return &PolicyError{Policy: p, Param: param, Reason: fmt.Sprintf(format, a...)}
	}
	switch p.kind {
	case KindUnmanaged:
		return nil
	case KindOneSecond:
		if p.defaultTTL < 0 || (p.defaultTTL > 0 && p.defaultTTL < time.Millisecond) {
			return bad(ParamDefaultTTL, "default TTL %s must be at least 1ms", p.defaultTTL)
		}
	case KindDefaultExpiry:
		if p.defaultTTL < time.Millisecond || p.defaultTTL%time.Millisecond != 0 {
			return bad(ParamDefaultTTL, "default TTL %s must be a positive whole number of milliseconds", p.defaultTTL)
		}
	case KindSequence:
		if p.versions < 1 {
			return bad(ParamVersions, "must keep at least 1 version")
		}
		if p.versions > maxVersions {
			return bad(ParamVersions, "%d versions is over %d, the most a GC rule can keep (GcRule.max_num_versions is an int32)", p.versions, maxVersions)
		}
		return nil
	default:
		return bad(ParamKind, "unknown kind")
	}
	if p.given&givenMaxVersions != 0 {
		if p.versions < 1 {
			return bad(ParamMaxVersions, "max versions %d must be at least 1 (omit WithMaxVersions for no limit)", p.versions)
		}
		if p.versions > maxVersions {
			return bad(ParamMaxVersions, "max versions %d is over %d, the most a GC rule can keep (GcRule.max_num_versions is an int32)", p.versions, maxVersions)
		}
	}
	if p.given&givenIdleTTL != 0 {
		if p.idleTTL < time.Millisecond {
			return bad(ParamIdleTTL, "idle TTL %s must be at least 1ms", p.idleTTL)
		}
		if !(p.debounce >= 0 && p.debounce < 1) { // also NaN
			return bad(ParamIdleDebounce, "idle debounce %g must be a fraction of the idle TTL in [0, 1)", p.debounce)
		}
	}
	if p.given&givenMaxTTL != 0 {
		if p.maxTTL < time.Millisecond {
			return bad(ParamMaxTTL, "max TTL %s must be at least 1ms", p.maxTTL)
		}
		if p.over != RefuseLonger && p.over != ClampLonger {
			return bad(ParamOverMaxTTL, "%s is neither RefuseLonger nor ClampLonger", p.over)
		}
		if p.defaultTTL > p.maxTTL && (p.kind == KindDefaultExpiry || !p.clampTTL) {
			return bad(ParamMaxTTL, "default TTL %s is over the max TTL %s", p.defaultTTL, p.maxTTL)
		}
		if p.idleTTL > p.maxTTL {
			// Even with ClampLonger: a refresh clamped below the idle TTL
			// less the debounce would be due again at once, on every read.
			return bad(ParamIdleTTL, "idle TTL %s is over the max TTL %s", p.idleTTL, p.maxTTL)
		}
	}
	return nil
}

// GCPolicy is the GC rule the family must carry: max age for the age
// strategies (in union with max versions when set), max versions for
// sequence families, none for unmanaged ones.
func (p Policy) GCPolicy() bigtable.GCPolicy {
	switch p.kind {
	case KindOneSecond, KindDefaultExpiry:
		age := bigtable.MaxAgePolicy(p.MaxAge())
		if p.versions > 0 {
			return bigtable.UnionPolicy(age, bigtable.MaxVersionsPolicy(p.versions))
		}
		return age
	case KindSequence:
		return bigtable.MaxVersionsPolicy(p.versions)
	}
	return bigtable.NoGcPolicy()
}

// Millis rounds ts down to the millisecond (toward minus infinity).
func Millis(ts bigtable.Timestamp) bigtable.Timestamp {
	r := ts % 1000
	if r < 0 {
		r += 1000
	}
	return ts - r
}

// MilliEnd is the end of the millisecond holding ts, as the exclusive end
// of a timestamp range: Millis(ts)+1000, or 0 for the last millisecond
// (MaxTimestamp's), where that sum would overflow int64. 0 is "no end" to
// bigtable.TimestampRangeFilterMicros and Mutation.DeleteTimestampRange,
// and no timestamp lies past that millisecond, so [Millis(ts),
// MilliEnd(ts)) is exactly ts's millisecond for every ts >= 0.
func MilliEnd(ts bigtable.Timestamp) bigtable.Timestamp {
	if Millis(ts) >= MaxTimestamp {
		return 0
	}
	return Millis(ts) + 1000
}

// firstMilliAfter is the smallest multiple of 1000 strictly greater than ts,
// saturated at MaxTimestamp: past it the sum would wrap to a negative bound
// and a read filter starting there would let every cell through.
func firstMilliAfter(ts bigtable.Timestamp) bigtable.Timestamp {
	if Millis(ts) >= MaxTimestamp {
		return MaxTimestamp
	}
	return Millis(ts) + 1000
}

// WriteTimestamp is the timestamp to write, at now, for a cell that must live
// ttl: ms(now+ttl) for one-second expiry, ms(now+ttl-D) for default expiry.
// The sum is taken in nanoseconds and truncated once, so a clock reading's
// sub-microsecond part carries into the result as the TTL's does (clock
// T+999.6µs and ttl 1ms+500ns give T+2000µs). ttl must be at least 1ms (the
// timestamp precision), and the result must lie in [0, MaxTimestamp].
func (p Policy) WriteTimestamp(now time.Time, ttl time.Duration) (bigtable.Timestamp, error) {
	if ttl < time.Millisecond {
		return 0, fmt.Errorf("%w: %s is below 1ms, the timestamp precision", ErrInvalidTTL, ttl)
	}
	ttl, err := p.CapTTL(ttl)
	if err != nil {
		return 0, err
	}
	var offset time.Duration
	switch p.kind {
	case KindOneSecond:
		offset = ttl
	case KindDefaultExpiry:
		offset = ttl - p.defaultTTL // no overflow: both are positive
	default:
		return 0, fmt.Errorf("%w: a %s family takes no TTL", ErrWrongCellOption, p.kind)
	}
	ts, ok := addNanos(now, offset)
	if !ok || Millis(ts) > MaxTimestamp {
		return 0, fmt.Errorf("%w: now %s + %s", ErrTimestampOverflow, formatTime(now), ttl)
	}
	ts = Millis(ts)
	if ts < 0 {
		return 0, fmt.Errorf("%w: now %s + %s - D lands at %d", ErrBeforeEpoch, formatTime(now), ttl, ts)
	}
	return ts, nil
}

// CapTTL applies the family's max TTL to ttl: ttl itself when there is no
// cap or it is within it, the cap when the family clamps, and otherwise
// ErrTTLTooLong.
func (p Policy) CapTTL(ttl time.Duration) (time.Duration, error) {
	if p.maxTTL == 0 || ttl <= p.maxTTL {
		return ttl, nil
	}
	if p.clampTTL {
		return p.maxTTL, nil
	}
	return 0, fmt.Errorf("%w: %s is over the family's max TTL %s", ErrTTLTooLong, ttl, p.maxTTL)
}

// addNanos is now+d in microseconds, rounded down once: the sum is exact in
// nanoseconds however far now is from the Unix epoch (where UnixNano would
// overflow), false when it does not fit in int64 microseconds.
func addNanos(now time.Time, d time.Duration) (bigtable.Timestamp, bool) {
	us, sub := bigtable.Timestamp(now.UnixMicro()), time.Duration(now.Nanosecond()%1000)
	dus, drem := d/time.Microsecond, d%time.Microsecond
	if drem < 0 { // round d down, so drem is in [0, 1µs)
		drem += time.Microsecond
		dus--
	}
	ts, ok := addTimestamp(us, bigtable.Timestamp(dus))
	if !ok {
		return 0, false
	}
	return addTimestamp(ts, bigtable.Timestamp((sub+drem)/time.Microsecond)) // a carry of 0 or 1
}

// formatTime is t in the project's one time format, RFC 3339 UTC, to the
// nanosecond.
func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// DefaultTimestamp is the timestamp to write, at now, for a cell written
// without a TTL: the policy's default TTL. A one-second family without a
// default TTL has none to give: ErrServerTimestamp.
func (p Policy) DefaultTimestamp(now time.Time) (bigtable.Timestamp, error) {
	switch p.kind {
	case KindOneSecond, KindDefaultExpiry:
		if p.defaultTTL == 0 {
			return 0, fmt.Errorf("%w: a one-second family without a default TTL needs a TTL per cell", ErrServerTimestamp)
		}
		return p.WriteTimestamp(now, p.defaultTTL)
	case KindSequence:
		return 0, fmt.Errorf("%w: a sequence family needs a sequence number per cell", ErrServerTimestamp)
	}
	return 0, fmt.Errorf("%w: an unmanaged family keeps the caller's timestamp", ErrWrongCellOption)
}

// SequenceTimestamp is the timestamp of version seq: seq*1000, seq >= 1.
func (p Policy) SequenceTimestamp(seq int64) (bigtable.Timestamp, error) {
	if p.kind != KindSequence {
		return 0, fmt.Errorf("%w: a %s family takes no sequence number", ErrWrongCellOption, p.kind)
	}
	if seq < 1 {
		return 0, fmt.Errorf("%w: %d is below 1", ErrInvalidSequence, seq)
	}
	if seq > MaxSequence {
		return 0, fmt.Errorf("%w: %d is over %d, the largest sequence number (seq*1000 must sort below %s, where real times start)",
			ErrInvalidSequence, seq, MaxSequence, RealTimeFloor.Time().UTC().Format(time.RFC3339))
	}
	return bigtable.Timestamp(seq * 1000), nil
}

// CheckExplicit validates a timestamp the caller gave for a cell of a managed
// family and returns what to write. On a one-second family it is the expiry
// instant and must be after now; on a default-expiry family it is a real
// write time whose cell must still be live at now; on a sequence family it is
// seq*1000 and must be an exact, positive multiple of 1000 (truncating could
// merge two versions). now is in microseconds, which is exact for these
// comparisons (stored timestamps are whole milliseconds). bigtable.ServerTime
// gets DefaultTimestamp at now; a caller holding the clock reading should
// call DefaultTimestamp with it, to keep its sub-microsecond part.
func (p Policy) CheckExplicit(now, ts bigtable.Timestamp) (bigtable.Timestamp, error) {
	c := NewExplicitCheck(p, now)
	return c.Check(ts)
}

// ExplicitCheck is CheckExplicit at one now for many timestamps of one
// family: it works out the family's live bound at now once, where
// CheckExplicit does it for every timestamp. The write path checks a
// mutation's explicit timestamps with one per family. The zero value checks
// as an unmanaged family does.
type ExplicitCheck struct {
	p        Policy
	now      bigtable.Timestamp
	liveFrom bigtable.Timestamp // age strategies: LiveFrom(now)
	expired  bool               // age strategies: AllExpired(now)
}

// NewExplicitCheck is the check of p's explicit timestamps at now (in
// microseconds).
func NewExplicitCheck(p Policy, now bigtable.Timestamp) ExplicitCheck {
	c := ExplicitCheck{p: p, now: now}
	if p.kind == KindOneSecond || p.kind == KindDefaultExpiry {
		c.liveFrom, c.expired = p.LiveFrom(now), p.AllExpired(now)
	}
	return c
}

// Check is p.CheckExplicit(now, ts).
func (c *ExplicitCheck) Check(ts bigtable.Timestamp) (bigtable.Timestamp, error) {
	p, now := &c.p, c.now
	if ts == bigtable.ServerTime {
		return p.DefaultTimestamp(time.UnixMicro(int64(now)))
	}
	if ts < 0 {
		return 0, fmt.Errorf("%w: timestamp %d", ErrBeforeEpoch, ts)
	}
	switch p.kind {
	case KindSequence:
		if ts < 1000 || ts%1000 != 0 {
			return 0, fmt.Errorf("%w: timestamp %d is not seq*1000 with seq >= 1", ErrInvalidSequence, ts)
		}
		if ts >= RealTimeFloor {
			// A real time (bigtable.Now(), a legacy write time) would
			// outrank every sequence number and hide later revisions.
			return 0, fmt.Errorf("%w: timestamp %d is a real time (%s), not seq*1000 with seq <= %d",
				ErrInvalidSequence, ts, ts.Time().UTC().Format(time.RFC3339Nano), MaxSequence)
		}
		return ts, nil
	case KindOneSecond, KindDefaultExpiry:
		ms := Millis(ts)
		if ms < c.liveFrom || c.expired { // !p.IsLive(ms, now)
			return 0, fmt.Errorf("%w: timestamp %d has expired at now %d", ErrAlreadyExpired, ts, now)
		}
		if p.maxTTL > 0 {
			// The TTL the timestamp implies, in microseconds, exact: a
			// live cell's is positive, and one too long for int64
			// microseconds (!ok) is over any cap.
			if left, ok := p.Remaining(ms, now); !ok || left > bigtable.Timestamp(p.maxTTL/time.Microsecond) {
				if !p.clampTTL {
					implied := fmt.Sprintf("%dµs", left)
					if !ok {
						implied = "over int64 microseconds"
					}
					return 0, fmt.Errorf("%w: timestamp %d gives a TTL of %s, over the family's max TTL %s",
						ErrTTLTooLong, ts, implied, p.maxTTL)
				}
				return p.WriteTimestamp(time.UnixMicro(int64(now)), p.maxTTL)
			}
		}
		return ms, nil
	}
	return Millis(ts), nil
}

// LiveFrom is the smallest timestamp of a live cell at read time t (age
// strategies): the start of the read filter's timestamp range. It saturates
// at MaxTimestamp, where AllExpired(t) may hold: then no cell is live.
func (p Policy) LiveFrom(t bigtable.Timestamp) bigtable.Timestamp {
	switch p.kind {
	case KindOneSecond:
		return firstMilliAfter(t)
	case KindDefaultExpiry:
		lo, ok := addTimestamp(t, -bigtable.Timestamp(p.defaultTTL/time.Microsecond))
		if !ok || lo < 0 {
			return 0
		}
		return firstMilliAfter(lo)
	}
	return 0
}

// AllExpired reports whether no cell of an age-strategy family can be live
// at read time t: the first live timestamp would lie past MaxTimestamp, the
// largest Bigtable stores. That happens to a one-second family once t
// reaches MaxTimestamp. LiveFrom saturates at MaxTimestamp there, so a read
// filter must test AllExpired rather than rely on LiveFrom alone.
func (p Policy) AllExpired(t bigtable.Timestamp) bool {
	switch p.kind {
	case KindOneSecond:
		return Millis(t) >= MaxTimestamp
	case KindDefaultExpiry:
		lo, ok := addTimestamp(t, -bigtable.Timestamp(p.defaultTTL/time.Microsecond))
		return ok && Millis(lo) >= MaxTimestamp
	}
	return false
}

// IsLive reports whether an age-strategy cell with timestamp ts is live at
// t, by its age alone (a sequence cell's liveness depends on its column).
func (p Policy) IsLive(ts, t bigtable.Timestamp) bool {
	switch p.kind {
	case KindOneSecond, KindDefaultExpiry:
		return ts >= p.LiveFrom(t) && !p.AllExpired(t)
	}
	return true
}

// Expiry is the instant a cell with timestamp ts stops being live (age
// strategies); zero for families whose cells do not expire by age. On a
// default-expiry family an instant past the largest int64 microsecond (ts
// within D of it) is returned as MaxTimestamp: use ExpiryTime or Remaining
// where that instant must be exact.
func (p Policy) Expiry(ts bigtable.Timestamp) bigtable.Timestamp {
	switch p.kind {
	case KindOneSecond:
		return ts
	case KindDefaultExpiry:
		e, ok := addTimestamp(ts, bigtable.Timestamp(p.defaultTTL/time.Microsecond))
		if !ok {
			return MaxTimestamp
		}
		return e
	}
	return 0
}

// ExpiryTime is Expiry as a time.Time, exact for every timestamp (past
// the largest int64 microsecond too, where Expiry saturates); the zero
// time for families whose cells do not expire by age.
func (p Policy) ExpiryTime(ts bigtable.Timestamp) time.Time {
	switch p.kind {
	case KindOneSecond:
		return time.UnixMicro(int64(ts))
	case KindDefaultExpiry:
		return time.UnixMicro(int64(ts)).Add(p.defaultTTL)
	}
	return time.Time{}
}

// Remaining is the TTL a cell with timestamp ts has left at read time t,
// in microseconds: its expiry minus t, exact. ok is false when the
// difference does not fit in int64 (a default-expiry cell within D of the
// largest timestamp, read long before it) and for families whose cells do
// not expire by age.
func (p Policy) Remaining(ts, t bigtable.Timestamp) (bigtable.Timestamp, bool) {
	switch p.kind {
	case KindOneSecond:
		return subTimestamp(ts, t)
	case KindDefaultExpiry:
		d := bigtable.Timestamp(p.defaultTTL / time.Microsecond)
		if left, ok := subTimestamp(ts, t); ok {
			return addTimestamp(left, d)
		}
		// ts-t overflowed: toward +inf when t < 0 (then so does the sum,
		// d >= 0), toward -inf when ts < 0 (then ts+d cannot).
		e, ok := addTimestamp(ts, d)
		if !ok {
			return 0, false
		}
		return subTimestamp(e, t)
	}
	return 0, false
}

func subTimestamp(a, b bigtable.Timestamp) (bigtable.Timestamp, bool) {
	s := a - b
	if (b > 0 && s > a) || (b < 0 && s < a) {
		return 0, false
	}
	return s, true
}

func addTimestamp(a, b bigtable.Timestamp) (bigtable.Timestamp, bool) {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		return 0, false
	}
	return s, true
}

// Schema maps column family names to their policies. A family that is not
// named is read untouched, but the client refuses writes to it: name it
// with Unmanaged to write it without a TTL.
type Schema map[string]Policy

// familyName is Bigtable's rule for column family names.
var familyName = regexp.MustCompile(`^[_a-zA-Z0-9][-_.a-zA-Z0-9]*$`)

// Validate checks every family name and policy: a *PolicyError (with its
// Family set) for the first that cannot work.
func (s Schema) Validate() error {
	for fam, p := range s {
		if !familyName.MatchString(fam) || len(fam) > 64 {
			return &PolicyError{Family: fam, Param: ParamFamilyName,
				Reason: "want 1 to 64 of [-_.a-zA-Z0-9], not starting with - or ."}
		}
		if err := p.Validate(); err != nil {
			var pe *PolicyError
			if errors.As(err, &pe) {
				cp := *pe
				cp.Family = fam
				err = &cp
			}
			return bttlerr.Wrap(err, "family %q", fam)
		}
	}
	return nil
}
