package audit_test

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/audit"
	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/strategy"
)

// rulesReport audits a table with two one-second families, "on" on its
// one-second rule and "off" with no rule, each holding one cell stamped an
// hour before the audit, and notes the table's GC rules on the report.
func rulesReport() *audit.Report {
	ctx := context.Background()
	h, err := bttestharness.StartWithConfig(ctx, bttestharness.Config{NoGC: true})
	if err != nil {
		panic(err)
	}
	defer h.Close()
	if err := h.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "s", ColumnFamilies: map[string]bigtable.Family{
		"on": {GCPolicy: bigtable.MaxAgePolicy(time.Second)}, "off": {},
	}}); err != nil {
		panic(err)
	}
	now := h.Clock.Now()
	m := bigtable.NewMutation()
	m.Set("on", "c", bigtable.Time(now.Add(-time.Hour)), []byte("v"))
	m.Set("off", "c", bigtable.Time(now.Add(-time.Hour)), []byte("v"))
	if err := h.Raw.Open("s").Apply(ctx, "r", m); err != nil {
		panic(err)
	}
	schema := strategy.Schema{"on": strategy.OneSecond(), "off": strategy.OneSecond()}
	rep, err := audit.Scan(ctx, h.Raw.Open("s"), "s", schema, bigtable.Time(now))
	if err != nil {
		panic(err)
	}
	fams, err := gcrule.NewAdmin(h.Admin, bttestharness.Project, bttestharness.Instance).Families(ctx, "s")
	if err != nil {
		panic(err)
	}
	rep.NoteGCRules(fams)
	return rep
}

// The table's GC rules say what the figures mean: cells the strategy
// reads as expired are expired stock only in a family on its rule; in one
// not on it (here, with no rule at all) GC follows another rule, and they
// are not on their rule yet.
func ExampleReport_NoteGCRules() {
	for _, f := range rulesReport().Families {
		fmt.Printf("%s: rule %s, matches %v, %d expired, %d not on rule\n", f.Family, f.GCRule, f.RuleMatches, f.Expired, f.NotOnRule)
	}
	// Output:
	// off: rule none, matches false, 0 expired, 1 not on rule
	// on: rule max_age=1s, matches true, 1 expired, 0 not on rule
}

// A family whose GC rule is not the one its strategy needs: before or
// during a migration, or with its rule changed or lost.
func ExampleFamily_NotOnItsRule() {
	for _, f := range rulesReport().Families {
		fmt.Printf("%s: not on its rule %v\n", f.Family, f.NotOnItsRule())
	}
	// Output:
	// off: not on its rule true
	// on: not on its rule false
}

// On its one-second rule, a family's cells at or before now are expired
// ones, not real timestamps an adoption would delete.
func ExampleFamily_Adopted() {
	for _, f := range rulesReport().Families {
		fmt.Printf("%s: adopted %v, at or before now %d\n", f.Family, f.Adopted(), f.AtOrBeforeNow)
	}
	// Output:
	// off: adopted false, at or before now 1
	// on: adopted true, at or before now 1
}

// A managed family with no GC rule keeps its expired cells for ever.
func ExampleFamily_NeverCollected() {
	for _, f := range rulesReport().Families {
		fmt.Printf("%s: never collected %v\n", f.Family, f.NeverCollected())
	}
	// Output:
	// off: never collected true
	// on: never collected false
}
