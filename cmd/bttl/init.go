package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"
	adminpb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	"go.yaml.in/yaml/v3"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/internal/companion"
	"github.com/bttl/bttl/internal/keytext"
	"github.com/bttl/bttl/internal/timefmt"
	"github.com/bttl/bttl/schemafile"
	"github.com/bttl/bttl/strategy"
)

var initCommand = command{
	name:     "init",
	synopsis: []string{"[-table T] [-force] [-sample-rows N]"},
	short:    "write a schema file from the instance's tables and GC rules",
	help: `Writes a schema file (YAML, as -schema takes) from the instance's tables and
their families' GC rules, to the -schema file (default: stdout). Each rule
gives a strategy: max age 1s -> one-second; max age D -> default-expiry D;
max versions N -> sequence N; a union of age and versions -> the age
strategy with max_versions; no rule -> unmanaged. A comment marks what a rule
cannot tell (max age 1s may be a default-expiry family of 1s; max versions
may be a plain versioned family with real timestamps: run bttl audit). A
family whose rule fits no strategy (an intersection) is left out and named
in a comment and on stderr. A max-versions family's cells are sampled (the
first -sample-rows rows holding it, values stripped): if the sample holds
timestamps that are not sequence numbers (real times, as cbt and server
timestamps write), the sequence strategy would hide new writes behind them,
so the family is written unmanaged, with a comment and a line on stderr
saying what the sample found. An age family whose first -sample-rows rows
hold write-time companions (which bttl writes only for write_time families)
is written with write_time. A table holding bttl's own state (bigtable://
checkpoints and audit reports) is left out. A table written whose change
stream is enabled gets its retention under change_stream_retention, so
verify and apply keep it as it is. Reads only: ListTables, GetTable and
those ReadRows.
`,
	setup: func(fs *flag.FlagSet) invocation {
		only := fs.String("table", "", "this table only (default: every table of the instance)")
		force := fs.Bool("force", false, "overwrite the -schema file if it exists")
		sample := int64(1000)
		fs.Var(countFlag{&sample, 0}, "sample-rows", "`rows` of each max-versions family whose timestamps are sampled (default 1000; 0: read no data)")
		return invocation{run: func(e *env) int { return initSchema(e, *only, *force, sample) }}
	},
}

// sequenceSample is what a sample of a max-versions family's cells says
// about the sequence strategy.
type sequenceSample struct {
	rows, cells, notSequence, realTimes int64
	first                               bigtable.ReadItem
}

// sampleSequence reads the timestamps of family's cells in the first rows
// rows holding it.
func sampleSequence(e *env, table, family string, rows int64) (sequenceSample, error) {
	var s sequenceSample
	ctx, cancel := e.step()
	defer cancel()
	err := e.data.Open(table).ReadRows(ctx, bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
		s.rows++
		for _, it := range r[family] {
			s.cells++
			if ts := it.Timestamp; ts < 1000 || ts%1000 != 0 || ts >= strategy.RealTimeFloor {
				if s.notSequence == 0 {
					s.first = it
				}
				s.notSequence++
				if ts >= strategy.RealTimeFloor {
					s.realTimes++
				}
			}
		}
		return true
	}, bigtable.RowFilter(bigtable.ChainFilters(bigtable.FamilyFilter(filters.FamilyRegex(family)), bigtable.StripValueFilter())), bigtable.LimitRows(rows))
	return s, err
}

