package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/gcrule"
	scan "github.com/bttl/bttl/internal/scanjob"
	"github.com/bttl/bttl/internal/throttle"
	"github.com/bttl/bttl/schemafile"
	"github.com/bttl/bttl/strategy"
)

// Exit statuses.
const (
	exitOK          = 0
	exitFindings    = 1   // mismatch, finding, refusal, not confirmed
	exitError       = 2   // usage, file or connection error
	exitInterrupted = 130 // SIGINT, as a shell reports it
	exitTerminated  = 143 // SIGTERM, as a shell reports it
)

const exitCodes = `exit status: 0 ok; 1 finding or mismatch (also: apply refused or not confirmed, plan
when apply would refuse, lookup of a row that holds no cell, an app profile that cannot serve the
command refused);
2 usage, file or connection error; 130 interrupted (Ctrl-C); 143 terminated (SIGTERM).
`

// signalCause ends the command's context when a signal arrives (main).
type signalCause struct{ sig os.Signal }

func (s signalCause) Error() string { return "signal " + s.sig.String() }

// errCommandTimeout ends the command's context at -timeout.
var errCommandTimeout = errors.New("-timeout reached")

// stepTimeout bounds each start-up or admin step when -timeout is not
// given: a dead endpoint fails such a step instead of hanging. A variable
// for tests only.
var stepTimeout = 30 * time.Second

// globals are the flags every command takes, before or after its name.
type globals struct {
	project, instance, schema string
	creds, appProfile         string
	// writeAppProfile is -write-app-profile; set says it was given
	// (otherwise writes use appProfile).
	writeAppProfile     string
	writeAppProfileSet  bool
	dataEndpoint        string
	adminEndpoint       string
	certFile, userAgent string
	timeout             time.Duration
	version             bool
	// fromFile: the flags .cbtrc gave a value, and its path (source).
	fromFile map[string]string
}

// define adds the global flags to fs without resetting values already
// parsed (flag.StringVar would reset them to the default).
func (g *globals) define(fs *flag.FlagSet) {
	fs.Var(stringFlag{&g.project}, "project", "project `ID` (required)")
	fs.Var(stringFlag{&g.instance}, "instance", "instance `ID` (required)")
	fs.Var(stringFlag{&g.schema}, "schema", "schema `file`, JSON (.json) or YAML (init: the file to write; default stdout)")
	fs.Var(stringFlag{&g.creds}, "creds", "service account key `file` (default: Application Default Credentials)")
	fs.Var(stringFlag{&g.appProfile}, "app-profile", "app `profile` for the scans and reads of the table's data, e.g. a Data Boost profile for audit and migrate (default: the instance's default profile)")
	fs.Var(setStringFlag{stringFlag{&g.writeAppProfile}, &g.writeAppProfileSet}, "write-app-profile",
		"app `profile` for bttl's writes: migrate's moves, resolve's writes, checkpoints and reports in bigtable:// tables (and their reads); "+
			"a single-cluster profile that allows single-row transactions, e.g. a low-priority one for batch work, never Data Boost (default: -app-profile's)")
	fs.Var(stringFlag{&g.dataEndpoint}, "data-endpoint", "data API `host:port` instead of the default, as cbt takes it")
	fs.Var(stringFlag{&g.adminEndpoint}, "admin-endpoint", "admin API `host:port` instead of the default, as cbt takes it")
	fs.Var(stringFlag{&g.certFile}, "cert-file", "PEM `file` of the TLS root certificates to trust instead of the system's")
	fs.Var(stringFlag{&g.userAgent}, "user-agent", "user agent `string` sent with each request")
	fs.Var(durationFlag{p: &g.timeout}, "timeout",
		"limit the whole command to this `duration`, as cbt -timeout does (default: none; a scan, as of audit, migrate, verify, plan, apply or read, fails when it receives nothing for a while (-stall, 60s by default), and each other call to Bigtable is limited to 30s)")
	fs.Var(boolFlag{&g.version}, "version", "print the version and exit")
}

func newGlobals() *globals { return &globals{} }

// flagSet is a FlagSet that reports errors on stderr and prints no usage
// of its own: run prints help on stdout for -h.
func flagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {}
	return fs
}

func writeVersion(w io.Writer) {
	v := "(unknown)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		v = bi.Main.Version
	}
	fmt.Fprintf(w, "bttl %s %s\n", v, runtime.Version())
}

