package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/provision"
)

var verifyCommand = command{
	name: "verify", needsSchema: true,
	help: `Compares each table's column families and GC rules with the schema file.
A missing table or family, or a rule other than the strategy needs, is a
mismatch (exit 1); every table is checked. Makes one GetTable call per table.
`,
	setup: func(fs *flag.FlagSet) invocation {
		only := tableFlag(fs)
		return invocation{run: func(e *env) int { return verify(e, *only) }}
	},
}

var planCommand = command{
	name: "plan", needsSchema: true,
	help: `Shows the family and GC-rule changes apply would make, how many stored cells
a lowering change makes collectable (a sample; -exact reads every row), and
the changes apply would refuse without -force. Changes nothing.
`,
	setup: func(fs *flag.FlagSet) invocation {
		only := tableFlag(fs)
		exact := fs.Bool("exact", false, "count what a lowering change makes collectable over every row, not a sample")
		return invocation{run: func(e *env) int { return plan(e, *only, *exact) }}
	},
}

var applyCommand = command{
	name: "apply", needsSchema: true,
	help: `Creates missing tables and families and sets the GC rules the schema's
strategies need, after showing the plan and asking for confirmation (-yes:
don't ask). Refuses (exit 1, nothing changed) a rule change that would
delete or hide stored cells unless -force.
`,
	setup: func(fs *flag.FlagSet) invocation {
		only := tableFlag(fs)
		yes := fs.Bool("yes", false, "do not ask for confirmation")
		force := fs.Bool("force", false, "make changes that delete or hide stored cells (real timestamps under one-second expiry, sequence numbers under an age rule, real timestamps under sequence)")
		sample := int64(10_000)
		fs.Var(countFlag{&sample, 1}, "sample-rows", "`rows` the adoption safety scan reads per family (default 10000)")
		return invocation{run: func(e *env) int { return apply(e, *only, *yes, *force, int(sample)) }}
	},
}

func verify(e *env, only string) int {
	tables, err := e.tables(only)
	if err != nil {
		return e.fail(err)
	}
	code := exitOK
	for _, t := range tables {
		ctx, cancel := e.step()
		err := e.admin.Verify(ctx, t, e.schemas[t])
		cancel()
		var ms gcrule.Mismatches
		switch {
		case errors.As(err, &ms):
			code = worst(code, exitFindings)
			fmt.Fprintf(e.stdout, "table %q: MISMATCH\n", t)
			for _, m := range ms {
				fmt.Fprintf(e.stdout, "  family %q (%s): %s: expected %s, actual %s\n", m.Family, m.Policy, m.Kind, m.Expected, m.Actual)
			}
		case status.Code(err) == codes.NotFound && !e.interrupted():
			code = worst(code, exitFindings)
			fmt.Fprintf(e.stdout, "table %q: MISMATCH\n  missing table (bttl apply creates it)\n", t)
		case err != nil:
			code = worst(code, e.fail(fmt.Errorf("table %q: %w", t, err)))
			if e.ctx.Err() != nil {
				return code
			}
		default:
			fmt.Fprintf(e.stdout, "table %q: ok\n", t)
		}
	}
	return code
}

func (e *env) provisioner(opts ...provision.Option) *provision.Provisioner {
	return provision.New(e.admin, e.data, append([]provision.Option{provision.WithOutput(e.stdout)}, opts...)...)
}

// plans computes every table's plan and prints it, with the one-second
// adoptions apply would refuse (refusal) unless forced.
func (e *env) plans(p *provision.Provisioner, tables []string) (plans []*provision.Plan, refusal, err error) {
	for _, t := range tables {
		ctx, cancel := e.step()
		pl, err := p.Plan(ctx, t, e.schemas[t])
		if err == nil {
			pl.Write(e.stdout)
			err = p.CheckAdoptions(ctx, pl)
		}
		cancel()
		if err != nil {
			if !errors.Is(err, provision.ErrUnsafeAdoption) {
				return nil, nil, err
			}
			fmt.Fprintf(e.stdout, "  ! %v\n", err)
			refusal = errors.Join(refusal, err)
		}
		plans = append(plans, pl)
	}
	return plans, refusal, nil
}

func plan(e *env, only string, exact bool) int {
	tables, err := e.tables(only)
	if err != nil {
		return e.fail(err)
	}
	var opts []provision.Option
	if exact {
		opts = append(opts, provision.WithExactCounts())
	}
	_, refusal, err := e.plans(e.provisioner(opts...), tables)
	if err != nil {
		return e.fail(err)
	}
	if refusal != nil {
		fmt.Fprintln(e.stdout, "apply will refuse the change(s) marked ! above without -force")
	}
	return exitOK
}

func apply(e *env, only string, yes, force bool, sample int) int {
	tables, err := e.tables(only)
	if err != nil {
		return e.fail(err)
	}
	opts := []provision.Option{provision.WithSampleRows(sample)}
	if force {
		opts = append(opts, provision.WithForce())
	}
	p := e.provisioner(opts...)
	plans, refusal, err := e.plans(p, tables)
	if err != nil {
		return e.fail(err)
	}
	if refusal != nil && !force {
		fmt.Fprintln(e.stderr, "bttl apply: refused: a rule change would delete or hide stored cells (marked ! above); nothing changed (use -force to go ahead)")
		return exitFindings
	}
	pending := 0
	for _, pl := range plans {
		if !pl.Empty() {
			pending++
		}
	}
	if pending == 0 {
		return exitOK
	}
	if !yes {
		fmt.Fprintf(e.stdout, "Apply these changes to %d table(s)? [y/N]: ", pending)
		line, _ := bufio.NewReader(e.stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			fmt.Fprintln(e.stdout, "aborted: nothing changed")
			return exitFindings
		}
	}
	fmt.Fprintln(e.stdout, "applying:")
	for _, pl := range plans {
		if pl.Empty() {
			continue
		}
		ctx, cancel := e.step()
		err := p.Execute(ctx, pl, e.schemas[pl.Table])
		cancel()
		if err != nil {
			if errors.Is(err, provision.ErrUnsafeAdoption) {
				fmt.Fprintln(e.stderr, err)
				return exitFindings
			}
			return e.fail(err)
		}
	}
	return exitOK
}
