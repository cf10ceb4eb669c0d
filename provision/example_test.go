package provision_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"cloud.google.com/go/bigtable"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/provision"
	"github.com/bttl/bttl/strategy"
)

// exSchema is what the application needs now.
var exSchema = strategy.Schema{
	"clicks":  strategy.DefaultExpiry(48 * time.Hour), // was 24h
	"doc":     strategy.Sequence(5),                   // unchanged
	"session": strategy.OneSecond(),                   // had no GC rule
}

// exLegacy starts the in-process emulator with table "events" as an older
// deployment left it, and returns a gcrule.Admin on it.
func exLegacy(ctx context.Context) (*bttestharness.Harness, *gcrule.Admin) {
	h, err := bttestharness.Start(ctx)
	if err != nil {
		panic(err)
	}
	if err := h.CreateTable(ctx, "events", strategy.Schema{
		"clicks":  strategy.DefaultExpiry(24 * time.Hour),
		"doc":     strategy.Sequence(5),
		"session": strategy.Unmanaged(),
	}); err != nil {
		panic(err)
	}
	return h, gcrule.NewAdmin(h.Admin, bttestharness.Project, bttestharness.Instance)
}

// exLegacyWrite writes a session cell the way legacy code or cbt does, with
// the server's (real) time as its timestamp.
func exLegacyWrite(ctx context.Context, h *bttestharness.Harness, row string) {
	m := bigtable.NewMutation()
	m.Set("session", "token", bigtable.ServerTime, []byte("abc"))
	if err := h.Raw.Open("events").Apply(ctx, row, m); err != nil {
		panic(err)
	}
}

// Apply creates what is missing; a second run changes nothing and says so.
func ExampleProvisioner_Apply() {
	ctx := context.Background()
	h, err := bttestharness.Start(ctx) // the in-process emulator
	if err != nil {
		panic(err)
	}
	defer h.Close()
	admin := gcrule.NewAdmin(h.Admin, bttestharness.Project, bttestharness.Instance)
	p := provision.New(admin, h.Raw, provision.WithOutput(os.Stdout))
	schema := strategy.Schema{"clicks": strategy.DefaultExpiry(48 * time.Hour), "doc": strategy.Sequence(3)}
	for i := 0; i < 2; i++ {
		if _, err := p.Apply(ctx, "example-events", schema); err != nil {
			panic(err)
		}
	}
	fmt.Println(admin.Verify(ctx, "example-events", schema))
	// Output:
	// table "example-events":
	//   create table "example-events"
	//   create family "clicks" with max_age=2d (default-expiry(D=48h0m0s))
	//   create family "doc" with max_versions=3 (sequence(N=3))
	// table "example-events": no change (every family matches the schema)
	// <nil>
}

// New takes a gcrule.Admin for the rules and a data client for the
// one-second safety scan. By default it prints nothing, reads time from
// the system clock and reads every row of a family it checks (a sample
// only with WithSampledSafetyScan).
func ExampleNew() {
	ctx := context.Background()
	h, admin := exLegacy(ctx)
	defer h.Close()

	p := provision.New(admin, h.Raw)
	plan, err := p.Apply(ctx, "events", exSchema)
	if err != nil {
		panic(err)
	}
	for _, c := range plan.Changes {
		fmt.Println(c)
	}
	// Output:
	// family "clicks" (default-expiry(D=48h0m0s)): max_age=1d -> max_age=2d [raises]
	// family "session" (one-second): none (never collected) -> max_age=1s [lowers]
}

// Plan is a dry run: it reads the table and changes nothing.
func ExampleProvisioner_Plan() {
	ctx := context.Background()
	h, admin := exLegacy(ctx)
	defer h.Close()

	plan, err := provision.New(admin, h.Raw).Plan(ctx, "events", exSchema)
	if err != nil {
		panic(err)
	}
	for _, c := range plan.Changes {
		fmt.Printf("%s: %s -> %s, one-second adoption: %t\n", c.Family, c.From, c.To, c.OneSecondAdoption)
	}
	fmt.Println("still as it was:", admin.Verify(ctx, "events", exSchema) != nil)
	// Output:
	// clicks: max_age=1d -> max_age=2d, one-second adoption: false
	// session: none (never collected) -> max_age=1s, one-second adoption: true
	// still as it was: true
}

