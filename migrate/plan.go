package migrate

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
	// DeleteExpired deletes it (pinned, like a move), so the family holds
	// no timestamp at or before now and `bttl apply` accepts a one-second
	// rule without -force. It is expired either way: the target rule
	// would collect it.
	DeleteExpired ExpiredAction = iota
	// KeepExpired leaves it as it is, for GC: under a one-second rule its
	// real timestamp is an expiry instant already past, so reads through
	// bttl hide it and GC collects it; `bttl apply` then needs -force,
	// since its scan cannot tell it from a live cell written by mistake.
	KeepExpired
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
	// ToFamily, when set, is another family of the table the cells are
	// copied into, at their new timestamps; Family is not written.
	// Empty: in place.
	ToFamily string
	// TTL gives each cell with a real write time its TTL (From
	// unmanaged only): its expiry is its write time + TTL.
	TTL TTLRules
	// WrittenBefore (in place from real write times, required) is an
	// instant at or after which every writer of Family writes through
	// bttl with the one-second policy: a timestamp in its millisecond or
	// before is a real write time to migrate, a later one an expiry
	// instant (a bttl write, ms(now + ttl) with ttl >= 1ms, or a cell
	// already migrated) to leave alone. Migrated timestamps land after it
	// (or the cell is expired), which is what makes a second run change
	// nothing.
	WrittenBefore time.Time
	// Expired: what an in-place run does with cells already expired under
	// To (default DeleteExpired). A copy never copies them.
	Expired ExpiredAction
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
	if p.fromReal() {
		if err := p.TTL.Validate(); err != nil {
			return err
		}
	} else if len(p.TTL) > 0 {
		return bad("TTL", "only cells with real timestamps take a TTL: the others keep their expiry instant")
	}
	if p.Expired > KeepExpired {
		return bad("Expired", "%s", p.Expired)
	}
	if p.inPlace() {
		if !p.fromReal() || p.To.Kind() != strategy.KindOneSecond {
			return bad("ToFamily", "%s -> %s cannot run in place: the old and new timestamps overlap, so a migrated cell "+
				"cannot be told from one to migrate (a rerun would shift it again); copy into a new family", p.describeFrom(), p.To)
		}
		if p.WrittenBefore.IsZero() {
			return bad("WrittenBefore", "required in place: the instant from which every writer writes through bttl "+
				"(timestamps before it are real write times, at or after it expiry instants)")
		}
		if bigtable.Time(p.WrittenBefore) < strategy.RealTimeFloor {
			return bad("WrittenBefore", "%s is before %s", formatTime(p.WrittenBefore), formatTime(strategy.RealTimeFloor.Time()))
		}
	} else if !p.WrittenBefore.IsZero() {
		return bad("WrittenBefore", "only in place: a copy moves every cell of Family")
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
		if n, ok = add(expiry, -micros(p.To.DefaultTTL())); !ok {
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
