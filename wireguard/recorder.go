package wireguard

import (
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"
)

// Recorder counts the guard's refusals. package metrics's Recorder is one:
// it counts them into bttl_refusals_total, the series ttlclient's
// refusals go to. Declared here, so that the guard does not depend on
// package metrics.
type Recorder interface {
	// GuardRefused: the guard refused a request. table is a guarded table
	// or declared materialized view, or "" when the request named none
	// (SQL, session streams, a request the guard could not classify);
	// family is a family of its schema, or "" (a family outside the
	// schema, or a refusal of the whole request); reason is the rule
	// (Rule*) in snake_case, e.g. expired_on_arrival. Never row keys or
	// columns, so labels stay bounded. Called on the caller's path: it
	// must be fast and must not block.
	GuardRefused(table, family, reason string)
}

// WithRecorder counts every refusal on r (default: none).
func WithRecorder(r Recorder) Option { return func(g *options) { g.rec = r } }

// refused counts err on the Recorder when it is a refusal of the guard
// (a status carrying the violated rule), and returns it.
func (g *Guard) refused(err error) error {
	if g.rec == nil || err == nil {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	for _, d := range st.Details() {
		pf, ok := d.(*errdetails.PreconditionFailure)
		if !ok || len(pf.GetViolations()) == 0 {
			continue
		}
		v := pf.GetViolations()[0]
		table, family := g.labels(v.GetSubject())
		g.rec.GuardRefused(table, family, strings.ReplaceAll(v.GetType(), "-", "_"))
		return err
	}
	return err
}

// labels reads table and family from a violation's subject
// ("TABLE/FAMILY:COLUMN" for a refused cell, COLUMN quoted or redacted as
// docs/design.md#keys-in-messages says, the table alone for a schema
// mismatch), keeping only a guarded table and a family of its schema.
func (g *Guard) labels(subject string) (table, family string) {
	id, rest, cell := strings.Cut(subject, "/")
	fam, _, _ := strings.Cut(rest, ":")
	if cell && (!strings.Contains(rest, ":") || strings.Contains(fam, "/")) {
		// Not TABLE/FAMILY:COLUMN (family names hold no "/"): a resource
		// name such as an undeclared view's, which names no guarded table.
		return "", ""
	}
	t := g.tables[id]
	if t == nil {
		t = g.views[id]
	}
	if t == nil {
		return "", ""
	}
	if _, ok := t.schema[fam]; !ok {
		fam = ""
	}
	return t.id, fam
}