// Execute carries out a plan once it has been reviewed, as a deployment
// tool that asks before changing anything does. It runs the one-second
// safety scan again first.
func ExampleProvisioner_Execute() {
	ctx := context.Background()
	h, admin := exLegacy(ctx)
	defer h.Close()
	p := provision.New(admin, h.Raw)

	plan, err := p.Plan(ctx, "events", exSchema)
	if err != nil {
		panic(err)
	}
	plan.Write(os.Stdout) // shown to the operator, who approves it
	if err := p.Execute(ctx, plan, exSchema); err != nil {
		panic(err)
	}
	fmt.Println(admin.Verify(ctx, "events", exSchema))
	// Output:
	// table "events":
	//   family "clicks" (default-expiry(D=48h0m0s)): max_age=1d -> max_age=2d [raises]
	//   family "session" (one-second): none (never collected) -> max_age=1s [lowers]
	//     collectable at once, and invisible through bttl: 0 cell(s), 0 byte(s); exact: read all 0 row(s) of the family
	// caveat (replicated tables): lowering a max-versions or max-age rule can take up to a week to reach every cluster, and raising max age on a replicated table is limited to 90 days and can leave clusters out of sync; reads through bttl stay filtered throughout.
	// <nil>
}

// CheckAdoptions runs the one-second safety scan alone: cells with real
// timestamps would be deleted as soon as the family is on one-second
// expiry, so move them first.
func ExampleProvisioner_CheckAdoptions() {
	ctx := context.Background()
	h, admin := exLegacy(ctx)
	defer h.Close()
	exLegacyWrite(ctx, h, "user#1")

	p := provision.New(admin, h.Raw)
	plan, err := p.Plan(ctx, "events", exSchema)
	if err != nil {
		panic(err)
	}
	err = p.CheckAdoptions(ctx, plan)
	var rt *provision.AdoptionError
	if errors.As(err, &rt) && errors.Is(rt, provision.ErrRealTimestamps) {
		fmt.Printf("family %q: %d cell(s), first in row %q, column %q\n", rt.Family, rt.Cells, rt.Row, rt.Column)
	}
	// Output: family "session": 1 cell(s), first in row "user#1", column "token"
}

// Empty is what a drift check in CI looks at: a table that matches its
// schema has an empty plan.
func ExamplePlan_Empty() {
	ctx := context.Background()
	h, admin := exLegacy(ctx)
	defer h.Close()
	p := provision.New(admin, h.Raw)

	plan, err := p.Plan(ctx, "events", exSchema)
	if err != nil {
		panic(err)
	}
	fmt.Println("before Apply:", plan.Empty())
	if _, err := p.Apply(ctx, "events", exSchema); err != nil {
		panic(err)
	}
	plan, err = p.Plan(ctx, "events", exSchema)
	if err != nil {
		panic(err)
	}
	fmt.Println("after Apply: ", plan.Empty())
	// Output:
	// before Apply: false
	// after Apply:  true
}

// NeedsCaveat tells a plan that changes an existing rule, which on a
// replicated table deserves a second look, from one that only creates.
func ExamplePlan_NeedsCaveat() {
	ctx := context.Background()
	h, admin := exLegacy(ctx)
	defer h.Close()
	p := provision.New(admin, h.Raw)

	create, err := p.Plan(ctx, "new-events", exSchema) // no such table yet
	if err != nil {
		panic(err)
	}
	change, err := p.Plan(ctx, "events", exSchema)
	if err != nil {
		panic(err)
	}
	fmt.Println("new table:     ", create.NeedsCaveat())
	fmt.Println("existing table:", change.NeedsCaveat())
	// Output:
	// new table:      false
	// existing table: true
}