// judgeSequence turns a sequence proposal for family that the sample
// contradicts into unmanaged, saying why (contradicted); otherwise it adds
// what the sample found to the note.
func judgeSequence(c classified, rule, family string, s sequenceSample) (out classified, contradicted bool) {
	if s.cells == 0 {
		return c, false
	}
	if s.notSequence == 0 {
		c.note += fmt.Sprintf("; sampled %d cell(s) in %d row(s): all sequence numbers (bttl audit reads every row)", s.cells, s.rows)
		return c, false
	}
	c.family = schemafile.Family{Strategy: "unmanaged"}
	c.note = fmt.Sprintf("%s; NOT sequence: sampled %d cell(s) in %d row(s), %d with timestamps that are not sequence numbers, %d of them real times "+
		"(first: row %s, column %s, timestamp %s): the sequence strategy would hide new writes behind them, so unmanaged "+
		"(bttl apply refuses sequence until they are rewritten as seq*1000)",
		rule, s.cells, s.rows, s.notSequence, s.realTimes, keytext.Quote(s.first.Row), keytext.Quote(strings.TrimPrefix(s.first.Column, family+":")), stamp(s.first.Timestamp))
	return c, true
}

// classified is what one family's GC rule says about its strategy.
type classified struct {
	family schemafile.Family
	ok     bool   // false: no strategy fits; family is left out
	note   string // what the rule cannot tell, or why it fits none
}

// classify picks the strategy rule implies.
func classify(rule *adminpb.GcRule) classified {
	n := gcrule.Normalize(rule)
	desc := gcrule.Describe(rule)
	switch {
	case n.Intersection || n.Unrecognized:
		return classified{note: fmt.Sprintf("rule %s fits no bttl strategy (an intersection keeps what any one rule keeps; no read filter reproduces it); left out", desc)}
	case !n.HasAge && !n.HasVersions:
		return classified{family: schemafile.Family{Strategy: "unmanaged"}, ok: true, note: "no GC rule: never collected"}
	case !n.HasAge:
		return classified{family: schemafile.Family{Strategy: "sequence", Versions: int(n.Versions)}, ok: true,
			note: fmt.Sprintf("%s: a sequence family, or a plain versioned family if its timestamps are real times (bttl audit tells; then use unmanaged)", desc)}
	}
	var f schemafile.Family
	note := ""
	if n.Age == strategy.OneSecondMaxAge {
		f.Strategy = "one-second"
		note = desc + ": one-second, or a default-expiry family with ttl 1s (same rule; one-second cells carry their expiry as timestamp, bttl audit tells)"
	} else {
		f.Strategy, f.TTL = "default-expiry", formatDuration(n.Age)
	}
	if n.HasVersions {
		f.MaxVersions = int(n.Versions)
	}
	// A rule the strategies refuse (e.g. a sub-millisecond age) fits none.
	p, err := f.Policy()
	if err == nil {
		err = p.Validate()
	}
	if err != nil {
		return classified{note: fmt.Sprintf("rule %s fits no bttl strategy (%v); left out", desc, err)}
	}
	return classified{family: f, ok: true, note: note}
}

// stamp shows a timestamp as RFC 3339 UTC when it is a real time, raw
// otherwise (a sequence number is not a time).
func stamp(t bigtable.Timestamp) string {
	if t >= strategy.RealTimeFloor {
		return ts(t)
	}
	return strconv.FormatInt(int64(t), 10)
}

// formatDuration writes d as schemafile reads it, in days and smaller
// units: "7d", "1d12h", "1h".
func formatDuration(d time.Duration) string { return timefmt.Duration(d) }

