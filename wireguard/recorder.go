package wireguard

import "errors"

// Recorder counts the guard's refusals. package metrics's Recorder is one:
// it counts them into bttl_refusals_total, the series ttlclient's
// refusals go to. Declared here, so that the guard does not depend on
// package metrics.
type Recorder interface {
	// GuardRefused: the guard refused a request. table is a guarded table
	// or declared materialized view, or "" when the request named none
	// (SQL, session streams, a request the guard could not classify);
	// family is a family of its schema, or "" (a family outside the
	// schema, or a refusal of the whole request); reason is the
	// refusal's metric reason in bttl's refusal registry, the one
	// ttlclient's refusals count under (e.g. already_expired). Never row keys or
	// columns, so labels stay bounded. Called on the caller's path: it
	// must be fast and must not block.
	GuardRefused(table, family, reason string)
}

// WithRecorder counts every refusal on r (default: none).
func WithRecorder(r Recorder) Option { return func(g *options) { g.rec = r } }

// refused counts err on the Recorder when it is a refusal of the guard,
// with the labels the refusal carries (never parsed back out of its
// message), and returns it as the plain status the caller gets.
func (g *Guard) refused(err error) error {
	var r *guardRefusal
	if !errors.As(err, &r) {
		return err
	}
	if g.rec != nil {
		g.rec.GuardRefused(r.table, r.family, r.reason.Metric)
	}
	return r.st.Err()
}