// Write prints a plan as Apply does, for a dry run.
func ExamplePlan_Write() {
	ctx := context.Background()
	h, admin := exLegacy(ctx)
	defer h.Close()

	plan, err := provision.New(admin, h.Raw).Plan(ctx, "new-events", exSchema)
	if err != nil {
		panic(err)
	}
	plan.Write(os.Stdout)
	// Output:
	// table "new-events":
	//   create table "new-events"
	//   create family "clicks" with max_age=2d (default-expiry(D=48h0m0s))
	//   create family "doc" with max_versions=5 (sequence(N=5))
	//   create family "session" with max_age=1s (one-second)
}

// WithForce adopts one-second expiry over real timestamps anyway: those
// cells are deleted. Without it, Apply refuses before changing anything.
func ExampleWithForce() {
	ctx := context.Background()
	h, admin := exLegacy(ctx)
	defer h.Close()
	exLegacyWrite(ctx, h, "user#1") // a session nobody needs to keep

	_, err := provision.New(admin, h.Raw).Apply(ctx, "events", exSchema)
	fmt.Println("refused:", errors.Is(err, provision.ErrRealTimestamps))

	_, err = provision.New(admin, h.Raw, provision.WithForce()).Apply(ctx, "events", exSchema)
	fmt.Println("forced: ", err)
	fmt.Println(admin.Verify(ctx, "events", exSchema))
	// Output:
	// refused: true
	// forced:  <nil>
	// <nil>
}

// WithClock sets the time the safety scan compares timestamps with; a
// test gives it the harness's manual clock.
func ExampleWithClock() {
	ctx := context.Background()
	h, admin := exLegacy(ctx)
	defer h.Close()
	// A cell stamped with its expiry instant, an hour from now, as bttl
	// writes one-second families.
	m := bigtable.NewMutation()
	m.Set("session", "token", bigtable.Time(h.Clock.Now().Add(time.Hour)), []byte("abc"))
	if err := h.Raw.Open("events").Apply(ctx, "user#1", m); err != nil {
		panic(err)
	}

	p := provision.New(admin, h.Raw, provision.WithClock(h.Clock))
	plan, err := p.Plan(ctx, "events", exSchema)
	if err != nil {
		panic(err)
	}
	fmt.Println(p.CheckAdoptions(ctx, plan))
	h.Clock.Advance(2 * time.Hour) // now the timestamp is in the past
	fmt.Println(errors.Is(p.CheckAdoptions(ctx, plan), provision.ErrRealTimestamps))
	// Output:
	// <nil>
	// true
}

// WithSampleRows sizes the sampled safety scan of WithSampledSafetyScan
// only: without that option the safety scan that decides refusal reads
// every row, so the change is refused.
func ExampleWithSampleRows() {
	ctx := context.Background()
	h, admin := exLegacy(ctx)
	defer h.Close()
	exLegacyWrite(ctx, h, "user#1")

	p := provision.New(admin, h.Raw, provision.WithSampleRows(1000))
	_, err := p.Apply(ctx, "events", exSchema)
	fmt.Println(errors.Is(err, provision.ErrRealTimestamps))
	// Output: true
}

// WithSampledSafetyScan makes the safety scan read only a sample of
// WithSampleRows rows: unsafe, since cells outside the sample are not
// checked. A refusal from a sampled scan says so.
func ExampleWithSampledSafetyScan() {
	ctx := context.Background()
	h, admin := exLegacy(ctx)
	defer h.Close()
	exLegacyWrite(ctx, h, "user#1")

	p := provision.New(admin, h.Raw, provision.WithSampleRows(1000), provision.WithSampledSafetyScan())
	_, err := p.Apply(ctx, "events", exSchema)
	var rt *provision.AdoptionError
	fmt.Println(errors.As(err, &rt), rt.Sampled)
	// Output: true true
}

