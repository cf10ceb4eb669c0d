package provisionjob_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/bigtable"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/gcrule"
	provision "github.com/bttl/bttl/internal/provisionjob"
	"github.com/bttl/bttl/strategy"
)

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

// A rule does not say which strategy it was set for: "doc" keeps 5
// versions as Sequence(5) needs, yet holds a real timestamp. CheckUnchanged
// scans the families whose rule already matches (what bttl verify adds to
// the rule check).
func ExampleProvisioner_CheckUnchanged() {
	ctx := context.Background()
	h, admin := exLegacy(ctx)
	defer h.Close()
	exRealTimeDoc(ctx, h)

	p := provision.New(admin, h.Raw)
	plan, err := p.Plan(ctx, "events", strategy.Schema{"doc": strategy.Sequence(5)})
	if err != nil {
		panic(err)
	}
	fmt.Println("empty plan:", plan.Empty(), "unchanged:", plan.Unchanged[0].Family)
	err = p.CheckUnchanged(ctx, plan)
	var ns *provision.AdoptionError
	if errors.As(err, &ns) && errors.Is(ns, provision.ErrNotSequenceNumbers) {
		fmt.Printf("family %q: %d real time(s)\n", ns.Family, ns.RealTimes)
	}
	// Output:
	// empty plan: true unchanged: doc
	// family "doc": 1 real time(s)
}

// WithoutImpact plans without reading data: a lowering change has no
// count (bttl verify needs only the changes).
func ExampleWithoutImpact() {
	ctx := context.Background()
	h, admin := exLegacy(ctx)
	defer h.Close()

	p := provision.New(admin, h.Raw, provision.WithoutImpact())
	plan, err := p.Plan(ctx, "events", strategy.Schema{"doc": strategy.Sequence(3)})
	if err != nil {
		panic(err)
	}
	fmt.Println(plan.Changes[0].Lowers, plan.Changes[0].Impact == nil)
	// Output: true true
}
