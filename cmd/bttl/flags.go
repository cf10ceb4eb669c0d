package main

import (
	"errors"
	"flag"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	scan "github.com/bttl/bttl/internal/scanjob"
)

// Flag values that check what they are given: the flag package then
// reports `invalid value "x" for flag -name: why`, and run exits 2.

type stringFlag struct{ p *string }

func (f stringFlag) Set(s string) error { *f.p = s; return nil }
func (f stringFlag) String() string {
	if f.p == nil {
		return ""
	}
	return *f.p
}

type boolFlag struct{ p *bool }

func (f boolFlag) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true or false")
	}
	*f.p = v
	return nil
}
func (f boolFlag) String() string   { return strconv.FormatBool(f.p != nil && *f.p) }
func (f boolFlag) IsBoolFlag() bool { return true }

// durationFlag is a duration >= 0; set records that it was given.
type durationFlag struct {
	p   *time.Duration
	set *bool
}

func (f durationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("want a duration such as 30s or 2m")
	}
	if d < 0 {
		return errors.New("must not be negative")
	}
	*f.p = d
	if f.set != nil {
		*f.set = true
	}
	return nil
}
func (f durationFlag) String() string {
	if f.p == nil {
		return "0s"
	}
	return f.p.String()
}

// sampleFlag is a fraction in (0,1]; 1 reads every row.
type sampleFlag struct{ p *float64 }

func (f sampleFlag) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v > 0 && v <= 1) {
		return errors.New("must be a fraction in (0,1], e.g. 0.01 for 1% of rows")
	}
	*f.p = v
	return nil
}
func (f sampleFlag) String() string {
	if f.p == nil || *f.p == 0 {
		return ""
	}
	return strconv.FormatFloat(*f.p, 'g', -1, 64)
}

// countFlag is an integer >= min.
type countFlag struct {
	p   *int64
	min int64
}

func (f countFlag) Set(s string) error {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < f.min {
		return fmt.Errorf("must be an integer >= %d", f.min)
	}
	*f.p = v
	return nil
}
func (f countFlag) String() string {
	if f.p == nil {
		return "0"
	}
	return strconv.FormatInt(*f.p, 10)
}

// The findings audit -fail-on can name.
const (
	findExpired        = "expired"
	findRealTimestamps = "real-timestamps"
	findNoGCRule       = "no-gc-rule"
	findNotOnRule      = "not-on-rule"
	findBeyondKept     = "beyond-kept"
	findLargeRows      = "large-rows"
	// A sequence family holding timestamps that are not seq*1000.
	findNotSequence = "not-sequence"
	// An age family holding sequence numbers (the age rule deletes them).
	findSequenceNumbers = "sequence-numbers"
	// Reserved qualifiers in a write-time family that are not companions,
	// hidden from reads (docs/design.md#write-time).
	findHiddenReserved = "hidden-reserved"
)

var allFindings = []string{findExpired, findNoGCRule, findNotOnRule, findRealTimestamps, findBeyondKept, findLargeRows, findNotSequence, findSequenceNumbers, findHiddenReserved}

// failOnFlag is a comma-separated list of findings, or "all".
type failOnFlag struct{ p *[]string }

func (f failOnFlag) Set(s string) error {
	var out []string
	for _, k := range strings.Split(s, ",") {
		k = strings.TrimSpace(k)
		switch {
		case k == "all":
			out = append(out, allFindings...)
		case k == "":
		default:
			known := false
			for _, a := range allFindings {
				known = known || a == k
			}
			if !known {
				return fmt.Errorf("unknown finding %q: want a comma-separated list of %s, or all", k, strings.Join(allFindings, ", "))
			}
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return errors.New("empty list")
	}
	*f.p = out
	return nil
}
func (f failOnFlag) String() string {
	if f.p == nil {
		return ""
	}
	return strings.Join(*f.p, ",")
}

// rateFlag is a rate >= 0.
type rateFlag struct{ p *float64 }

func (f rateFlag) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || v != v {
		return errors.New("must be a number >= 0 (0: no limit)")
	}
	*f.p = v
	return nil
}
func (f rateFlag) String() string {
	if f.p == nil {
		return "0"
	}
	return strconv.FormatFloat(*f.p, 'g', -1, 64)
}

// shardFlag is i/n with 0 <= i < n.
type shardFlag struct{ p *scan.Shard }

func (f shardFlag) Set(s string) error {
	sh, err := scan.ParseShard(s)
	if err != nil {
		var oe *scan.OptionError
		if errors.As(err, &oe) {
			return errors.New(oe.Reason)
		}
		return err
	}
	*f.p = sh
	return nil
}
func (f shardFlag) String() string {
	if f.p == nil || f.p.Count == 0 {
		return ""
	}
	return f.p.String()
}

// timeFlag is an RFC 3339 time, kept in UTC.
type timeFlag struct{ p *time.Time }