// run is the whole command, callable in-process by tests.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	g := newGlobals()
	top := flagSet("bttl", stderr)
	g.define(top)
	if err := top.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			writeTopHelp(stdout)
			return exitOK
		}
		fmt.Fprintln(stderr, "run 'bttl -h' for usage")
		return exitError
	}
	if g.version {
		writeVersion(stdout)
		return exitOK
	}
	if top.NArg() == 0 {
		writeTopHelp(stderr)
		return exitError
	}
	c, rest, ok := findCommand(top.Args())
	if !ok {
		fmt.Fprintf(stderr, "bttl: unknown command %q; run 'bttl -h' for the list\n", top.Arg(0))
		return exitError
	}
	name := c.name
	fs := flagSet("bttl "+name, stderr)
	g.define(fs)
	inv := c.setup(fs)
	// Flags may follow the arguments too (bttl read TABLE -json), as with
	// the go command; "--" ends the flags (a row key "-h").
	if err := parseInterspersed(fs, rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			writeCommandHelp(stdout, c)
			return exitOK
		}
		fmt.Fprintf(stderr, "run 'bttl help %s' for usage\n", name)
		return exitError
	}
	if g.version {
		writeVersion(stdout)
		return exitOK
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "bttl %s: %s\n", name, onePrefix(fmt.Sprintf(format, a...)))
		return exitError
	}
	if fs.NArg() > 0 && c.args == "" {
		return usageErr("unexpected arguments %q", fs.Args())
	}
	if err := flagsFromEnv(fs, os.Getenv); err != nil {
		return usageErr("%v", err)
	}
	// -timeout bounds the whole command (set once .cbtrc is read).
	var cancel context.CancelFunc = func() {}
	defer func() { cancel() }()
	bound := func() {
		if g.timeout > 0 {
			ctx, cancel = context.WithTimeoutCause(ctx, g.timeout, errCommandTimeout)
		}
	}
	if c.offline && (c.online == nil || !c.online(fs.Args())) {
		bound()
		if inv.check != nil {
			if err := inv.check(); err != nil {
				return usageErr("%v", err)
			}
		}
		e := &env{name: name, ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, g: g, now: time.Now, args: fs.Args()}
		return inv.run(e)
	}
	if err := applyCBTRC(cbtrcPath(), g, setFlags(top, fs)); err != nil {
		return usageErr("%v", err)
	}
	bound()
	if inv.check != nil {
		if err := inv.check(); err != nil {
			return usageErr("%v", err)
		}
	}
	if g.project == "" || g.instance == "" {
		return usageErr("-project and -instance are required (as flags, or project = and instance = lines in %s, as cbt reads them)", cbtrcPath())
	}
	if err := g.checkProfileIDs(); err != nil {
		return usageErr("%v", err)
	}
	if c.needsSchema && g.schema == "" {
		return usageErr("-schema is required")
	}
	if g.creds != "" {
		if _, err := os.Stat(g.creds); err != nil {
			return usageErr("%s: %v", g.source("creds"), err)
		}
	}
	e := &env{name: name, ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, g: g, now: time.Now, args: fs.Args()}
	if c.needsSchema {
		tables, err := schemafile.LoadTables(g.schema)
		if err != nil {
			return usageErr("-schema: %v", err)
		}
		schemas := make(map[string]strategy.Schema, len(tables))
		e.streams = map[string]*schemafile.ChangeStream{}
		for id, t := range tables {
			schemas[id] = t.Schema
			if t.ChangeStream != nil {
				e.streams[id] = t.ChangeStream
			}
		}
		e.schemas = schemas
		// -table (verify, plan, apply, audit, migrate) names a table of
		// the schema file: checked before any client exists.
		if f := fs.Lookup("table"); f != nil && f.Value.String() != "" {
			if _, ok := schemas[f.Value.String()]; !ok {
				return usageErr("-table: table %q is not in the schema file", f.Value.String())
			}
		}
		if inv.checkSchemas != nil {
			if err := inv.checkSchemas(schemas); err != nil {
				return usageErr("%v", err)
			}
		}
	}
	dataOpts, err := g.clientOptions(true)
	if err != nil {
		return usageErr("%v", err)
	}
	adminOpts, err := g.clientOptions(false)
	if err != nil {
		return usageErr("%v", err)
	}
	if err := probeEndpoints(ctx, g, os.Getenv); err != nil {
		fmt.Fprintf(stderr, "bttl %s: %v\n", name, err)
		return exitError
	}
	// Credentials are read here: a bad key file is named with its source.
	credsFrom := ""
	if g.creds != "" {
		credsFrom = " (credentials from " + g.source("creds") + " " + g.creds + ")"
	}
	// One pace for the command, fed by the interceptors of its data
	// clients (docs/design.md#throttling).
	e.pace = throttle.New(throttle.Config{Ceiling: flagRate(fs, "cells-per-second"), Period: throttlePeriod, MaxHold: flagDuration(fs, "stall")})
	data, closeData, err := g.dataClient(ctx, g.appProfile, dataOpts, e.pace)
	if err != nil {
		fmt.Fprintf(stderr, "bttl %s: data client%s: %v\n", name, credsFrom, err)
		return exitError
	}
	defer closeData()
	write := data
	if wp := g.writeProfile(); wp != g.appProfile {
		var closeWrite func()
		write, closeWrite, err = g.dataClient(ctx, wp, dataOpts, e.pace)
		if err != nil {
			fmt.Fprintf(stderr, "bttl %s: data client for writes%s: %v\n", name, credsFrom, err)
			return exitError
		}
		defer closeWrite()
	}
	ac, err := bigtable.NewAdminClient(ctx, g.project, g.instance, adminOpts...)
	if err != nil {
		fmt.Fprintf(stderr, "bttl %s: admin client%s: %v\n", name, credsFrom, err)
		return exitError
	}
	defer ac.Close()
	e.data, e.write, e.admin, e.adminClient = data, write, gcrule.NewAdmin(ac, g.project, g.instance), ac
	if writes := inv.writes != nil && inv.writes(); writes || inv.readsRecords {
		if err := checkWriteProfile(e, adminOpts, !writes); err != nil {
			fmt.Fprintf(stderr, "bttl %s: %v\n", name, onePrefix(err.Error()))
			return err.(*profileError).exitCode()
		}
	}
	bindFlags(fs, e)
	return inv.run(e)
}