// WithOutput shows what Apply changes, with the replication caveat when
// it lowers or raises a rule.
func ExampleWithOutput() {
	ctx := context.Background()
	h, admin := exLegacy(ctx)
	defer h.Close()

	p := provision.New(admin, h.Raw, provision.WithOutput(os.Stdout))
	if _, err := p.Apply(ctx, "events", strategy.Schema{"doc": strategy.Sequence(3)}); err != nil {
		panic(err)
	}
	// Output:
	// table "events":
	//   family "doc" (sequence(N=3)): max_versions=5 -> max_versions=3 [lowers]
	//     collectable at once, and invisible through bttl: 0 cell(s), 0 byte(s); exact: read all 0 row(s) of the family
	// caveat (replicated tables): lowering a max-versions or max-age rule can take up to a week to reach every cluster, and raising max age on a replicated table is limited to 90 days and can leave clusters out of sync; reads through bttl stay filtered throughout.
}

// Plan reads every row of a family whose rule a change lowers, so its
// count of cells made collectable is exact; WithWorkers reads that many
// key ranges at once.
func ExampleWithWorkers() {
	ctx := context.Background()
	h, admin := exLegacy(ctx)
	defer h.Close()
	// Two versions of a document; Sequence(1) keeps only the newer.
	m := bigtable.NewMutation()
	m.Set("doc", "body", 1000, []byte("v1"))
	m.Set("doc", "body", 2000, []byte("v2"))
	if err := h.Raw.Open("events").Apply(ctx, "doc#1", m); err != nil {
		panic(err)
	}

	p := provision.New(admin, h.Raw, provision.WithWorkers(4))
	plan, err := p.Plan(ctx, "events", strategy.Schema{"doc": strategy.Sequence(1)})
	if err != nil {
		panic(err)
	}
	plan.Write(os.Stdout)
	// Output:
	// table "events":
	//   family "doc" (sequence(N=1)): max_versions=5 -> max_versions=1 [lowers]
	//     collectable at once, and invisible through bttl: 1 cell(s), 2 byte(s) (first: row "doc#1", column "body", timestamp 1000 (seq 1)); exact: read all 1 row(s) of the family
	// caveat (replicated tables): lowering a max-versions or max-age rule can take up to a week to reach every cluster, and raising max age on a replicated table is limited to 90 days and can leave clusters out of sync; reads through bttl stay filtered throughout.
}

// An age rule on a family that holds sequence numbers would delete every
// cell at the next compaction: CheckAdoptions (and Apply, unless forced)
// refuses it with an *AdoptionError wrapping ErrAgeOverSequence, which
// names the rules and the first cell.
func ExampleAdoptionError() {
	ctx := context.Background()
	h, admin := exLegacy(ctx)
	defer h.Close()
	m := bigtable.NewMutation()
	m.Set("doc", "body", 3000, []byte("version 3"))
	if err := h.Raw.Open("events").Apply(ctx, "doc#1", m); err != nil {
		panic(err)
	}

	p := provision.New(admin, h.Raw)
	_, err := p.Apply(ctx, "events", strategy.Schema{"doc": strategy.DefaultExpiry(48 * time.Hour)})
	var sc *provision.AdoptionError
	if errors.As(err, &sc) && errors.Is(sc, provision.ErrAgeOverSequence) {
		fmt.Printf("refused: family %q (%s -> %s), %d cell(s), first timestamp %d\n", sc.Family, sc.From, sc.To, sc.Cells, sc.Timestamp)
	}
	fmt.Println("rule unchanged:", admin.Verify(ctx, "events", strategy.Schema{"doc": strategy.Sequence(5)}))
	// Output:
	// refused: family "doc" (max_versions=5 -> max_age=2d), 1 cell(s), first timestamp 3000
	// rule unchanged: <nil>
}

