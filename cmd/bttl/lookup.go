package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/audit"
	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/internal/auditrule"
	"github.com/bttl/bttl/internal/keytext"
	"github.com/bttl/bttl/internal/timefmt"
	"github.com/bttl/bttl/strategy"
)

const cellsHelp = `Every stored cell is shown as cbt shows it (row, family:column @ timestamp,
value), with a third line saying what a read through bttl does with it:
"returned", or hidden as "excess-version" (beyond the newest N cells of its
column the family keeps, expired or not, as audit counts it), "expired",
"companion" (a write-time record) or "reserved"; then the family's
strategy, expiry instant (RFC 3339 UTC at fixed width), remaining TTL (in
days and smaller units) and write time where they apply; a time-to-idle
refresh is noted on a column's newest cell only, the one a read refreshes. Families the schema does not name are read
untouched. -json prints one object per row ({"row", "now", "cells"}), each
cell as filters.CellReport's JSON form, so a program can decode it with the
library (filters.Explain is the same classification). Reads the stored
cells with no filter (ReadRow/ReadRows) and the table's GC rules
(GetTable): an expired cell of a family not on the rule its strategy needs
is said to be kept by that rule (a real timestamp, or a cell not migrated
yet), not one GC failed to collect; -json keeps the library's reasons and
carries the row's families' rules as "gc_rules" ({"rule", "matches"}).
`

var lookupCommand = command{
	name: "lookup", needsSchema: true, args: "TABLE ROW",
	synopsis: []string{"[-json] [-now TIME] TABLE ROW"},
	short:    "show one row's stored cells, whether a bttl read returns each, and why not",
	help: `Shows one row's stored cells and, for each, whether a read through bttl
returns it and why not. Exit status 1 when the row holds no cell.

` + cellsHelp,
	setup: func(fs *flag.FlagSet) invocation {
		l := &lookupArgs{}
		l.define(fs)
		l.single = true
		return invocation{check: l.checkArgs(2), checkSchemas: l.checkTable, run: l.run}
	},
}

var readCommand = command{
	name: "read", needsSchema: true, args: "TABLE",
	synopsis: []string{"[-json] [-now TIME] [-start K -end K | -prefix P] [-count N] TABLE"},
	short:    "the same for a range of rows, as cbt read takes it",
	help: `Shows the stored cells of a range of rows (-start/-end, -prefix, -count, as
cbt read takes them) and, for each, whether a read through bttl returns it
and why not.

` + cellsHelp,
	setup: func(fs *flag.FlagSet) invocation {
		l := &lookupArgs{}
		l.define(fs)
		fs.StringVar(&l.start, "start", "", "read from this row key (inclusive)")
		fs.StringVar(&l.end, "end", "", "read up to this row key (exclusive)")
		fs.StringVar(&l.prefix, "prefix", "", "read only rows with this key prefix")
		fs.Var(countFlag{&l.count, 0}, "count", "read at most `n` rows (0: no limit)")
		return invocation{check: l.checkArgs(1), checkSchemas: l.checkTable, run: l.run}
	},
}

type lookupArgs struct {
	json               bool
	now                time.Time
	start, end, prefix string
	count              int64
	single             bool     // lookup: one row
	args               []string // filled by check: TABLE [ROW]
	fs                 *flag.FlagSet
}

func (l *lookupArgs) define(fs *flag.FlagSet) {
	l.fs = fs
	fs.BoolVar(&l.json, "json", false, "print JSON, one object per row")
	fs.Var(timeFlag{&l.now}, "now", "classify at this `time` (RFC 3339, e.g. 2026-01-02T15:04:05Z) instead of the clock")
}

func (l *lookupArgs) checkArgs(n int) func() error {
	return func() error {
		l.args = l.fs.Args()
		switch {
		case len(l.args) != n && n == 2:
			return errors.New("want TABLE ROW")
		case len(l.args) != n:
			return errors.New("want TABLE")
		case l.prefix != "" && (l.start != "" || l.end != ""):
			return errors.New("-prefix excludes -start and -end")
		case l.end != "" && l.start >= l.end:
			return fmt.Errorf("-start %q must sort before -end %q", l.start, l.end)
		}
		return nil
	}
}