// parseInterspersed parses args into fs, flags before, between and after
// the positional arguments, until "--"; fs.Args() is then the positional
// arguments, in order.
func parseInterspersed(fs *flag.FlagSet, args []string) error {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		n, rest := len(args)-fs.NArg(), fs.Args()
		if n > 0 && args[n-1] == "--" || len(rest) == 0 {
			pos = append(pos, rest...)
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	return fs.Parse(append([]string{"--"}, pos...))
}

// env is what a command needs once its flags are parsed.
type env struct {
	name    string
	ctx     context.Context
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
	g       *globals
	schemas map[string]strategy.Schema
	// streams are the schema file's change_stream_retention entries, by
	// table (plan, apply and verify set and check them).
	streams map[string]*schemafile.ChangeStream
	// data reads the table's data (-app-profile); write takes bttl's
	// writes and the reads of its records (-write-app-profile): the same
	// client when the profiles are the same.
	data, write *bigtable.Client
	// pace is the command's adaptive pace (scans, fed by both clients).
	pace  *throttle.Controller
	admin *gcrule.Admin
	// adminClient is admin's client, for the tables bttl keeps its own
	// state in (bigtable:// checkpoints).
	adminClient *bigtable.AdminClient
	now         func() time.Time
	args        []string // the command's positional arguments
}

// step returns a context for one step that calls Bigtable: the command's,
// which -timeout bounds, or without -timeout one bounded by stepTimeout.
func (e *env) step() (context.Context, context.CancelFunc) {
	if e.g.timeout > 0 {
		return context.WithCancel(e.ctx)
	}
	return context.WithTimeout(e.ctx, stepTimeout)
}

// scanStep returns a context for a step that scans a table, whose length
// grows with it: the command's, which -timeout bounds; the step bounds
// its own calls (a stall, a per-call limit).
func (e *env) scanStep() (context.Context, context.CancelFunc) {
	return context.WithCancel(e.ctx)
}

// envFlag is a flag whose value depends on the process's environment:
// fromEnv runs after parsing, before the command's checks (the job
// runner's variables give defaults), bind once the clients exist.
type envFlag interface {
	fromEnv(getenv func(string) string) error
	bind(e *env)
}

func flagsFromEnv(fs *flag.FlagSet, getenv func(string) string) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if v, ok := f.Value.(envFlag); ok && err == nil {
			err = v.fromEnv(getenv)
		}
	})
	return err
}

