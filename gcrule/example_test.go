package gcrule_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/bigtable"
	adminpb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	"google.golang.org/protobuf/types/known/durationpb"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/strategy"
)

// A max age of 1.5s is not the 1s a one-second family needs, although
// bigtable.FamilyInfo.FullGCPolicy would show it as 1s.
func ExampleCheck() {
	actual := &adminpb.ColumnFamily{GcRule: &adminpb.GcRule{Rule: &adminpb.GcRule_MaxAge{MaxAge: durationpb.New(1500 * time.Millisecond)}}}
	err := gcrule.Check("events", "session", strategy.OneSecond(), actual)
	fmt.Println(err.Kind)
	fmt.Println(err.Expected, "vs", err.Actual)
	fmt.Println(gcrule.Check("events", "session", strategy.DefaultExpiry(1500*time.Millisecond), actual) == nil)
	// Output:
	// wrong max age
	// max_age=1s vs max_age=1s500ms
	// true
}

// Rule protos for the examples below, as GetTable returns them.
func maxAge(d time.Duration) *adminpb.GcRule {
	return &adminpb.GcRule{Rule: &adminpb.GcRule_MaxAge{MaxAge: durationpb.New(d)}}
}

func maxVersions(n int32) *adminpb.GcRule {
	return &adminpb.GcRule{Rule: &adminpb.GcRule_MaxNumVersions{MaxNumVersions: n}}
}

func union(rs ...*adminpb.GcRule) *adminpb.GcRule {
	return &adminpb.GcRule{Rule: &adminpb.GcRule_Union_{Union: &adminpb.GcRule_Union{Rules: rs}}}
}

// Compare checks a whole schema at once; every mismatching family is
// reported, sorted by family, and errors.As finds each one.
func ExampleCompare() {
	schema := strategy.Schema{
		"clicks":  strategy.DefaultExpiry(48 * time.Hour),
		"doc":     strategy.Sequence(3),
		"session": strategy.OneSecond(),
	}
	families := map[string]*adminpb.ColumnFamily{ // as Admin.Families returns them
		"clicks": {GcRule: maxAge(48 * time.Hour)},
		"doc":    {GcRule: union(maxVersions(3), maxAge(time.Hour))},
	}
	err := gcrule.Compare("events", schema, families)
	fmt.Println(errors.Is(err, gcrule.ErrMismatch))
	var ms gcrule.Mismatches
	if errors.As(err, &ms) {
		for _, m := range ms {
			fmt.Printf("%s: %s (expected %s, actual %s)\n", m.Family, m.Kind, m.Expected, m.Actual)
		}
	}
	// Output:
	// true
	// doc: age rule on a sequence family (expected max_versions=3, actual union(max_versions=3, max_age=1h))
	// session: missing family (expected max_age=1s, actual missing family)
}

// Describe shows a rule exactly as the server stores it, nesting and
// sub-second ages included.
func ExampleDescribe() {
	fmt.Println(gcrule.Describe(union(maxAge(1500*time.Millisecond), union(maxVersions(2)))))
	fmt.Println(gcrule.Describe(nil))
	// Output:
	// union(max_age=1s500ms, union(max_versions=2))
	// none (never collected)
}

// Expected is the rule proto to set on a family; nil means any rule will do.
func ExampleExpected() {
	r := gcrule.Expected(strategy.DefaultExpiry(48*time.Hour, strategy.WithMaxVersions(2)))
	fmt.Println(r.GetUnion().GetRules()[0].GetMaxAge().AsDuration(), r.GetUnion().GetRules()[1].GetMaxNumVersions())
	fmt.Println(gcrule.Expected(strategy.Unmanaged()) == nil)
	// Output:
	// 48h0m0s 2
	// true
}

// ExpectedString is what a report or an error message shows as the rule
// each policy needs.
func ExampleExpectedString() {
	for _, p := range []strategy.Policy{
		strategy.OneSecond(),
		strategy.DefaultExpiry(48*time.Hour, strategy.WithMaxVersions(2)),
		strategy.Sequence(5),
		strategy.Unmanaged(),
	} {
		fmt.Printf("%s: %s\n", p, gcrule.ExpectedString(p))
	}
	// Output:
	// one-second: max_age=1s
	// default-expiry(D=48h0m0s)+maxversions(2): union(max_age=2d, max_versions=2)
	// sequence(N=5): max_versions=5
	// unmanaged: any (unmanaged)
}

// Normalize reduces a rule to what it collects: a union collects a cell
// when any member would, so the smallest age and the fewest versions win,
// however the rules are nested.
func ExampleNormalize() {
	n := gcrule.Normalize(union(maxAge(48*time.Hour), union(maxVersions(5), maxAge(time.Hour)), maxVersions(3)))
	fmt.Println(n.HasAge, n.Age, n.HasVersions, n.Versions)
	// Output: true 1h0m0s true 3
}

