package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"
	btapb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/internal/rules"
	scan "github.com/bttl/bttl/internal/scanjob"
	"github.com/bttl/bttl/internal/throttle"
	"github.com/bttl/bttl/internal/timefmt"
)

// throttlePeriod is the adaptive pace's period (throttle.Config.Period).
// A variable for tests only.
var throttlePeriod = throttle.DefaultPeriod

// setStringFlag is a string flag that records it was given.
type setStringFlag struct {
	stringFlag
	set *bool
}

func (f setStringFlag) Set(s string) error {
	*f.set = true
	return f.stringFlag.Set(s)
}

// flagRate is the value of rate flag name of fs (0 when fs has none).
func flagRate(fs *flag.FlagSet, name string) float64 {
	f := fs.Lookup(name)
	if f == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(f.Value.String(), 64) // rateFlag checked it
	return v
}

// flagDuration is the value of duration flag name of fs (0 when fs has
// none, or it is 0): -stall, the longest a RESOURCE_EXHAUSTED holds the
// scan's workers (throttle.Config.MaxHold), as no read may wait longer
// unseen.
func flagDuration(fs *flag.FlagSet, name string) time.Duration {
	f := fs.Lookup(name)
	if f == nil {
		return 0
	}
	d, _ := time.ParseDuration(f.Value.String()) // durationFlag checked it
	return d
}

// checkProfileIDs refuses an app profile given as its resource name
// (projects/P/instances/I/appProfiles/ID): requests and GetAppProfile take
// its ID, and an ID has no "/" (instance.proto: app profile IDs are
// [_a-zA-Z0-9][-_.a-zA-Z0-9]*).
func (g *globals) checkProfileIDs() error {
	for _, f := range []struct{ name, v string }{{"-app-profile", g.appProfile}, {"-write-app-profile", g.writeAppProfile}} {
		if !strings.Contains(f.v, "/") {
			continue
		}
		if _, id, ok := strings.Cut(f.v, "/appProfiles/"); ok && id != "" && !strings.Contains(id, "/") {
			return fmt.Errorf("%s: %q is a profile's resource name: give its ID, %q", f.name, f.v, id)
		}
		return fmt.Errorf("%s: %q is not an app profile ID (no \"/\" in one)", f.name, f.v)
	}
	return nil
}

// writeProfile is the profile bttl's writes go through: -write-app-profile,
// or -app-profile's when it is not given.
func (g *globals) writeProfile() string {
	if g.writeAppProfileSet {
		return g.writeAppProfile
	}
	return g.appProfile
}

// emulatorScheme is what the Bigtable client strips from
// BIGTABLE_EMULATOR_HOST before dialling it (schemeRegexp,
// internal/option/option.go, v1.58.0).
var emulatorScheme = regexp.MustCompile("^(http://|https://|passthrough:///)")

// dataClient opens a data client with app profile profile whose calls pass
// pace's interceptors. Under BIGTABLE_EMULATOR_HOST the client ignores
// option.WithGRPCDialOption (it dials the emulator itself), so the
// connection is dialled here, with the interceptors.
func (g *globals) dataClient(ctx context.Context, profile string, opts []option.ClientOption, pace *throttle.Controller) (*bigtable.Client, func(), error) {
	// Sessions off: the session data plane has connections of its own,
	// which the interceptors would not see (as for ttlclient and the wire
	// guard, docs/design.md#write-path).
	cfg := bigtable.ClientConfig{AppProfile: profile, MetricsProvider: bigtable.NoopMetricsProvider{}, DisableSession: true}
	closeConn := func() {}
	if addr := os.Getenv("BIGTABLE_EMULATOR_HOST"); addr != "" {
		// As the client dials it (internal/option/option.go, v1.58.0):
		// without the scheme the variable may carry, resolved as is.
		addr = "passthrough:///" + emulatorScheme.ReplaceAllString(addr, "")
		conn, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, pace.DialOptions()...)...)
		if err != nil {
			return nil, nil, err
		}
		closeConn = func() { _ = conn.Close() }
		opts = append(append([]option.ClientOption(nil), opts...), option.WithGRPCConn(conn))
	} else {
		opts = append([]option.ClientOption(nil), opts...)
		for _, d := range pace.DialOptions() {
			opts = append(opts, option.WithGRPCDialOption(d))
		}
	}
	c, err := bigtable.NewClientWithConfig(ctx, g.project, g.instance, cfg, opts...)
	if err != nil {
		closeConn()
		return nil, nil, err
	}
	return c, func() { _ = c.Close(); closeConn() }, nil
}