// checkTable refuses a TABLE the schema file does not name, before any
// client exists.
func (l *lookupArgs) checkTable(schemas map[string]strategy.Schema) error {
	if _, ok := schemas[l.args[0]]; !ok {
		return fmt.Errorf("table %q is not in the schema file", l.args[0])
	}
	return nil
}

func (l *lookupArgs) run(e *env) int {
	table := l.args[0]
	schema, ok := e.schemas[table]
	if !ok {
		fmt.Fprintf(e.stderr, "bttl %s: table %q is not in the schema file %s\n", e.name, table, e.g.schema)
		return exitError
	}
	now := l.now
	if now.IsZero() {
		now = e.now()
	}
	now = now.UTC() // -json's "now" is UTC, as every time bttl prints
	ctx, cancel := e.step()
	if !l.single {
		// A range's read is as long as the range: bounded by -timeout and
		// by what it receives (a row every stepTimeout), not its length.
		ctx, cancel = e.scanStep()
	}
	defer cancel()
	rules := l.familyRules(ctx, e, table, schema)
	tbl := e.data.Open(table)
	rows := 0
	show := func(r bigtable.Row) error {
		rows++
		cells := filters.Explain(schema, r, bigtable.Timestamp(now.UnixMicro()))
		if !l.json {
			// -json keeps the library's classification, which a program
			// decodes; its rows carry the rules (gc_rules) instead.
			cells = rules.annotate(cells)
		}
		return writeCells(e.stdout, l.json, r, now, cells, rules)
	}
	var err error
	if l.single {
		var r bigtable.Row
		if r, err = tbl.ReadRow(ctx, l.args[1]); err == nil && len(r) > 0 {
			err = show(r)
		}
	} else {
		rs := bigtable.RowSet(bigtable.InfiniteRange(l.start))
		switch {
		case l.prefix != "":
			rs = bigtable.PrefixRange(l.prefix)
		case l.end != "":
			rs = bigtable.NewRange(l.start, l.end)
		}
		var opts []bigtable.ReadOption
		if l.count > 0 {
			opts = append(opts, bigtable.LimitRows(l.count))
		}
		// A row that cannot be written stops the read and fails the
		// command: the range is never cut short in silence.
		var showErr error
		rctx, stop := context.WithCancelCause(ctx)
		idle := time.AfterFunc(stepTimeout, func() { stop(errReadIdle) })
		err = tbl.ReadRows(rctx, rs, func(r bigtable.Row) bool {
			idle.Stop() // time spent writing (a paused pager) is not the server's
			if showErr = show(r); showErr != nil {
				showErr = fmt.Errorf("row %s: %w (the rows after it were not shown)", keytext.Quote(r.Key()), showErr)
			}
			idle.Reset(stepTimeout)
			return showErr == nil
		}, opts...)
		idle.Stop()
		if err != nil && errors.Is(context.Cause(rctx), errReadIdle) && ctx.Err() == nil {
			stop(nil)
			fmt.Fprintf(e.stderr, "bttl %s: no answer from %s for %s (%d row(s) shown): %v\n", e.name, endpointOf(e.g), stepTimeout, rows, errReadIdle)
			return exitError
		}
		stop(nil)
		if err == nil {
			err = showErr
		}
	}
	if err != nil {
		return e.fail(err)
	}
	if rows == 0 && l.single {
		fmt.Fprintf(e.stderr, "bttl lookup: row %s not found in table %q\n", keytext.Quote(l.args[1]), table)
		return exitFindings
	}
	return exitOK
}

// familyRule is a managed family's GC rule as the table carries it, and
// whether it is the one the family's strategy needs.
type familyRule struct {
	Rule    string `json:"rule"`
	Matches bool   `json:"matches"`
	// collects: another rule, that collects expired cells as soon
	// (auditrule.CollectsExpired).
	collects bool
}

// familyRules are the managed families' rules (nil when not read).
type familyRules map[string]familyRule