// NewAdmin needs the project and instance the admin client was opened on:
// the client does not reveal them.
func ExampleNewAdmin() {
	ctx := context.Background()
	h, err := bttestharness.Start(ctx) // the in-process emulator
	if err != nil {
		panic(err)
	}
	defer h.Close()
	schema := strategy.Schema{"session": strategy.OneSecond()}
	if err := h.CreateTable(ctx, "events", schema); err != nil {
		panic(err)
	}

	admin := gcrule.NewAdmin(h.Admin, bttestharness.Project, bttestharness.Instance)
	fmt.Println(admin.Verify(ctx, "events", schema))
	// Output: <nil>
}

// Client gives back the admin client, for the calls gcrule does not make:
// here, fixing the rule Verify found wrong.
func ExampleAdmin_Client() {
	ctx := context.Background()
	h, err := bttestharness.Start(ctx)
	if err != nil {
		panic(err)
	}
	defer h.Close()
	admin := gcrule.NewAdmin(h.Admin, bttestharness.Project, bttestharness.Instance)
	if err := h.CreateTable(ctx, "events", strategy.Schema{"clicks": strategy.DefaultExpiry(24 * time.Hour)}); err != nil {
		panic(err)
	}

	schema := strategy.Schema{"clicks": strategy.DefaultExpiry(48 * time.Hour)}
	fmt.Println(admin.Verify(ctx, "events", schema) != nil)
	if err := admin.Client().SetGCPolicy(ctx, "events", "clicks", schema["clicks"].GCPolicy()); err != nil {
		panic(err)
	}
	fmt.Println(admin.Verify(ctx, "events", schema))
	// Output:
	// true
	// <nil>
}

// Families returns the rules exactly: a 1.5s max age stays 1.5s, where
// bigtable.AdminClient.TableInfo rounds it down to 1s.
func ExampleAdmin_Families() {
	ctx := context.Background()
	h, err := bttestharness.Start(ctx)
	if err != nil {
		panic(err)
	}
	defer h.Close()
	if err := h.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "events", ColumnFamilies: map[string]bigtable.Family{
		"session": {GCPolicy: bigtable.MaxAgePolicy(1500 * time.Millisecond)},
	}}); err != nil {
		panic(err)
	}

	admin := gcrule.NewAdmin(h.Admin, bttestharness.Project, bttestharness.Instance)
	fams, err := admin.Families(ctx, "events")
	if err != nil {
		panic(err)
	}
	fmt.Println("Families: ", gcrule.Describe(fams["session"].GetGcRule()))
	info, err := h.Admin.TableInfo(ctx, "events")
	if err != nil {
		panic(err)
	}
	fmt.Println("TableInfo:", time.Duration(info.FamilyInfos[0].FullGCPolicy.(bigtable.MaxAgeGCPolicy)))
	// Output:
	// Families:  max_age=1s500ms
	// TableInfo: 1s
}

// TableName is the full resource name the raw admin API calls take.
func ExampleAdmin_TableName() {
	ctx := context.Background()
	h, err := bttestharness.Start(ctx)
	if err != nil {
		panic(err)
	}
	defer h.Close()
	admin := gcrule.NewAdmin(h.Admin, "my-project", "my-instance")
	fmt.Println(admin.TableName("events"))
	// Output: projects/my-project/instances/my-instance/tables/events
}

// Verify is the check to run at startup or in CI: it fails on any family
// whose rule would collect differently from what its policy needs.
func ExampleAdmin_Verify() {
	ctx := context.Background()
	h, err := bttestharness.Start(ctx)
	if err != nil {
		panic(err)
	}
	defer h.Close()
	// The table as an older deployment left it.
	if err := h.CreateTable(ctx, "events", strategy.Schema{
		"clicks": strategy.DefaultExpiry(24 * time.Hour),
		"doc":    strategy.Sequence(5),
	}); err != nil {
		panic(err)
	}

	admin := gcrule.NewAdmin(h.Admin, bttestharness.Project, bttestharness.Instance)
	err = admin.Verify(ctx, "events", strategy.Schema{
		"clicks": strategy.DefaultExpiry(48 * time.Hour),
		"doc":    strategy.Sequence(5),
	})
	var ms gcrule.Mismatches
	if errors.As(err, &ms) {
		for _, m := range ms {
			fmt.Println(m)
		}
	}
	// Output:
	// bttl: GC rule does not match the schema: table "events", family "clicks" (default-expiry(D=48h0m0s)): wrong max age: expected max_age=2d, actual max_age=1d
}
