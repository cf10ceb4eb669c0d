package migratejob

import (
	"fmt"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/strategy"
)

// ExpiredAction says what an in-place migration does with a cell whose
// expiry under the target policy is already past.
type ExpiredAction uint8

const (
	// KeepExpired (the default) leaves it as it is, counted: under a
	// one-second rule its timestamp is an expiry instant already past, so
	// reads through bttl hide it and GC collects it once the rule is
	// applied; `bttl apply` then needs -force, since its scan cannot tell
	// it from a live cell written by mistake.
	KeepExpired ExpiredAction = iota
	// DeleteExpired deletes it (pinned, like a move), only when asked by
	// name: Plan.ExpiredAsOf fixes the instant expiry is judged at and
	// Plan.ExpectExpired must equal the count a dry run reported for it;
	// Run counts first and refuses (ErrExpiredCount) before writing when
	// they differ.
	DeleteExpired
)

func (a ExpiredAction) String() string {
	switch a {
	case DeleteExpired:
		return "delete"
	case KeepExpired:
		return "keep"
	}
	return fmt.Sprintf("ExpiredAction(%d)", uint8(a))
}

// DefaultClockSkew is Plan.ClockSkew when it is zero: how far any writer's
// clock may be from the operator's (who gives FirstSwitch and
// WrittenBefore) and from the Migrator's. NTP keeps machines within
// milliseconds; a few seconds leave room for a VM resumed from a pause.
const DefaultClockSkew = 5 * time.Second

// Plan is one migration: the cells of Family, written under From, are
// rewritten onto To, in place or copied into ToFamily.
//
// Supported: real write times (From strategy.Unmanaged()) to one-second
// expiry in place or by copy; every other pair of real times, one-second
// and default expiry D to one-second or default expiry D' by copy only
// (see Validate for why).
type Plan struct {
	// Family holds the cells to migrate.
	Family string
	// From is how Family's timestamps are written now:
	// strategy.Unmanaged() for real write times (the raw client, cbt,
	// server timestamps), strategy.OneSecond(), or
	// strategy.DefaultExpiry(D).
	From strategy.Policy
	// To is the target: strategy.OneSecond() or strategy.DefaultExpiry(D').
	To strategy.Policy
	// SourceMaxVersions is the number of versions per column Family's GC
	// rule keeps when From does not say it (a legacy family's max-versions
	// rule, From strategy.Unmanaged()): 0, no limit. A copy is refused
	// into a target keeping more (see Validate).
	SourceMaxVersions int
	// ToFamily, when set, is another family of the table the cells are
	// copied into, at their new timestamps; Family is not written.
	// Empty: in place.
	ToFamily string
	// TTL gives each cell with a real write time its TTL (From
	// unmanaged only): its expiry is its write time + TTL.
	TTL TTLRules
	// FirstSwitch and WrittenBefore (in place from real write times, both
	// required) bound the switch of Family's writers to bttl: the first
	// started writing through bttl at FirstSwitch, the last at
	// WrittenBefore. A legacy cell's timestamp is its write time, at most
	// WrittenBefore + ClockSkew; a bttl cell's is an expiry instant after
	// its write time, so after FirstSwitch - ClockSkew. So a cell stamped
	// at or before FirstSwitch - ClockSkew is proven legacy (moved), one
	// after WrittenBefore + ClockSkew proven bttl (or moved already: left
	// alone), and one in between is ambiguous unless its write-time
	// companion proves it a bttl cell (see WriteTimeComplete): ambiguous
	// cells are counted (Stats.Ambiguous), shown, and never touched.
	FirstSwitch, WrittenBefore time.Time
	// ClockSkew widens the window by the clocks' error (0:
	// DefaultClockSkew).
	ClockSkew time.Duration
	// WriteTimeComplete says every bttl writer of Family recorded write
	// times (the target policy has strategy.WithWriteTime) since
	// FirstSwitch: then a cell in the window without a companion is
	// legacy. Without it only a companion decides (it proves a bttl cell).
	WriteTimeComplete bool
	// Expired: what an in-place run does with cells already expired under
	// To (default KeepExpired). A copy never copies them.
	Expired ExpiredAction
	// ExpiredAsOf (DeleteExpired, required): only cells expired at this
	// instant are deleted, the instant a dry run judged expiry at
	// (Report.Now), so that its count still holds.
	ExpiredAsOf time.Time
	// ExpectExpired (DeleteExpired): the number of cells the dry run
	// reported expired as of ExpiredAsOf. Run deletes nothing unless its
	// own count is the same, and never deletes more.
	ExpectExpired int64
}