func bindFlags(fs *flag.FlagSet, e *env) {
	fs.VisitAll(func(f *flag.Flag) {
		if v, ok := f.Value.(envFlag); ok {
			v.bind(e)
		}
	})
}

// endpointOf names where the clients connect, for connection errors:
// BIGTABLE_EMULATOR_HOST, or the data and admin endpoints (g's
// -data-endpoint and -admin-endpoint, or the defaults).
func endpointOf(g *globals) string {
	if a := os.Getenv("BIGTABLE_EMULATOR_HOST"); a != "" {
		return a + " (BIGTABLE_EMULATOR_HOST)"
	}
	data, admin := "bigtable.googleapis.com:443", "bigtableadmin.googleapis.com:443"
	if g != nil && g.dataEndpoint != "" {
		data = g.dataEndpoint + " (" + g.source("data-endpoint") + ")"
	}
	if g != nil && g.adminEndpoint != "" {
		admin = g.adminEndpoint + " (" + g.source("admin-endpoint") + ")"
	}
	return data + " / " + admin
}

// interrupted reports a Ctrl-C or SIGTERM: the command's context is
// cancelled.
func (e *env) interrupted() bool { return errors.Is(e.ctx.Err(), context.Canceled) }

// fail prints err, once prefixed, and returns the exit status it implies:
// 130 when interrupted, 143 when terminated, else 2.
func (e *env) fail(err error) int {
	if e.interrupted() {
		var sc signalCause
		if errors.As(context.Cause(e.ctx), &sc) && sc.sig == syscall.SIGTERM {
			fmt.Fprintf(e.stderr, "bttl %s: terminated (SIGTERM); key ranges finished are in the checkpoint, if any: rerun with the same flags to resume\n", e.name)
			return exitTerminated
		}
		fmt.Fprintf(e.stderr, "bttl %s: interrupted\n", e.name)
		return exitInterrupted
	}
	msg := err.Error()
	var se *scan.StallError
	switch {
	case errors.As(err, &se):
		msg = fmt.Sprintf("no answer from %s for %s (-stall): %s", endpointOf(e.g), se.Interval, msg)
	case e.g.timeout > 0 && (errors.Is(context.Cause(e.ctx), errCommandTimeout) || errors.Is(err, context.DeadlineExceeded)):
		// With -timeout, the command's deadline is the only one.
		msg = fmt.Sprintf("not finished within %s (%s), talking to %s: %s", e.g.timeout, e.g.source("timeout"), endpointOf(e.g), msg)
	case errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded:
		msg = fmt.Sprintf("no answer from %s within %s (a call's limit without -timeout): %s", endpointOf(e.g), stepTimeout, msg)
	case status.Code(err) == codes.Unavailable:
		msg = fmt.Sprintf("cannot reach %s: %s", endpointOf(e.g), msg)
	}
	fmt.Fprintf(e.stderr, "bttl %s: %s\n", e.name, onePrefix(msg))
	return exitError
}

// onePrefix drops the "bttl: " the library's errors carry: the command
// prints its own "bttl CMD: " before every message.
func onePrefix(msg string) string {
	return strings.TrimPrefix(strings.ReplaceAll(msg, ": bttl: ", ": "), "bttl: ")
}

// tableFlag adds -table, common to the commands that act on the schema's
// tables.
func tableFlag(fs *flag.FlagSet) *string {
	return fs.String("table", "", "act on this table of the schema file only (default: all)")
}

// tables returns the schema's tables to act on, sorted, or a usage error.
func (e *env) tables(only string) ([]string, error) {
	if only != "" {
		if _, ok := e.schemas[only]; !ok {
			return nil, fmt.Errorf("-table: table %q is not in the schema file", only)
		}
		return []string{only}, nil
	}
	out := make([]string, 0, len(e.schemas))
	for t := range e.schemas {
		out = append(out, t)
	}
	sort.Strings(out)
	return out, nil
}

// worst combines exit statuses: interrupted > error > finding > ok.
func worst(a, b int) int {
	rank := func(c int) int {
		switch c {
		case exitInterrupted, exitTerminated:
			return 3
		case exitError:
			return 2
		case exitFindings:
			return 1
		}
		return 0
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
}