func initSchema(e *env, only string, force bool, sampleRows int64) int {
	if e.g.schema != "" && !force {
		if _, err := os.Stat(e.g.schema); err == nil {
			fmt.Fprintf(e.stderr, "bttl init: -schema %s exists; -force overwrites it\n", e.g.schema)
			return exitError
		}
	}
	ctx, cancel := e.step()
	tables, err := e.admin.Client().Tables(ctx)
	cancel()
	if err != nil {
		return e.fail(fmt.Errorf("list tables: %w", err))
	}
	sort.Strings(tables)
	if only != "" {
		found := false
		for _, t := range tables {
			found = found || t == only
		}
		if !found {
			fmt.Fprintf(e.stderr, "bttl init: -table: no table %q in the instance\n", only)
			return exitError
		}
		tables = []string{only}
	}
	tablesNode := &yaml.Node{Kind: yaml.MappingNode}
	streamsNode := &yaml.Node{Kind: yaml.MappingNode}
	var skipped []string
	for _, t := range tables {
		ctx, cancel := e.step()
		fams, err := e.admin.Families(ctx, t)
		cancel()
		if err != nil {
			return e.fail(fmt.Errorf("table %q: %w", t, err))
		}
		own, err := bttlStateTable(e, t, fams)
		if err != nil {
			return e.fail(fmt.Errorf("table %q: %w", t, err))
		}
		if own {
			msg := fmt.Sprintf("table %q left out: bttl's own state (bigtable:// checkpoints and audit reports), not data", t)
			skipped = append(skipped, msg)
			fmt.Fprintf(e.stderr, "bttl init: %s\n", msg)
			continue
		}
		names := make([]string, 0, len(fams))
		for f := range fams {
			names = append(names, f)
		}
		sort.Strings(names)
		famsNode := &yaml.Node{Kind: yaml.MappingNode}
		var left []string
		for _, f := range names {
			c := classify(fams[f].GetGcRule())
			if c.ok && c.family.Strategy == "sequence" && sampleRows > 0 {
				smp, err := sampleSequence(e, t, f, sampleRows)
				if err != nil {
					return e.fail(fmt.Errorf("table %q, family %q: sample: %w", t, f, err))
				}
				var contradicted bool
				if c, contradicted = judgeSequence(c, gcrule.Describe(fams[f].GetGcRule()), f, smp); contradicted {
					fmt.Fprintf(e.stderr, "bttl init: table %q, family %q: %s\n", t, f, c.note)
				}
			}
			if c.ok && (c.family.Strategy == "one-second" || c.family.Strategy == "default-expiry") && sampleRows > 0 {
				n, err := sampleCompanions(e, t, f, sampleRows)
				if err != nil {
					return e.fail(fmt.Errorf("table %q, family %q: sample: %w", t, f, err))
				}
				if n > 0 {
					c.family.WriteTime = true
					c.note = strings.TrimPrefix(c.note+fmt.Sprintf("; write_time: the first %d row(s) hold %d write-time companion(s), which bttl writes only for write_time families", sampleRows, n), "; ")
				}
			}
			if !c.ok {
				msg := fmt.Sprintf("table %q, family %q: %s", t, f, c.note)
				left = append(left, msg)
				fmt.Fprintf(e.stderr, "bttl init: could not classify %s\n", msg)
				continue
			}
			key := str(f)
			if c.note != "" {
				key.HeadComment = c.note
			}
			famsNode.Content = append(famsNode.Content, key, familyNode(c.family))
		}
		if len(famsNode.Content) == 0 {
			why := "no families"
			if len(left) > 0 {
				why = "no family bttl could classify"
			}
			skipped = append(skipped, fmt.Sprintf("table %q left out: %s", t, why))
			for _, l := range left {
				skipped = append(skipped, "  "+l)
			}
			continue
		}
		key := str(t)
		if len(left) > 0 {
			key.HeadComment = "not classified:\n" + strings.Join(left, "\n")
		}
		tablesNode.Content = append(tablesNode.Content, key, famsNode)
		ctx, cancel = e.step()
		info, err := e.admin.Client().TableInfo(ctx, t)
		cancel()
		if err != nil {
			return e.fail(fmt.Errorf("table %q: change stream: %w", t, err))
		}
		if d, ok := info.ChangeStreamRetention.(time.Duration); ok && d > 0 {
			streamsNode.Content = append(streamsNode.Content, str(t), str(formatDuration(d)))
		}
	}
	head := fmt.Sprintf("Written by bttl init from projects/%s/instances/%s at %s.\n"+
		"Each strategy is read off the family's GC rule; review the comments, then run bttl audit.",
		e.g.project, e.g.instance, e.now().UTC().Format(time.RFC3339))
	if len(skipped) > 0 {
		head += "\n" + strings.Join(skipped, "\n")
	}
	tablesKey := str("tables")
	top := []*yaml.Node{tablesKey, tablesNode}
	if len(streamsNode.Content) > 0 {
		streamsKey := str(schemafile.ChangeStreamKey)
		streamsKey.HeadComment = "The tables' change streams as they are (bttl apply keeps them so)."
		top = append(top, streamsKey, streamsNode)
	}
	root := &yaml.Node{Kind: yaml.DocumentNode, HeadComment: head, Content: []*yaml.Node{{
		Kind: yaml.MappingNode, Content: top,
	}}}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return e.fail(err)
	}
	if err := enc.Close(); err != nil {
		return e.fail(err)
	}
	if len(tablesNode.Content) == 0 {
		fmt.Fprintln(e.stderr, "bttl init: no table could be written; the file would not load")
	}
	if e.g.schema == "" {
		_, err = e.stdout.Write(buf.Bytes())
	} else {
		err = writeFileAtomic(e.g.schema, buf.Bytes())
		if err == nil {
			fmt.Fprintf(e.stdout, "wrote %s: %d table(s)\n", e.g.schema, len(tablesNode.Content)/2)
		}
	}
	if err != nil {
		return e.fail(err)
	}
	if len(tablesNode.Content) == 0 {
		return exitFindings
	}
	return exitOK
}