func (f timeFlag) Set(s string) error {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return errors.New("want an RFC 3339 time such as 2026-01-02T15:04:05Z")
	}
	*f.p = t.UTC()
	return nil
}
func (f timeFlag) String() string {
	if f.p == nil || f.p.IsZero() {
		return ""
	}
	return f.p.Format(time.RFC3339Nano)
}

// scanFlags are the scan engine's flags (docs/design.md#scan-engine), the
// same for every command that reads a whole table.
type scanFlags struct {
	workers        int64
	cellsPerSecond float64
	shard          scan.Shard
	shardSet       bool
	shardCount     int64
	shardFrom      string // where the shard came from, for the header
	shardKeys      string
	stall          time.Duration
	e              *env // set once the clients exist (bind)
	// unindexed: -shard-count without a task index. wholeOK: the command
	// reads the whole table then (a dry run, given a job's flags on a
	// machine with no job runner); otherwise check refuses it.
	unindexed, wholeOK bool
}

// defaultStall is -stall's default.
const defaultStall = 60 * time.Second

// register adds the flags to fs; verb says what the command does to a key
// range ("read", "migrate").
func (s *scanFlags) register(fs *flag.FlagSet, verb string) {
	s.workers = 1
	s.stall = defaultStall
	fs.Var(countFlag{&s.workers, 1}, "workers", verb+" this many key ranges at once (`n` streams)")
	fs.Var(rateFlag{&s.cellsPerSecond}, "cells-per-second", verb+" at most this many cells a second over all workers (`rate`; 0: no limit): the ceiling of the pace, which RESOURCE_EXHAUSTED answers lower and quiet seconds raise back (docs/design.md#throttling)")
	fs.Var(scanShardFlag{shardFlag{&s.shard}, s}, "shard", verb+" only shard `i/n` of the key space (0 <= i < n), for n processes each taking one "+
		"(default: from the job runner, CLOUD_RUN_TASK_INDEX/CLOUD_RUN_TASK_COUNT, BATCH_TASK_INDEX/BATCH_TASK_COUNT, or JOB_COMPLETION_INDEX with -shard-count)")
	fs.Var(countFlag{&s.shardCount, 1}, "shard-count", "the shard count `n` for a Kubernetes Indexed Job, whose pods get their index only (JOB_COMPLETION_INDEX): the Job's completions")
	fs.StringVar(&s.shardKeys, "shard-keys", "", "read the n-1 keys that bound the shards from this `file`, one per line (Go-quoted when in double quotes), as bttl audit -suggest-shard-keys writes them (default: an even split of the key space)")
	fs.Var(durationFlag{p: &s.stall}, "stall", "a key range whose read receives nothing for this `duration` is read once more from its last row, then the command fails (exit 2) naming the endpoint; migrate's writes are bounded by it too (0: wait as long as -timeout allows)")
}

// scanShardFlag is -shard, whose default comes from the job runner's
// environment, and through which the scan flags get the clients.
type scanShardFlag struct {
	shardFlag
	s *scanFlags
}

func (f scanShardFlag) Set(v string) error {
	if err := f.shardFlag.Set(v); err != nil {
		return err
	}
	f.s.shardSet = true
	return nil
}

func (f scanShardFlag) fromEnv(getenv func(string) string) error { return f.s.fromEnv(getenv) }
func (f scanShardFlag) bind(e *env)                              { f.s.e = e }

// taskRunners are the job runners whose task index (and count) give
// -shard's default, in the order looked at.
var taskRunners = []struct{ index, count, name string }{
	{"CLOUD_RUN_TASK_INDEX", "CLOUD_RUN_TASK_COUNT", "a Cloud Run job"},
	{"BATCH_TASK_INDEX", "BATCH_TASK_COUNT", "a Cloud Batch job"},
	{"JOB_COMPLETION_INDEX", "", "a Kubernetes Indexed Job"},
}

// scanGCPercent is the garbage collector's target for a scan when GOGC is
// not set: a scan's live heap is small and fixed (docs/design.md#scan-engine,
// memory bound), its garbage (one decoded response per row) large, and at
// the default 100 the collector took about a quarter of a 1-worker audit's
// CPU (BENCHMARKS.md#audit-pace).
const scanGCPercent = 400