// Real timestamps (as cbt and server timestamps write) in a family about
// to become a sequence family would outrank every sequence number and hide
// new writes: refused with an *AdoptionError wrapping ErrNotSequenceNumbers,
// which counts the real times.
func ExampleAdoptionError_notSequenceNumbers() {
	ctx := context.Background()
	h, admin := exLegacy(ctx)
	defer h.Close()
	if err := h.Admin.CreateColumnFamily(ctx, "events", "notes"); err != nil {
		panic(err)
	}
	m := bigtable.NewMutation()
	m.Set("notes", "body", bigtable.ServerTime, []byte("legacy"))
	if err := h.Raw.Open("events").Apply(ctx, "doc#1", m); err != nil {
		panic(err)
	}

	_, err := provision.New(admin, h.Raw).Apply(ctx, "events", strategy.Schema{"notes": strategy.Sequence(3)})
	var ns *provision.AdoptionError
	if errors.As(err, &ns) && errors.Is(ns, provision.ErrNotSequenceNumbers) {
		fmt.Printf("refused: family %q, %d cell(s), %d real time(s)\n", ns.Family, ns.Cells, ns.RealTimes)
	}
	fmt.Println(errors.Is(err, provision.ErrUnsafeAdoption))
	// Output:
	// refused: family "notes", 1 cell(s), 1 real time(s)
	// true
}

// exRealTimeDoc writes a "doc" cell with the server's (real) time, as cbt
// writes it, into exLegacy's Sequence(5) family: its rule matches the
// schema, but the cell outranks every sequence number.
func exRealTimeDoc(ctx context.Context, h *bttestharness.Harness) {
	m := bigtable.NewMutation()
	m.Set("doc", "body", bigtable.ServerTime, []byte("written by cbt"))
	if err := h.Raw.Open("events").Apply(ctx, "doc#1", m); err != nil {
		panic(err)
	}
}

// WithAssumeAdopted skips the scan of families whose rule matches, for
// data checked before; the plan names them.
func ExampleWithAssumeAdopted() {
	ctx := context.Background()
	h, admin := exLegacy(ctx)
	defer h.Close()
	exRealTimeDoc(ctx, h)

	p := provision.New(admin, h.Raw, provision.WithAssumeAdopted(), provision.WithOutput(os.Stdout))
	plan, err := p.Apply(ctx, "events", strategy.Schema{"doc": strategy.Sequence(5)})
	fmt.Println(err, plan.Assumed)
	// Output:
	// table "events": no change (every family matches the schema)
	//   stored data of family(ies) "doc" not checked against the declared strategy (assumed adopted)
	// <nil> [doc]
}

// PlanAndCheck plans and runs the safety scans reading each lowered family
// once: the refusal comes with the plan, whose count is exact.
func ExampleProvisioner_PlanAndCheck() {
	ctx := context.Background()
	h, admin := exLegacy(ctx)
	defer h.Close()
	exLegacyWrite(ctx, h, "user#1")

	p := provision.New(admin, h.Raw)
	plan, err := p.PlanAndCheck(ctx, "events", exSchema)
	fmt.Println(errors.Is(err, provision.ErrRealTimestamps))
	for _, c := range plan.Changes {
		if c.Impact != nil {
			fmt.Println(c.Family, c.Impact.Collectable)
		}
	}
	// Output:
	// true
	// session 1
}

// After a migration to one-second expiry, a moved cell whose expiry has
// passed looks like a real timestamp by its timestamp alone. The instant
// the last legacy writer stopped (migrate's -written-before) tells them
// apart: such cells are reported, and the rule is applied without force.
func ExampleWithWrittenBefore() {
	ctx := context.Background()
	h, admin := exLegacy(ctx)
	defer h.Close()
	now := h.Clock.Now()
	lastLegacyWrite := now.Add(-time.Hour)
	m := bigtable.NewMutation()
	// A cell migrate moved, which expired a minute ago.
	m.Set("session", "token", bigtable.Time(now.Add(-time.Minute)).TruncateToMilliseconds(), []byte("abc"))
	if err := h.Raw.Open("events").Apply(ctx, "user#1", m); err != nil {
		panic(err)
	}

	p := provision.New(admin, h.Raw, provision.WithClock(h.Clock))
	_, err := p.PlanAndCheck(ctx, "events", exSchema)
	fmt.Println("without it, refused:", errors.Is(err, provision.ErrRealTimestamps))

	p = provision.New(admin, h.Raw, provision.WithClock(h.Clock), provision.WithWrittenBefore(lastLegacyWrite, 5*time.Second))
	plan, err := p.PlanAndCheck(ctx, "events", exSchema)
	fmt.Println("with it:", err, len(plan.Notes), "note")
	fmt.Println(p.Execute(ctx, plan, exSchema))
	// Output:
	// without it, refused: true
	// with it: <nil> 1 note
	// <nil>
}