func str(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

func familyNode(f schemafile.Family) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
	add := func(k, v, tag string) {
		n.Content = append(n.Content, str(k), &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: v})
	}
	add("strategy", f.Strategy, "!!str")
	if f.TTL != "" {
		add("ttl", f.TTL, "!!str")
	}
	if f.Versions != 0 {
		add("versions", strconv.Itoa(f.Versions), "!!int")
	}
	if f.MaxVersions != 0 {
		add("max_versions", strconv.Itoa(f.MaxVersions), "!!int")
	}
	if f.WriteTime {
		add("write_time", "true", "!!bool")
	}
	return n
}

// bttlStateTable reports whether table is one bttl keeps its own state in
// (bigtable:// checkpoints and audit reports, scan.NewBigtableStore): its
// one family "ck", and its first row's cells in columns "record" and
// "owner" only. An empty table is not judged: nothing says it is bttl's.
func bttlStateTable(e *env, table string, fams map[string]*adminpb.ColumnFamily) (bool, error) {
	if _, ok := fams["ck"]; !ok || len(fams) != 1 {
		return false, nil
	}
	ctx, cancel := e.step()
	defer cancel()
	r := bigtable.Row{}
	err := e.data.Open(table).ReadRows(ctx, bigtable.InfiniteRange(""), func(row bigtable.Row) bool {
		r = row
		return false
	}, bigtable.RowFilter(bigtable.StripValueFilter()), bigtable.LimitRows(1))
	if err != nil || len(r["ck"]) == 0 {
		return false, err
	}
	for _, it := range r["ck"] {
		if it.Column != "ck:record" && it.Column != "ck:owner" {
			return false, nil
		}
	}
	return true, nil
}

// sampleCompanions counts the write-time companions (strategy.WithWriteTime)
// among family's cells in the first rows rows holding it: bttl writes
// them only for a family declared with write_time.
func sampleCompanions(e *env, table, family string, rows int64) (int, error) {
	ctx, cancel := e.step()
	defer cancel()
	n := 0
	err := e.data.Open(table).ReadRows(ctx, bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
		for _, k := range companion.Classify(family, r[family]) {
			if k == companion.Companion {
				n++
			}
		}
		return true
	}, bigtable.RowFilter(bigtable.ChainFilters(bigtable.FamilyFilter(filters.FamilyRegex(family)), bigtable.StripValueFilter())), bigtable.LimitRows(rows))
	return n, err
}

// writeFileAtomic writes through a temporary file in the same directory,
// so a failure leaves no half-written schema.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".bttl-init-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	err = errors.Join(err, f.Close())
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}