// fromEnv sets the shard from the job runner's variables when -shard is
// not given, and the scan's GC target.
func (s *scanFlags) fromEnv(getenv func(string) string) error {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(scanGCPercent)
	}
	if s.shardSet {
		if s.shardCount > 0 && int(s.shardCount) != s.shard.Count {
			return fmt.Errorf("-shard-count %d contradicts -shard %s", s.shardCount, s.shard)
		}
		s.shardFrom = "-shard"
		return nil
	}
	for _, r := range taskRunners {
		idx := getenv(r.index)
		if idx == "" {
			continue
		}
		i, err := strconv.Atoi(idx)
		if err != nil || i < 0 {
			return fmt.Errorf("%s=%q (%s): not a task index", r.index, idx, r.name)
		}
		n, from := int(s.shardCount), fmt.Sprintf("%s=%d, -shard-count %d", r.index, i, s.shardCount)
		if r.count != "" && getenv(r.count) != "" {
			c, err := strconv.Atoi(getenv(r.count))
			if err != nil || c < 1 {
				return fmt.Errorf("%s=%q (%s): not a task count", r.count, getenv(r.count), r.name)
			}
			if n > 0 && n != c {
				return fmt.Errorf("-shard-count %d contradicts %s=%d", n, r.count, c)
			}
			n, from = c, fmt.Sprintf("%s=%d, %s=%d", r.index, i, r.count, c)
		}
		if n == 0 {
			return fmt.Errorf("%s=%d is set (%s) but not the task count: give -shard-count N (the Job's completions), or -shard i/n", r.index, i, r.name)
		}
		if i >= n {
			return fmt.Errorf("task index %d is not below the task count %d (%s)", i, n, from)
		}
		s.shard, s.shardFrom = scan.Shard{Index: i, Count: n}, from
		return nil
	}
	s.unindexed = s.shardCount > 0
	return nil
}

func (s *scanFlags) check() error {
	switch {
	case s.unindexed && !s.wholeOK:
		return errors.New("-shard-count needs a task index (JOB_COMPLETION_INDEX); without a job runner give -shard i/n")
	case s.shardKeys != "" && s.shard.Count < 2 && !(s.unindexed && s.wholeOK):
		return errors.New("-shard-keys needs -shard i/n with n of at least 2")
	}
	return nil
}

// sharded reports whether -shard splits the work.
func (s *scanFlags) sharded() bool { return s.shard.Count > 1 }

// options are the scan options the flags give. Once the clients exist,
// they also let -checkpoint be bigtable://TABLE, print the shard (and
// where it came from) on stderr, and warn there of an uneven split.
func (s *scanFlags) options() ([]scan.Option, error) {
	opts := []scan.Option{scan.WithWorkers(int(max(s.workers, 1))), scan.WithCellsPerSecond(s.cellsPerSecond), scan.WithStall(s.stall)}
	if s.sharded() {
		opts = append(opts, scan.WithShard(s.shard.Index, s.shard.Count))
	}
	if s.shardKeys != "" && s.sharded() {
		keys, err := readShardKeys(s.shardKeys)
		if err != nil {
			return nil, fmt.Errorf("-shard-keys: %w", err)
		}
		opts = append(opts, scan.WithShardKeys(keys...))
	}
	if e := s.e; e != nil {
		opts = append(opts, scan.WithBigtableCheckpoints(e.write, e.adminClient))
		if e.pace != nil {
			opts = append(opts, scan.WithPacer(e.pace))
		}
		if s.shardFrom != "" && s.shardFrom != "-shard" || s.sharded() {
			from := ""
			if s.shardFrom != "" {
				from = " (" + s.shardFrom + ")"
			}
			fmt.Fprintf(e.stderr, "bttl %s: shard %s%s\n", e.name, s.shard, from)
		}
		if s.unindexed {
			fmt.Fprintf(e.stderr, "bttl %s: the whole table: -shard-count %d without a task index (JOB_COMPLETION_INDEX), so this dry run reads every shard\n", e.name, s.shardCount)
		}
		opts = append(opts, scan.WithShardWarnings(func(w scan.ShardWarning) { s.warn(e, w) }))
	}
	return opts, nil
}

// warn prints a shard warning with its remedy.
func (s *scanFlags) warn(e *env, w scan.ShardWarning) {
	// The command must run as printed: the schema and instance included.
	suggest := fmt.Sprintf("bttl -project %s -instance %s -schema %s audit -table %s -suggest-shard-keys %d",
		shellQuote(e.g.project), shellQuote(e.g.instance), shellQuote(e.g.schema), shellQuote(w.Table), w.Shard.Count)
	remedy := fmt.Sprintf("write shard keys from the data once, with: %s > shard-keys.txt; then give every shard the same -shard-keys shard-keys.txt", suggest)
	how := "the default even split of the key space suits binary hashed keys only"
	if s.shardKeys != "" {
		how = "the table changed since -shard-keys " + s.shardKeys + " was written"
	}
	if w.Empty {
		fmt.Fprintf(e.stderr, "bttl %s: warning: shard %s of table %q held no rows (%s): %s\n", e.name, w.Shard, w.Table, how, remedy)
		return
	}
	sizes := make([]string, len(w.Sizes))
	for i, n := range w.Sizes {
		sizes[i] = fmt.Sprintf("%d:%d", i, n)
	}
	fmt.Fprintf(e.stderr, "bttl %s: warning: the %d shards of table %q differ more than 4x in size (the table's sample points per shard %s; %s): %s\n",
		e.name, w.Shard.Count, w.Table, strings.Join(sizes, " "), how, remedy)
}

// shellQuote is s as a POSIX shell word: as is when it holds only safe
// characters, else in single quotes.
func shellQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		safe = safe && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-./:=@%+,", r))
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