// profileError says that an app profile cannot serve bttl's writes: a
// Data Boost profile is read-only and may miss the last half hour's
// writes, and CheckAndMutateRow (every move, every checkpoint and report
// write) needs single-cluster routing with transactional writes allowed.
type profileError struct {
	// Profile is the profile's ID; Flag the flag it came from, as said to
	// the user ("-app-profile (no -write-app-profile given)").
	Profile, Flag string
	// Reason says what the profile is.
	Reason string
	// ReadsOnly: the command only reads bttl's records back.
	ReadsOnly bool
	// NotFound: the instance has no such profile.
	NotFound bool
}

// exitCode: a profile that exists but cannot serve the command is a
// refusal (exit 1, as apply's refusals); one the instance does not have
// is a wrong argument (exit 2, as a table that does not exist).
func (e *profileError) exitCode() int {
	if e.NotFound {
		return exitError
	}
	return exitFindings
}

func (e *profileError) Error() string {
	if e.ReadsOnly {
		return fmt.Sprintf("app profile %q (%s) cannot serve the reads of bttl's records: %s; "+
			"give -write-app-profile a single-cluster profile, the one the records were written through",
			e.Profile, e.Flag, e.Reason)
	}
	return fmt.Sprintf("app profile %q (%s) cannot take bttl's writes (moves, checkpoints and reports, and the reads of those records): %s; "+
		"give -write-app-profile a single-cluster profile that allows single-row transactions (a low-priority one for batch work: docs/runbook.md#app-profiles-for-batch-jobs), and keep -app-profile for the scans",
		e.Profile, e.Flag, e.Reason)
}

// checkWriteProfile reads the write profile from the instance admin API
// and refuses (a *profileError), before any write, one that cannot take bttl's writes (with
// readsOnly, a command that only reads bttl's records back: one that
// cannot serve those reads, transactions not needed). A
// profile that cannot be read (no permission, an emulator without the
// instance admin API) is noted on stderr when it was named and let
// through: the writes then fail with the server's refusal.
func checkWriteProfile(e *env, adminOpts []option.ClientOption, readsOnly bool) error {
	profile := e.g.writeProfile()
	id, from := profile, "-write-app-profile"
	if !e.g.writeAppProfileSet {
		from = "-app-profile, as no -write-app-profile is given"
	}
	switch {
	case id == "" && e.g.writeAppProfileSet:
		id, from = "default", "-write-app-profile, given empty: the instance's default profile"
	case id == "":
		id, from = "default", "the instance's default profile, as neither -app-profile nor -write-app-profile is given"
	}
	ctx, cancel := e.step()
	defer cancel()
	iac, err := bigtable.NewInstanceAdminClient(ctx, e.g.project, adminOpts...)
	if err != nil {
		return nil // as an unreadable profile: the writes say
	}
	defer iac.Close()
	ap, err := iac.GetAppProfile(ctx, e.g.instance, id)
	switch {
	case status.Code(err) == codes.NotFound && profile != "":
		return &profileError{Profile: id, Flag: from, Reason: "the instance has no such profile", ReadsOnly: readsOnly, NotFound: true}
	case err != nil:
		if profile != "" {
			fmt.Fprintf(e.stderr, "bttl %s: note: app profile %q (%s) not checked (%s): a Data Boost or multi-cluster profile refuses bttl's writes\n",
				e.name, id, from, onePrefix(status.Convert(err).Message()))
		}
		return nil
	}
	if readsOnly {
		return classifyRecordsProfile(ap, id, from)
	}
	return classifyWriteProfile(ap, id, from)
}

// classifyRecordsProfile refuses a profile that cannot serve the reads of
// bttl's records: they must see the latest writes, which a Data Boost
// profile may miss (30 minutes) and multi-cluster routing may too (a
// record just written on another cluster, replicated asynchronously:
// Replication overview); no CheckAndMutateRow is sent.
func classifyRecordsProfile(ap *btapb.AppProfile, id, from string) error {
	switch {
	case ap.GetDataBoostIsolationReadOnly() != nil:
		return &profileError{Profile: id, Flag: from, ReadsOnly: true, Reason: "it is a Data Boost profile, whose reads may miss the last 30 minutes of writes"}
	case ap.GetSingleClusterRouting() == nil:
		return &profileError{Profile: id, Flag: from, ReadsOnly: true, Reason: "it routes to any cluster (multi-cluster routing), whose reads may miss a record just written on another cluster"}
	}
	return nil
}