// familyRules reads the table's GC rules, so that an expired cell of a
// family not on its rule is not called one GC failed to collect
// (docs/design.md#not-on-rule). Rules that cannot be read are said on
// stderr; the cells are then classified by the schema alone.
func (l *lookupArgs) familyRules(ctx context.Context, e *env, table string, schema strategy.Schema) familyRules {
	fams, err := e.admin.Families(ctx, table)
	if err != nil {
		fmt.Fprintf(e.stderr, "bttl %s: table %q: GC rules not read (%v): expired cells are not told from cells not on their rule yet\n", e.name, table, onePrefix(err.Error()))
		return nil
	}
	out := familyRules{}
	for f, p := range schema {
		cf, ok := fams[f]
		if !ok || !p.Managed() {
			continue
		}
		rule := audit.NoGCRule
		if r := cf.GetGcRule(); r != nil && r.GetRule() != nil {
			rule = gcrule.Describe(r)
		}
		out[f] = familyRule{Rule: rule, Matches: gcrule.Check(table, f, p, cf) == nil, collects: auditrule.CollectsExpired(cf, p)}
	}
	return out
}

// expiredReasonTail ends filters.Explain's reason for an expired cell.
const expiredReasonTail = "; a complete GC would have removed it"

// annotate rewrites, for the text output, the reason of each expired cell
// of a family not on its rule: that rule keeps the cell.
func (rules familyRules) annotate(cells []filters.CellReport) []filters.CellReport {
	for i, c := range cells {
		fr, ok := rules[c.Family]
		if !ok || fr.Matches || fr.collects || c.Visibility != filters.Expired {
			continue
		}
		cells[i].Reason = strings.TrimSuffix(c.Reason, expiredReasonTail) + fmt.Sprintf(
			"; not on its rule yet: the family's GC rule is %s, not the one %s needs, and keeps it (a real timestamp, a cell not migrated yet, or a rule lost), not a cell GC failed to collect", fr.Rule, c.Strategy)
	}
	return cells
}

// errReadIdle ends a read of a range that received no row for stepTimeout.
var errReadIdle = errors.New("no row received: the read was stopped")

// rowJSON is one row in -json output.
type rowJSON struct {
	Row       *string              `json:"row,omitempty"`
	RowBase64 []byte               `json:"row_base64,omitempty"`
	Now       string               `json:"now"`
	Cells     []filters.CellReport `json:"cells"`
	// GCRules are the rules of the row's managed families (when read).
	GCRules familyRules `json:"gc_rules,omitempty"`
}

func writeCells(w io.Writer, asJSON bool, r bigtable.Row, now time.Time, cells []filters.CellReport, rules familyRules) error {
	if asJSON {
		j := rowJSON{Now: timefmt.Instant(now), Cells: cells}
		for f := range r {
			if fr, ok := rules[f]; ok {
				if j.GCRules == nil {
					j.GCRules = familyRules{}
				}
				j.GCRules[f] = fr
			}
		}
		if key := r.Key(); utf8.ValidString(key) {
			j.Row = &key
		} else {
			j.RowBase64 = []byte(key)
		}
		return json.NewEncoder(w).Encode(j)
	}
	var b strings.Builder
	b.WriteString(strings.Repeat("-", 40) + "\n" + printable(r.Key()) + "\n")
	for _, c := range cells {
		fmt.Fprintf(&b, "  %-40s @ %s\n", printable(c.Family+":"+c.Column), timefmt.Instant(time.UnixMicro(int64(c.Timestamp))))
		fmt.Fprintf(&b, "    %q\n", c.Value)
		fmt.Fprintf(&b, "    bttl: %s [%s]", c.Visibility, c.Strategy)
		if c.Reason != "" {
			fmt.Fprintf(&b, ": %s", c.Reason)
		}
		if !c.WriteTime.IsZero() && c.Visibility != filters.Companion {
			fmt.Fprintf(&b, "; written %s", timefmt.Instant(c.WriteTime))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// printable is s as is when it is printable text, else Go-quoted: a
// companion's qualifier starts with 0xFF 0xFF.
func printable(s string) string {
	if utf8.ValidString(s) && strconv.CanBackquote(s) {
		return s
	}
	return strconv.Quote(s)
}