// Window is the window of an in-place plan: a cell stamped at or before
// legacy is proven a real write time, one after bttl a bttl expiry
// instant; in between, only a write-time companion (or WriteTimeComplete)
// decides. Zero times for a copy.
func (p Plan) Window() (legacy, bttl time.Time) {
	if !p.inPlace() {
		return time.Time{}, time.Time{}
	}
	return p.FirstSwitch.Add(-p.skew()), p.WrittenBefore.Add(p.skew())
}

// skew is ClockSkew, or its default.
func (p Plan) skew() time.Duration {
	if p.ClockSkew == 0 {
		return DefaultClockSkew
	}
	return p.ClockSkew
}

// inPlace reports whether the plan rewrites Family itself.
func (p Plan) inPlace() bool { return p.ToFamily == "" }

// target is the family the new cells are written to.
func (p Plan) target() string {
	if p.inPlace() {
		return p.Family
	}
	return p.ToFamily
}

func (p Plan) fromReal() bool { return p.From.Kind() == strategy.KindUnmanaged }

// describeFrom names the source convention for people.
func (p Plan) describeFrom() string {
	if p.fromReal() {
		return "real timestamps"
	}
	return p.From.String()
}

func (p Plan) String() string {
	where := "in place"
	if !p.inPlace() {
		where = fmt.Sprintf("copied into family %q", p.ToFamily)
	}
	return fmt.Sprintf("family %q: %s -> %s, %s", p.Family, p.describeFrom(), p.To, where)
}