// classifyWriteProfile refuses a profile that cannot take bttl's writes.
func classifyWriteProfile(ap *btapb.AppProfile, id, from string) error {
	// AppProfile.DataBoostIsolationReadOnly (instance.proto): read-only,
	// "only guaranteed to see the results of writes that were written at
	// least 30 minutes ago".
	if ap.GetDataBoostIsolationReadOnly() != nil {
		return &profileError{Profile: id, Flag: from, Reason: "it is a Data Boost profile, which is read-only and whose reads may miss the last 30 minutes of writes"}
	}
	// App profiles overview, "Single-row transactions": CheckAndMutateRow
	// needs single-cluster routing with allow_transactional_writes.
	// (rules.Transactional: the library's rule, ttlclient's Open check's too.)
	if !rules.Transactional(ap) {
		reason := "its single-cluster routing does not allow transactional writes (CheckAndMutateRow)"
		if ap.GetSingleClusterRouting() == nil {
			reason = "it routes to any cluster (multi-cluster routing), which refuses single-row transactions (CheckAndMutateRow)"
		}
		return &profileError{Profile: id, Flag: from, Reason: reason}
	}
	return nil
}

// dataBoostLag is how far behind the writes a Data Boost profile's reads
// may be: "only guaranteed to see the results of writes that were written
// at least 30 minutes ago" (AppProfile.DataBoostIsolationReadOnly,
// instance.proto), and the runbook's 35 minutes (docs/runbook.md#app-profiles-for-batch-jobs).
const dataBoostLag = 35 * time.Minute

// readProfileDataBoost reports whether -app-profile names a Data Boost
// profile, as the instance admin API says: false without -app-profile (a
// default profile is never Data Boost) or when the profile cannot be read.
func readProfileDataBoost(e *env) bool {
	if e.g.appProfile == "" {
		return false
	}
	adminOpts, err := e.g.clientOptions(false)
	if err != nil {
		return false
	}
	ctx, cancel := e.step()
	defer cancel()
	iac, err := bigtable.NewInstanceAdminClient(ctx, e.g.project, adminOpts...)
	if err != nil {
		return false
	}
	defer iac.Close()
	ap, err := iac.GetAppProfile(ctx, e.g.instance, e.g.appProfile)
	return err == nil && ap.GetDataBoostIsolationReadOnly() != nil
}

// checkDataBoostLag refuses an in-place migration whose scan goes through
// a Data Boost profile while the legacy cells (written at or before
// -written-before plus the skew) may not all be visible there yet: its
// "nothing left to move" would be a guess, and the next step, bttl apply,
// would collect the cells it did not see.
func (a *migrateArgs) checkDataBoostLag(e *env) error {
	_, last := a.p.Window()
	if last.IsZero() || a.checkCopy {
		return nil
	}
	visible := last.Add(dataBoostLag)
	if !e.now().Before(visible) || !readProfileDataBoost(e) {
		return nil
	}
	other := "a single-cluster profile"
	if wp := e.g.writeProfile(); wp != e.g.appProfile {
		other += " (-app-profile " + shellQuote(wp) + ", the write profile)"
	}
	return fmt.Errorf("app profile %q (-app-profile) is a Data Boost profile, whose reads may miss the writes of the last %s: "+
		"the legacy cells, written up to -written-before plus -clock-skew (%s), are all visible there only from %s; "+
		"run then, or scan through %s",
		e.g.appProfile, timefmt.Duration(dataBoostLag), timefmt.Instant(last), timefmt.Instant(visible), other)
}

// rateText is the pace for a progress line: ", rate N cells/s" and the
// RESOURCE_EXHAUSTED answers so far; "" without a pace, or while it is
// unlimited and nothing was throttled (the line says nothing new then).
func rateText(pace *throttle.Controller) string {
	if pace == nil {
		return ""
	}
	r, n := pace.Rate(), pace.Stats().Throttled
	if r == 0 && n == 0 {
		return ""
	}
	out := ", rate unlimited"
	if r > 0 {
		out = fmt.Sprintf(", rate %.0f cells/s", r)
	}
	if n > 0 {
		out += fmt.Sprintf(" (%d throttled)", n)
	}
	return out
}

// writeMetricsWithPace writes what write writes, then the pace's series
// (throttle.MetricRate and the others, labelled command), to path
// atomically, readable by a textfile collector as WriteToTextfile leaves
// its files.
func writeMetricsWithPace(path string, write func(io.Writer) error, pace *throttle.Controller, command string) error {
	var b bytes.Buffer
	if err := write(&b); err != nil {
		return err
	}
	if pace != nil {
		if err := pace.WriteMetrics(&b, command); err != nil {
			return err
		}
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(b.Bytes())
	err = errors.Join(err, f.Chmod(0o644), f.Close())
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}

// always is invocation.writes for a command that always writes, or reads
// bttl's records.
func always() bool { return true }

// writes reports whether the migrate run writes: moves (a real run),
// Bigtable-held checkpoints or reports.
func (a *migrateArgs) writes() bool {
	return !a.dryRun && !a.checkCopy || strings.HasPrefix(a.checkpoint, scan.BigtableScheme) || a.report != ""
}