// A scan bounded by what it receives rather than by its length: each key
// range read fails when nothing arrives for a minute, however long the
// table takes to read; each admin call is limited to 30 seconds. The
// caller's context then needs no deadline that must outlast the scan.
func ExampleWithStall() {
	ctx := context.Background()
	h, admin := exLegacy(ctx)
	defer h.Close()
	exLegacyWrite(ctx, h, "user#1")

	p := provision.New(admin, h.Raw, provision.WithStall(time.Minute), provision.WithCallTimeout(30*time.Second))
	_, err := p.Apply(ctx, "events", exSchema)
	fmt.Println(errors.Is(err, provision.ErrRealTimestamps))
	// Output: true
}

// Each call that is not a full scan (the admin calls, a sampled scan's
// reads) limited to 30 seconds.
func ExampleWithCallTimeout() {
	ctx := context.Background()
	h, admin := exLegacy(ctx)
	defer h.Close()

	p := provision.New(admin, h.Raw, provision.WithCallTimeout(30*time.Second))
	plan, err := p.Plan(ctx, "events", exSchema)
	if err != nil {
		panic(err)
	}
	fmt.Println(plan.Table)
	// Output: events
}

// countingPacer lets every cell through and counts them.
type countingPacer struct{ cells int }

func (p *countingPacer) WaitN(_ context.Context, n int) error {
	p.cells += n // one worker: no concurrent calls
	return nil
}

// The scan that counts what a lowering change makes collectable goes
// through the pacer, cell by cell (bttl plan and apply give one that slows
// down when the server answers RESOURCE_EXHAUSTED).
func ExampleWithPacer() {
	ctx := context.Background()
	h, admin := exLegacy(ctx)
	defer h.Close()
	m := bigtable.NewMutation()
	m.Set("doc", "body", 1000, []byte("v1"))
	m.Set("doc", "body", 2000, []byte("v2"))
	if err := h.Raw.Open("events").Apply(ctx, "doc#1", m); err != nil {
		panic(err)
	}
	pacer := &countingPacer{}
	p := provision.New(admin, h.Raw, provision.WithPacer(pacer))
	if _, err := p.Plan(ctx, "events", strategy.Schema{"doc": strategy.Sequence(1)}); err != nil {
		panic(err)
	}
	fmt.Println("cells paced:", pacer.cells)
	// Output: cells paced: 2
}

// A refusal joins one *AdoptionError per finding: here one-second expiry
// over a real timestamp in "session" (first) and a real time in the
// sequence family "doc". errors.As gives the first; FindAdoptionError
// gives the one of the kind asked.
func ExampleFindAdoptionError() {
	ctx := context.Background()
	h, admin := exLegacy(ctx)
	defer h.Close()
	exLegacyWrite(ctx, h, "user#1")
	exRealTimeDoc(ctx, h)

	_, err := provision.New(admin, h.Raw).Apply(ctx, "events", exSchema)
	var first *provision.AdoptionError
	if errors.As(err, &first) {
		fmt.Println("first:", first.Family, errors.Is(first, provision.ErrNotSequenceNumbers))
	}
	if ns := provision.FindAdoptionError(err, provision.ErrNotSequenceNumbers); ns != nil {
		fmt.Printf("not sequence numbers: family %q, %d cell(s), %d real time(s)\n", ns.Family, ns.Cells, ns.RealTimes)
	}
	// Output:
	// first: session false
	// not sequence numbers: family "doc", 1 cell(s), 1 real time(s)
}
