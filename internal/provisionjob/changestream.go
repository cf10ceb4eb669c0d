package provisionjob

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/internal/bttlerr"
	"github.com/bttl/bttl/internal/streamconf"
	"github.com/bttl/bttl/internal/timefmt"
)

// PlanOption configures one Plan, PlanAndCheck or Apply call (Option
// configures the Provisioner). The interface is closed.
type PlanOption interface{ applyPlan(*planOptions) }

type planOptions struct {
	stream    bool
	retention time.Duration
}

type planOptionFunc func(*planOptions)

func (f planOptionFunc) applyPlan(o *planOptions) { f(o) }

// WithChangeStream makes the plan set the table's change stream
// (docs/design.md#change-stream-config): enabled with retention, between 1
// and 7 days (Bigtable's bounds, truncated to microseconds as Bigtable
// truncates it), or disabled when retention is 0, as
// bigtable.TableConf.ChangeStreamRetention takes it. Without it the plan
// leaves the stream as it is. A retention out of range is refused with
// ErrInvalidOption before any RPC. Disabling the stream or shortening its
// retention drops records Bigtable kept: refused (ErrChangeStreamLoss)
// unless WithForce.
func WithChangeStream(retention time.Duration) PlanOption {
	return planOptionFunc(func(o *planOptions) { o.stream, o.retention = true, retention })
}

func planConfig(opts []PlanOption) (planOptions, error) {
	var o planOptions
	for _, opt := range opts {
		opt.applyPlan(&o)
	}
	if o.stream && o.retention != 0 {
		if err := streamconf.Check(o.retention); err != nil {
			return o, fmt.Errorf("%w: WithChangeStream: %v (0 disables the stream)", ErrInvalidOption, err)
		}
		o.retention = o.retention.Truncate(time.Microsecond)
	}
	return o, nil
}

// StreamChange is a change of the table's change stream (Plan.Stream).
type StreamChange struct {
	// From and To are the retention before and after the change; 0 is a
	// disabled stream (or no table yet).
	From, To time.Duration
}

// loses reports a change that drops records Bigtable kept: disabling the
// stream, or shortening its retention.
func (c StreamChange) loses() bool { return c.From > 0 && c.To < c.From }

func (c StreamChange) String() string {
	s := fmt.Sprintf("change stream: %s -> %s", describeRetention(c.From), describeRetention(c.To))
	switch {
	case c.loses() && c.To == 0:
		s += " [drops the stream's records]"
	case c.loses():
		s += fmt.Sprintf(" [drops records older than %s]", timefmt.Duration(c.To))
	}
	return s
}

func describeRetention(d time.Duration) string {
	if d == 0 {
		return "off"
	}
	return "retention " + timefmt.Duration(d)
}

// ErrChangeStreamLoss: the plan disables a table's change stream or
// shortens its retention. Bigtable then drops the records it kept beyond
// the new retention (all of them when disabled), which a consumer that is
// behind, or restarts from an older token, can no longer read. It wraps
// ErrUnsafeAdoption: refused unless WithForce, like a rule change that
// deletes cells. See *AdoptionError.
var ErrChangeStreamLoss = fmt.Errorf("%w: the change stream would lose records", ErrUnsafeAdoption)

// planStream sets plan.Stream when o asks for a stream other than the
// table's.
func (p *Provisioner) planStream(ctx context.Context, plan *Plan, o planOptions) error {
	if !o.stream {
		return nil
	}
	var from time.Duration
	if !plan.CreateTable {
		cctx, cancel := p.call(ctx)
		ti, err := p.admin.Client().TableInfo(cctx, plan.Table)
		cancel()
		if err != nil {
			return bttlerr.Wrap(err, "read the change stream of table %q", plan.Table)
		}
		if d, ok := ti.ChangeStreamRetention.(time.Duration); ok {
			from = d
		}
	}
	if from != o.retention {
		plan.Stream = &StreamChange{From: from, To: o.retention}
	}
	return nil
}

// streamRefusal is the plan's refusal of a change stream change that
// loses records (nil if none), marked Forced when forced.
func (p *Provisioner) streamRefusal(plan *Plan) error {
	if plan.Stream == nil || !plan.Stream.loses() {
		return nil
	}
	change := *plan.Stream
	return &AdoptionError{Err: ErrChangeStreamLoss, Table: plan.Table, Stream: &change, Forced: p.force}
}

// executeStream makes the planned change of the table's change stream.
func (p *Provisioner) executeStream(ctx context.Context, ac *bigtable.AdminClient, plan *Plan) error {
	if plan.Stream == nil {
		return nil
	}
	cctx, cancel := p.call(ctx)
	defer cancel()
	var err error
	if plan.Stream.To == 0 {
		err = ac.UpdateTableDisableChangeStream(cctx, plan.Table)
	} else {
		err = ac.UpdateTableWithChangeStream(cctx, plan.Table, plan.Stream.To)
	}
	if err != nil {
		return bttlerr.Wrap(err, "table %q: %s", plan.Table, plan.Stream)
	}
	return nil
}
