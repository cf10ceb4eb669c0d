package ttlclient

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"

	"github.com/bttl/bttl/internal/bttlerr"
)

// bttl reads three values of cloud.google.com/go/bigtable that have no
// accessors, at layouts checked against the client version in the build
// (see docs/design.md#client-version). Each check has a name, used in the
// log line, the metric's label and CompatibilityFailure.Check.
const (
	// The layout of bigtable.Mutation and bigtable.ReadModifyWrite, then a
	// self-check building, reading back and sending every operation kind
	// (rawmutation.go).
	checkMutation = "mutation"
	// The layout of the bigtable.RowFilter read option (read.go).
	checkRowFilter = "row-filter"
	// The layout of the bigtable.LimitRows read option (read.go).
	checkLimitRows = "limit-rows"
)

// CompatibilityFailure is one failed client-version check.
type CompatibilityFailure struct {
	Check  string // "mutation", "row-filter" or "limit-rows"
	Err    error  // what differs
	Effect string // what fails or changes while it fails
}

// CompatibilityError is the result of CheckCompatibility when a check
// fails. It unwraps to each failure's Err: errors.Is(err,
// ErrMutationUnreadable) and errors.Is(err, ErrUnsupportedReadOption) tell
// which paths refuse.
type CompatibilityError struct {
	// Version is the cloud.google.com/go/bigtable version the binary was
	// built with, "" when the build does not say.
	Version string
	Failed  []CompatibilityFailure
}

func (e *CompatibilityError) Error() string {
	var b strings.Builder
	v := e.Version
	if v == "" {
		v = "(version unknown)"
	}
	fmt.Fprintf(&b, "bttl: cloud.google.com/go/bigtable %s fails %d compatibility check(s)", v, len(e.Failed))
	for _, f := range e.Failed {
		fmt.Fprintf(&b, "; %s: %s (%s)", f.Check, bttlerr.Trim(f.Err.Error()), f.Effect)
	}
	return b.String()
}

func (e *CompatibilityError) Unwrap() []error {
	errs := make([]error, len(e.Failed))
	for i, f := range e.Failed {
		errs[i] = f.Err
	}
	return errs
}

// CheckCompatibility runs every check bttl makes of the
// cloud.google.com/go/bigtable version in the build and returns nil or a
// *CompatibilityError. NewClient, NewClientWithConfig and Wrap run it and
// log a failure; a test can call it to fail the build that raises the
// client to a version bttl cannot read (go get -u in a user's module, say):
//
//	func TestBttlCompatible(t *testing.T) {
//		if err := ttlclient.CheckCompatibility(); err != nil {
//			t.Fatal(err)
//		}
//	}
func CheckCompatibility() error {
	var failed []CompatibilityFailure
	if _, err := layout(); err != nil {
		failed = append(failed, CompatibilityFailure{Check: checkMutation, Err: err,
			Effect: "every Table.API() write fails with ErrMutationUnreadable; Mutation writes build the mutation they send with the client's own methods, more slowly"})
	}
	if !rowFilterKnown {
		failed = append(failed, CompatibilityFailure{Check: checkRowFilter,
			Err:    fmt.Errorf("%w: bigtable.RowFilter's option (%s) is not the layout bttl reads", ErrUnsupportedReadOption, rowFilterType),
			Effect: "every ReadRow/ReadRows given a bigtable.RowFilter fails with ErrUnsupportedReadOption"})
	}
	if !limitRowsKnown {
		failed = append(failed, CompatibilityFailure{Check: checkLimitRows,
			Err:    errors.New("bttl: bigtable.LimitRows's option (" + limitRowsType.String() + ") is not the layout bttl reads"),
			Effect: "a shadow read after a ReadRows with LimitRows stops at the last row returned, so it may count fewer expired cells"})
	}
	if failed == nil {
		return nil
	}
	return &CompatibilityError{Version: bigtableVersion(), Failed: failed}
}

// bigtableVersion is the cloud.google.com/go/bigtable version in the build.
func bigtableVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, d := range bi.Deps {
		if d.Path == "cloud.google.com/go/bigtable" {
			if d.Replace != nil {
				d = d.Replace
			}
			return d.Version
		}
	}
	return ""
}

// CompatibilityRecorder is implemented by a TableRecorder that counts
// failed client-version checks (package metrics' does): Open reports each
// failed check of the client's once per table opened.
type CompatibilityRecorder interface {
	IncompatibleClient(check string)
}

// checkCompatibility runs CheckCompatibility for a new client and logs a
// failure, once, on the client's logger.
func (c *Client) checkCompatibility() {
	err := CheckCompatibility()
	var ce *CompatibilityError
	if !errors.As(err, &ce) {
		return
	}
	c.incompatible = ce.Failed
	checks := make([]string, len(ce.Failed))
	for i, f := range ce.Failed {
		checks[i] = f.Check
	}
	c.config(nil).logger.Warn("bttl: the cloud.google.com/go/bigtable version in this build fails bttl's compatibility checks; see ttlclient.CheckCompatibility",
		slog.String("version", ce.Version), slog.Any("checks", checks), slog.String("err", err.Error()))
}

// recordIncompatible counts the client's failed checks on a table's
// recorder.
func (c *Client) recordIncompatible(rec TableRecorder) {
	if r, ok := rec.(CompatibilityRecorder); ok {
		for _, f := range c.incompatible {
			r.IncompatibleClient(f.Check)
		}
	}
}