// Validate refuses a plan that cannot run, with a *PlanError
// (ErrInvalidPlan) or a *TTLRuleError (ErrInvalidTTLRule).
//
// In place, only real write times to one-second expiry are accepted:
// there the old timestamps (before WrittenBefore) and the new ones (at or
// after it) are disjoint, so each stored cell says whether it was
// migrated, and a rerun, a resumed run or a concurrent bttl writer is
// told apart from a cell to move. For a default-expiry target (or from an
// age strategy) the old and new timestamps overlap: a shifted cell looks
// like an unshifted one, a second pass would shift it again, and a cell a
// bttl writer stamps during the run would be shifted too. Those plans
// copy into a new family (ToFamily), where the target cell's presence is
// the record; see docs/design.md#migrate.
func (p Plan) Validate() error {
	bad := func(field, format string, a ...any) error {
		return &PlanError{Field: field, Reason: fmt.Sprintf(format, a...)}
	}
	if p.Family == "" {
		return bad("Family", "empty")
	}
	if err := (strategy.Schema{p.Family: strategy.Unmanaged()}).Validate(); err != nil {
		return bad("Family", "%v", err)
	}
	if !p.inPlace() {
		if err := (strategy.Schema{p.ToFamily: strategy.Unmanaged()}).Validate(); err != nil {
			return bad("ToFamily", "%v", err)
		}
		if p.ToFamily == p.Family {
			return bad("ToFamily", "is Family: leave it empty to migrate in place")
		}
	}
	switch p.From.Kind() {
	case strategy.KindUnmanaged, strategy.KindOneSecond, strategy.KindDefaultExpiry:
	default:
		return bad("From", "%s: want real timestamps (strategy.Unmanaged()), one-second or default expiry", p.From)
	}
	if err := p.From.Validate(); err != nil {
		return bad("From", "%v", err)
	}
	switch p.To.Kind() {
	case strategy.KindOneSecond, strategy.KindDefaultExpiry:
	default:
		return bad("To", "%s: want one-second or default expiry", p.To)
	}
	if err := p.To.Validate(); err != nil {
		return bad("To", "%v", err)
	}
	// A copy reads every stored cell, the versions beyond From's n that
	// its rule made dead included (GC is lazy), and a Mirror cannot carry
	// the version a writer's Set pushes out of the n: only a target
	// keeping at most n versions hides them again.
	if p.SourceMaxVersions < 0 {
		return bad("SourceMaxVersions", "%d: want the versions the source's rule keeps, 0 for no limit", p.SourceMaxVersions)
	}
	n := p.From.VersionLimit()
	if p.SourceMaxVersions > 0 && (n == 0 || p.SourceMaxVersions < n) {
		n = p.SourceMaxVersions
	}
	if n > 0 && !p.inPlace() && (p.To.VersionLimit() == 0 || p.To.VersionLimit() > n) {
		return bad("To", "%s keeps more versions per column than the source family %q (%d): the copy would serve versions the source's rule made dead; give the target WithMaxVersions(%d) or fewer", p.To, p.Family, n, n)
	}
	if p.fromReal() {
		if err := p.TTL.Validate(); err != nil {
			return err
		}
	} else if len(p.TTL) > 0 {
		return bad("TTL", "only cells with real timestamps take a TTL: the others keep their expiry instant")
	}
	if p.Expired > DeleteExpired {
		return bad("Expired", "%s", p.Expired)
	}
	if p.inPlace() {
		if !p.fromReal() || p.To.Kind() != strategy.KindOneSecond {
			return bad("ToFamily", "%s -> %s cannot run in place: the old and new timestamps overlap, so a migrated cell "+
				"cannot be told from one to migrate (a rerun would shift it again); copy into a new family", p.describeFrom(), p.To)
		}
		if p.FirstSwitch.IsZero() {
			return bad("FirstSwitch", "required in place: the instant the first writer started writing through bttl; without it "+
				"any cell stamped before WrittenBefore could be a bttl writer's expiry instant, and none could be moved on proof")
		}
		if p.WrittenBefore.IsZero() {
			return bad("WrittenBefore", "required in place: the instant the last writer started writing through bttl "+
				"(timestamps after it, plus the clock skew, are expiry instants)")
		}
		for _, f := range []struct {
			name string
			t    time.Time
		}{{"FirstSwitch", p.FirstSwitch}, {"WrittenBefore", p.WrittenBefore}} {
			// UnixMicro, not bigtable.Time: UnixNano wraps a year before
			// 1678 decades ahead, past the floor.
			if bigtable.Timestamp(f.t.UnixMicro()) < strategy.RealTimeFloor {
				return bad(f.name, "%s is before %s", formatTime(f.t), formatTime(strategy.RealTimeFloor.Time()))
			}
		}
		if p.FirstSwitch.After(p.WrittenBefore) {
			return bad("FirstSwitch", "%s is after WrittenBefore %s: the first writer cannot switch after the last", formatTime(p.FirstSwitch), formatTime(p.WrittenBefore))
		}
		if p.ClockSkew < 0 {
			return bad("ClockSkew", "%s: want a positive margin (0: %s)", p.ClockSkew, DefaultClockSkew)
		}
		if p.WriteTimeComplete && !p.To.HasCompanions() {
			return bad("WriteTimeComplete", "the target policy %s records no write time: bttl writers left no companions to tell their cells by", p.To)
		}
		switch p.Expired {
		case DeleteExpired:
			if p.ExpiredAsOf.IsZero() {
				return bad("ExpiredAsOf", "required to delete expired cells: the instant a dry run judged expiry at")
			}
			if p.ExpectExpired < 0 {
				return bad("ExpectExpired", "%d: want the count the dry run reported", p.ExpectExpired)
			}
		case KeepExpired:
			if !p.ExpiredAsOf.IsZero() || p.ExpectExpired != 0 {
				return bad("Expired", "ExpiredAsOf and ExpectExpired go with DeleteExpired only")
			}
		}
		return nil
	}
	switch {
	case !p.WrittenBefore.IsZero() || !p.FirstSwitch.IsZero() || p.WriteTimeComplete || p.ClockSkew != 0:
		return bad("WrittenBefore", "only in place: a copy's source family is written by its old writers only, each cell under From")
	case p.Expired != KeepExpired || !p.ExpiredAsOf.IsZero() || p.ExpectExpired != 0:
		return bad("Expired", "only in place: a copy deletes nothing and never copies an expired cell")
	}
	return nil
}

// newTimestamp is the target timestamp of a cell of row and column (a
// qualifier) stamped ts under From, keeping its expiry instant (from
// real times: ts + its TTL). ok is false when no TTL rule matches (not
// after Validate) or the result is outside [0, MaxTimestamp].
func (p Plan) newTimestamp(row, column string, ts bigtable.Timestamp) (bigtable.Timestamp, bool) {
	var expiry bigtable.Timestamp
	if p.fromReal() {
		ttl, ok := p.TTL.ttlFor(row, column)
		if !ok {
			return 0, false
		}
		e, ok := add(ts, micros(ttl))
		if !ok {
			return 0, false
		}
		expiry = e
	} else {
		expiry = p.From.Expiry(ts)
	}
	n := expiry
	if p.To.Kind() == strategy.KindDefaultExpiry {
		var ok bool
		if n, ok = add(expiry, -micros(p.To.ExpiryOffset())); !ok {
			return 0, false
		}
	}
	if n < 0 || n > strategy.MaxTimestamp {
		return 0, false
	}
	return strategy.Millis(n), true
}

func micros(d time.Duration) bigtable.Timestamp { return bigtable.Timestamp(d / time.Microsecond) }

func add(a, b bigtable.Timestamp) (bigtable.Timestamp, bool) {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		return 0, false
	}
	return s, true
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
