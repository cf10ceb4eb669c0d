package main

import (
	"errors"
	"flag"
	"fmt"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/internal/keytext"
	"github.com/bttl/bttl/internal/lifecycle"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

var expireCommand = command{
	name: "expire", needsSchema: true, args: "TABLE [ROW] TTL|persist, or -at T TABLE [ROW]",
	synopsis: []string{
		"[-if NX|XX|GT|LT|XXLT] [-column FAMILY[:COLUMN]] [-dry-run] TABLE ROW TTL|persist",
		"[-if ...] [-column ...] [-dry-run] (-start K -end K | -prefix P) [-count N] TABLE TTL|persist",
		"-at T [-if ...] [-column ...] [-dry-run] TABLE ROW",
		"-at T [-if ...] [-column ...] [-dry-run] (-start K -end K | -prefix P) [-count N] TABLE",
	},
	short: "give the live cells of a row, a column or a row range a new TTL or expiry instant, or remove it",
	help: `Gives the live cells of the age families (one-second, default expiry) of
one ROW, or of the rows of a range (-start/-end, -prefix, -count, as cbt read
takes them), a new TTL, as ttlclient's ExpireColumn does column by column:
each column's newest live cell gets TTL (a Go duration, e.g. 90m or 720h)
and its older versions keep their spacing; "persist" removes the TTL of each
column's newest live cell instead (Persist: the largest timestamp, or the
cap of a family that clamps). -column limits it to one family or one
FAMILY:COLUMN. -if applies only where the condition holds, checked by the
server on each cell in the same conditional mutation: NX (the cell has no
TTL), XX (it has one), GT (the new expiry is later), LT (earlier), XXLT
(both). Sequence and unmanaged families are left alone. Each cell moves in
its own atomic conditional mutation pinning it, so a concurrent write is
never overwritten or hidden (see docs/design.md#lifecycle-conditions).

-at T gives an absolute expiry instead of a TTL, like Redis EXPIREAT and
PEXPIREAT (T in RFC 3339, e.g. 2026-12-01T00:00:00Z; printed in UTC), as
ttlclient's ExpireColumnAt does: each column's newest live cell expires at
T (to the millisecond, rounded down) and its older versions keep their
spacing; on a family that clamps TTLs to its max TTL (clamp_ttl), a T
beyond it is clamped, and the summary counts those cells. A T already past deletes the live cells it applies to (from
storage, not hidden); a T at or before the Unix epoch is refused
(ErrBeforeEpoch, exit status 1) before anything is read. -at takes no TTL
argument (and no persist): giving both is a usage error.

-dry-run reads the cells (as a read through bttl returns them, without
time-to-idle refreshes) and prints what would change, cell by cell: its
current and new expiry (RFC 3339 UTC) and whether the condition holds;
nothing is written. Exit status 1 when a refusal (a TTL or an instant over
a family's cap, an instant at or before the epoch, a family where persist
has no meaning) stopped it.
`,
	setup: func(fs *flag.FlagSet) invocation {
		x := &expireArgs{fs: fs}
		fs.StringVar(&x.cond, "if", "", "apply only where `COND` holds: NX, XX, GT, LT or XXLT")
		fs.StringVar(&x.column, "column", "", "only this `FAMILY[:COLUMN]`")
		fs.BoolVar(&x.dryRun, "dry-run", false, "print what would change, write nothing")
		fs.Var(timeFlag{&x.at}, "at", "expire at this `instant` (RFC 3339, e.g. 2026-12-01T00:00:00Z) instead of after a TTL argument")
		fs.StringVar(&x.start, "start", "", "rows from this key (inclusive)")
		fs.StringVar(&x.end, "end", "", "rows up to this key (exclusive)")
		fs.StringVar(&x.prefix, "prefix", "", "only rows with this key prefix")
		fs.Var(countFlag{&x.count, 0}, "count", "at most `n` rows (0: no limit)")
		return invocation{check: x.check, checkSchemas: x.checkTable, run: x.run}
	},
}

type expireArgs struct {
	fs                      *flag.FlagSet
	cond, column            string
	dryRun                  bool
	start, end, prefix      string
	count                   int64
	table, row              string
	ttl                     time.Duration
	persist                 bool
	at                      time.Time // -at: the expiry instant (hasAt)
	hasAt                   bool
	clamped                 int // -at: the cells changed that went to their family's cap, short of T
	condition               lifecycle.Condition
	family, qualifier       string
	hasQualifier, singleRow bool
}

var expireConditions = map[string]lifecycle.Condition{
	"": lifecycle.Always, "NX": lifecycle.IfNoTTL, "XX": lifecycle.IfTTL, "GT": lifecycle.IfLater,
	"LT": lifecycle.IfEarlier, "XXLT": lifecycle.IfTTLAndEarlier,
}

func (x *expireArgs) check() error {
	x.fs.Visit(func(f *flag.Flag) { x.hasAt = x.hasAt || f.Name == "at" })
	if x.hasAt {
		return x.checkAt()
	}
	args := x.fs.Args()
	ranged := x.ranged()
	switch {
	case len(args) == 3 && !ranged:
		x.table, x.row, x.singleRow = args[0], args[1], true
	case len(args) == 2 && ranged:
		x.table = args[0]
	case len(args) == 2:
		return errors.New("want TABLE ROW TTL, or a row range (-start, -end, -prefix) with TABLE TTL")
	case len(args) == 3:
		return errors.New("a row range (-start, -end, -prefix, -count) takes TABLE TTL, no ROW")
	default:
		return errors.New("want TABLE ROW TTL|persist")
	}
	if err := x.checkCommon(); err != nil {
		return err
	}
	if ttl := args[len(args)-1]; ttl == "persist" {
		x.persist = true
	} else {
		d, err := time.ParseDuration(ttl)
		if err != nil || d < time.Millisecond {
			return fmt.Errorf("TTL %q: want a duration of at least 1ms (e.g. 90m) or persist", ttl)
		}
		x.ttl = d
	}
	return nil
}

func (x *expireArgs) ranged() bool {
	return x.start != "" || x.end != "" || x.prefix != "" || x.count != 0
}

// checkAt checks the -at form: TABLE ROW, or TABLE with a row range; a
// TTL (or persist) beside -at is a usage error. The instant itself is
// checked in run, a refusal (exit 1) rather than a usage error.
func (x *expireArgs) checkAt() error {
	args := x.fs.Args()
	ranged := x.ranged()
	switch {
	case len(args) == 2 && !ranged:
		x.table, x.row, x.singleRow = args[0], args[1], true
	case len(args) == 1 && ranged:
		x.table = args[0]
	case len(args) == 3 || (len(args) == 2 && ranged):
		return fmt.Errorf("-at %s and a TTL argument %q: give one or the other", formatRFC3339(x.at), args[len(args)-1])
	case len(args) == 1:
		return errors.New("-at: want TABLE ROW, or a row range (-start, -end, -prefix) with TABLE")
	default:
		return errors.New("-at: want TABLE ROW")
	}
	return x.checkCommon()
}

// checkCommon checks the flags both forms share.
func (x *expireArgs) checkCommon() error {
	switch {
	case x.prefix != "" && (x.start != "" || x.end != ""):
		return errors.New("-prefix excludes -start and -end")
	case x.end != "" && x.start >= x.end:
		return fmt.Errorf("-start %q must sort before -end %q", x.start, x.end)
	}
	c, ok := expireConditions[strings.ToUpper(x.cond)]
	if !ok {
		return fmt.Errorf("-if %q: want NX, XX, GT, LT or XXLT", x.cond)
	}
	x.condition = c
	if x.column != "" {
		x.family, x.qualifier, x.hasQualifier = strings.Cut(x.column, ":")
	}
	return nil
}

func (x *expireArgs) checkTable(schemas map[string]strategy.Schema) error {
	schema, ok := schemas[x.table]
	if !ok {
		return fmt.Errorf("table %q is not in the schema file", x.table)
	}
	if x.family != "" {
		p, ok := schema[x.family]
		if !ok {
			return fmt.Errorf("-column: family %q is not in table %q's schema", x.family, x.table)
		}
		if k := p.Kind(); k != strategy.KindOneSecond && k != strategy.KindDefaultExpiry {
			return fmt.Errorf("-column: family %q is a %s family, whose cells do not expire by age", x.family, k)
		}
	}
	return nil
}

func (x *expireArgs) run(e *env) int {
	schema := e.schemas[x.table]
	if x.hasAt {
		// Before any RPC, as the library refuses it: an instant at or
		// before the epoch (an unset time?) would delete every cell.
		if err := lifecycle.CheckInstant(x.at); err != nil {
			fmt.Fprintf(e.stderr, "bttl %s: -at: %v\n", e.name, strings.TrimPrefix(err.Error(), "bttl: "))
			return exitFindings
		}
	}
	ctx, cancel := e.scanStep()
	defer cancel()
	client := ttlclient.Wrap(e.data, ttlclient.WithClock(clockFunc(e.now)), ttlclient.WithoutVerify())
	tbl, err := client.Open(ctx, x.table, schema)
	if err != nil {
		fmt.Fprintf(e.stderr, "bttl %s: %v\n", e.name, strings.TrimPrefix(err.Error(), "bttl: "))
		return exitError
	}
	raw := e.data.Open(x.table)
	var rs bigtable.RowSet = bigtable.SingleRow(x.row)
	switch {
	case x.singleRow:
	case x.prefix != "":
		rs = bigtable.PrefixRange(x.prefix)
	case x.end != "":
		rs = bigtable.NewRange(x.start, x.end)
	default:
		rs = bigtable.InfiniteRange(x.start)
	}
	var opts []bigtable.ReadOption
	if x.count > 0 {
		opts = append(opts, bigtable.LimitRows(x.count))
	}
	rows, changed, code := 0, 0, exitOK
	var runErr error
	err = raw.ReadRows(ctx, rs, func(r bigtable.Row) bool {
		rows++
		n, err := x.expireRow(e, tbl, schema, r)
		changed += n
		if err != nil {
			runErr = err
			return false
		}
		return true
	}, opts...)
	if err == nil {
		err = runErr
	}
	verb := "changed"
	if x.dryRun {
		verb = "would change"
	}
	if x.hasAt {
		verb += " to expire at " + formatRFC3339(x.at) // as given, in UTC
		if x.clamped > 0 {
			verb += fmt.Sprintf(", %d of them at their family's max TTL (T is beyond it)", x.clamped)
		}
	}
	fmt.Fprintf(e.stdout, "%d rows read, %d cells %s\n", rows, changed, verb)
	if err != nil {
		fmt.Fprintf(e.stderr, "bttl %s: %v\n", e.name, strings.TrimPrefix(err.Error(), "bttl: "))
		var ce *ttlclient.CellError
		var dr dryRunRefusal
		if errors.As(err, &ce) || errors.As(err, &dr) {
			return exitFindings
		}
		return exitError
	}
	if x.singleRow && rows == 0 {
		return exitFindings
	}
	return code
}

// expireRow acts on one row as stored: the live cells (filters.Explain's
// returned ones) of the columns asked, by column.
func (x *expireArgs) expireRow(e *env, tbl *ttlclient.Table, schema strategy.Schema, r bigtable.Row) (int, error) {
	now := e.now()
	type col struct{ family, column string }
	cells := map[col][]filters.CellReport{}
	var cols []col
	for _, c := range filters.Explain(schema, r, bigtable.Timestamp(now.UnixMicro())) {
		p := schema[c.Family]
		if c.Hidden() || (p.Kind() != strategy.KindOneSecond && p.Kind() != strategy.KindDefaultExpiry) {
			continue
		}
		if x.family != "" && (c.Family != x.family || (x.hasQualifier && c.Column != x.qualifier)) {
			continue
		}
		k := col{c.Family, c.Column}
		if cells[k] == nil {
			cols = append(cols, k)
		}
		cells[k] = append(cells[k], c) // newest first
	}
	sort.Slice(cols, func(i, j int) bool {
		return cols[i].family < cols[j].family || (cols[i].family == cols[j].family && cols[i].column < cols[j].column)
	})
	ctx, cancel := e.step()
	defer cancel()
	changed := 0
	for _, k := range cols {
		if x.dryRun {
			n, err := x.dryRunColumn(e, schema[k.family], r.Key(), k.family, k.column, cells[k], now)
			changed += n
			if x.hasAt && x.clampedAt(schema[k.family], now) {
				x.clamped += n
			}
			if err != nil {
				return changed, err
			}
			continue
		}
		var n int
		var err error
		if x.persist {
			var opts []ttlclient.ExpireOption
			if x.condition != lifecycle.Always {
				opts = append(opts, ttlclient.ExpireCondition(x.condition))
			}
			var res ttlclient.ExpireResult
			res, err = tbl.Persist(ctx, r.Key(), k.family, k.column, opts...)
			if res == ttlclient.ExpireSet {
				n = 1
			}
		} else {
			var opts []ttlclient.ExpireColumnOption
			if x.condition != lifecycle.Always {
				opts = append(opts, ttlclient.ExpireCondition(x.condition))
			}
			if x.hasAt {
				n, err = tbl.ExpireColumnAt(ctx, r.Key(), k.family, k.column, x.at, opts...)
				if x.clampedAt(schema[k.family], now) {
					x.clamped += n
				}
			} else {
				n, err = tbl.ExpireColumn(ctx, r.Key(), k.family, k.column, x.ttl, opts...)
			}
		}
		changed += n
		fmt.Fprintf(e.stdout, "%s %s:%s: %d cells changed\n", keytext.Quote(r.Key()), k.family, keytext.Quote(k.column), n)
		if err != nil {
			return changed, err
		}
	}
	return changed, nil
}

// clampedAt reports whether a cell of p given -at's instant at now goes
// to p's max TTL instead, p clamping TTLs to it (strategy.ClampLonger):
// its expiry is more than the millisecond -at rounds down to before T.
func (x *expireArgs) clampedAt(p strategy.Policy, now time.Time) bool {
	ts, past, err := lifecycle.AtTimestamp(p, now, x.at)
	return err == nil && !past && p.ExpiryTime(ts).Before(x.at.Add(-time.Millisecond))
}

// dryRunRefusal is a refusal the dry run found (a TTL or an instant its
// family refuses): exit status 1, as the run's *ttlclient.CellError.
type dryRunRefusal struct{ error }

func (e dryRunRefusal) Unwrap() error { return e.error }

// dryRunColumn prints what expireRow would do to one column's live cells.
func (x *expireArgs) dryRunColumn(e *env, p strategy.Policy, row, family, column string, cells []filters.CellReport, now time.Time) (int, error) {
	target, past, err := x.target(p, now)
	if err != nil {
		return 0, dryRunRefusal{fmt.Errorf("bttl: row %s family %q: %w", keytext.Quote(row), family, err)}
	}
	delta := strategy.Millis(target) - strategy.Millis(cells[0].Timestamp)
	cond := x.condition
	if x.persist && cond == lifecycle.Always {
		cond = lifecycle.IfTTL // Persist's default (XX), as the real run gets
	}
	n := 0
	for i, c := range cells {
		to := strategy.Millis(c.Timestamp) + delta
		if x.persist {
			if i > 0 {
				break // persist acts on the newest cell only
			}
			to = target
		}
		if past {
			to = -1000 // as ExpireColumnAt: an instant already past deletes every live cell
		} else if to < 0 {
			// As ExpireColumn: deleted when its new expiry is past, else
			// the earliest timestamp.
			if p.ExpiryTime(to).After(now) {
				to = 0
			} else {
				to = -1000
			}
		}
		what := "would set"
		limit, _ := p.TTLCap()
		switch {
		case !lifecycle.Holds(cond, c.Timestamp, to),
			x.persist && limit > 0 && to < strategy.Millis(c.Timestamp):
			// Persist on a clamping family never shortens a cell living
			// longer than the cap (lifecycle.Settings.Lengthen).
			what = "not met"
		case to == strategy.Millis(c.Timestamp):
			what = "unchanged"
		case !p.IsLive(to, bigtable.Timestamp(now.UnixMicro())):
			what = "would delete"
			n++
		default:
			n++
		}
		fmt.Fprintf(e.stdout, "%s %s:%s @%d expires %s -> %s: %s\n", keytext.Quote(row), family, keytext.Quote(column), c.Timestamp,
			expiryText(p, c.Timestamp), expiryText(p, to), what)
	}
	return n, nil
}

// target is where the newest cell of a column of p goes at now: past
// when -at's instant is already past (every live cell is deleted).
func (x *expireArgs) target(p strategy.Policy, now time.Time) (ts bigtable.Timestamp, past bool, err error) {
	switch {
	case x.hasAt:
		return lifecycle.AtTimestamp(p, now, x.at)
	case x.persist:
		ts, err = lifecycle.Forever(p, now)
	default:
		ts, err = p.WriteTimestamp(now, x.ttl)
	}
	return ts, false, err
}

// expiryText is a cell's expiry in RFC 3339 UTC, "never" at the largest
// timestamp.
func expiryText(p strategy.Policy, ts bigtable.Timestamp) string {
	if !lifecycle.HasTTL(ts) {
		return "never"
	}
	return formatRFC3339(p.ExpiryTime(ts))
}
