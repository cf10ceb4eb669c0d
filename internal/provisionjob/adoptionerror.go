package provisionjob

import (
	"errors"
	"fmt"
	"strings"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/internal/bttlerr"
	"github.com/bttl/bttl/internal/keytext"
	"github.com/bttl/bttl/internal/timefmt"
	"github.com/bttl/bttl/strategy"
)

// AdoptionError is one refusal of a change that would delete or hide
// stored data: the table, the family, the finding (Err, one sentinel per
// kind, each wrapping ErrUnsafeAdoption; errors.Is matches both) and the
// evidence the scan found. CheckAdoptions, PlanAndCheck, Execute and Apply
// return one per finding, joined (errors.Join); errors.As finds the first.
//
// What each finding fills in:
//   - ErrRealTimestamps: one-second expiry over cells at or before Now
//     (with WithWrittenBefore, at or before LegacyBound; Passed counts
//     those after it, not refused);
//   - ErrAgeOverSequence: an age rule (From -> To) over sequence numbers,
//     or over a max-versions family's cells past the new max age;
//   - ErrNotSequenceNumbers: the sequence strategy over timestamps that
//     are not seq*1000 below strategy.RealTimeFloor, RealTimes of them
//     real times;
//   - ErrHiddenColumns: write times over qualifiers from 0xFF 0xFF on that
//     are not write-time companions;
//   - ErrChangeStreamLoss: Stream disables the table's change stream or
//     shortens its retention (no Family and no cells).
type AdoptionError struct {
	// Err is the finding: ErrRealTimestamps, ErrAgeOverSequence,
	// ErrNotSequenceNumbers, ErrHiddenColumns or ErrChangeStreamLoss.
	// The error matches ErrUnsafeAdoption whatever Err is; the message is
	// the finding's only with its evidence (Cells, or for
	// ErrChangeStreamLoss a Stream that loses records), and otherwise
	// says what the fields hold.
	Err error
	// Table and Family are where the cells are (Family "" for
	// ErrChangeStreamLoss).
	Table, Family string
	// From and To are the family's current rule and the rule the change
	// sets (equal for a family whose rule already matches,
	// Plan.Unchanged).
	From, To string
	// Stream is the change of the table's change stream
	// (ErrChangeStreamLoss only).
	Stream *StreamChange

	// Cells is how many offending cells the scan read (a lower bound
	// unless Exact); RealTimes how many of them are real times
	// (ErrNotSequenceNumbers).
	Cells, RealTimes int64
	// Rows of the family the scan read.
	Rows int64
	// Exact: every row of the family was read and every such cell counted.
	// Sampled: the scan read a sample (WithSampledSafetyScan), so cells
	// outside it were not checked.
	Exact, Sampled bool
	// Row, Column and Timestamp are the first offending cell found.
	Row, Column string
	Timestamp   bigtable.Timestamp
	// Now is the time the cells were classified at (ErrRealTimestamps).
	Now bigtable.Timestamp
	// LegacyBound is WithWrittenBefore's instant plus its clock skew (zero
	// without it; ErrRealTimestamps): the cells counted are stamped at or
	// before it, where a real write time can be; those stamped after it,
	// at or before Now, are expiry instants already passed (Passed), not
	// counted in Cells.
	LegacyBound bigtable.Timestamp
	Passed      int64

	// Forced: the change goes ahead (WithForce); the message says what is
	// lost.
	Forced bool
}

// Unwrap returns the finding's sentinel (ErrUnsafeAdoption when Err is
// not set).
func (e *AdoptionError) Unwrap() error {
	if e.Err == nil {
		return ErrUnsafeAdoption
	}
	return e.Err
}

// Is matches ErrUnsafeAdoption whatever Err is: an AdoptionError is a
// refusal, also one built with an error that is not a finding's sentinel.
func (e *AdoptionError) Is(target error) bool { return target == ErrUnsafeAdoption }

func (e *AdoptionError) Error() string {
	// errors.Is, not ==: a finding wrapped with more context keeps its
	// kind's message. Each kind's message needs its evidence (the cells,
	// or the stream's change); without it, the general one.
	switch err := e.Err; {
	case err == nil:
	case errors.Is(err, ErrChangeStreamLoss):
		if e.Stream != nil && e.Stream.loses() {
			return e.streamLoss()
		}
	case e.Cells == 0:
	case errors.Is(err, ErrRealTimestamps):
		return e.realTimestamps()
	case errors.Is(err, ErrAgeOverSequence):
		return e.ageOverSequence()
	case errors.Is(err, ErrNotSequenceNumbers):
		return e.notSequence()
	case errors.Is(err, ErrHiddenColumns):
		return e.hiddenColumns()
	}
	return e.general()
}

// general is the message of an AdoptionError built by hand, or without
// the evidence its kind's message needs: what it holds, nothing more.
func (e *AdoptionError) general() string {
	s := ErrUnsafeAdoption.Error()
	if err := e.Err; err != nil && err != ErrUnsafeAdoption {
		if errors.Is(err, ErrUnsafeAdoption) {
			s = err.Error() // a finding's sentinel says ErrUnsafeAdoption's text
		} else {
			s += ": " + err.Error()
		}
	}
	if !strings.HasPrefix(s, bttlerr.Prefix) {
		s = bttlerr.Prefix + s
	}
	var where []string
	if e.Table != "" {
		where = append(where, fmt.Sprintf("table %q", e.Table))
	}
	if e.Family != "" {
		where = append(where, fmt.Sprintf("family %q", e.Family))
	}
	if len(where) > 0 {
		s += ": " + strings.Join(where, ", ")
	}
	if e.Cells > 0 {
		s += fmt.Sprintf(": %s (first: row %s, column %s, timestamp %s)", e.count(), keytext.Quote(e.Row), keytext.Quote(e.Column), formatTimestamp(e.Timestamp))
	}
	if e.Stream != nil {
		s += ": " + e.Stream.String()
	}
	if e.Forced {
		return s + "; forced"
	}
	return s
}

// count says how the scan counted the cells.
func (e *AdoptionError) count() string { return countCells(e.Cells, e.Exact, e.Sampled, e.Rows) }

// first names the first offending cell.
func (e *AdoptionError) first() string {
	return fmt.Sprintf("(first: row %s, column %s, timestamp %s); ", keytext.Quote(e.Row), keytext.Quote(e.Column), formatTimestamp(e.Timestamp))
}

func (e *AdoptionError) realTimestamps() string {
	s := fmt.Sprintf("%sone-second expiry would delete cells with real timestamps: table %q, family %q: %s with timestamps at or before now %s",
		bttlerr.Prefix, e.Table, e.Family, e.count(), formatTimestamp(e.Now))
	if e.LegacyBound != 0 {
		s += fmt.Sprintf(" and at or before %s (-written-before plus the clock skew), where a real write time can be", formatTimestamp(e.LegacyBound))
	}
	s += " " + e.first()
	if e.Passed > 0 {
		s += fmt.Sprintf("%d other cell(s), stamped after it, are expiry instants already passed and not counted; ", e.Passed)
	}
	if e.Forced {
		return s + "forced: they are hidden from reads through bttl now and deleted at the next compaction"
	}
	if e.LegacyBound == 0 {
		// What cannot be proven is reported: a timestamp alone does not
		// say whether it is a write time or an expiry instant.
		return s + "they would expire at once: move them first, or force; if they are cells bttl wrote or bttl migrate moved whose expiry has since passed, " +
			"give the -written-before (and -clock-skew) the migration used, so that those stamped after it are told apart (docs/design.md#apply-after-migrate)"
	}
	return s + "they would expire at once: real write times, or bttl cells stamped in the switch window: move them first (bttl migrate lists them), or force"
}

func (e *AdoptionError) ageOverSequence() string {
	s := fmt.Sprintf("%san age rule would delete a sequence family's cells: table %q, family %q (%s -> %s): %s already past the new max age, "+
		"sequence numbers or versions kept by max versions %s",
		bttlerr.Prefix, e.Table, e.Family, e.From, e.To, e.count(), e.first())
	if e.Forced {
		return s + "forced: they are hidden from reads through bttl now and deleted at the next compaction"
	}
	return s + "every one would be deleted at the next compaction: keep the sequence strategy, move them first, or force"
}

func (e *AdoptionError) notSequence() string {
	s := fmt.Sprintf("%sthe family holds timestamps that are not sequence numbers: table %q, family %q: %s whose timestamp is not seq*1000 before %s, "+
		"%d of them real times %s",
		bttlerr.Prefix, e.Table, e.Family, e.count(), formatTimestamp(strategy.RealTimeFloor), e.RealTimes, e.first())
	const hides = "outrank every sequence number, so reads through bttl return them and hide new writes, which max versions collects"
	const others = "below the floor and not seq*1000: they outrank nothing, but are not sequence numbers the strategy writes"
	var what string
	switch {
	case e.RealTimes == 0:
		what = "none is a real time; they are " + others
	case e.RealTimes == e.Cells:
		what = "they " + hides
	default:
		what = "the real times " + hides + "; the others are " + others
	}
	if e.Forced {
		return s + "forced: " + what + ", until they are deleted or rewritten"
	}
	return s + what + ": rewrite them as seq*1000 first, or force"
}

func (e *AdoptionError) hiddenColumns() string {
	s := fmt.Sprintf("%sthe family holds columns write times would hide: table %q, family %q: %s under reserved qualifiers (0xFF 0xFF...) that are not write-time companions %s",
		bttlerr.Prefix, e.Table, e.Family, e.count(), e.first())
	if e.Forced {
		return s + "forced: every read through bttl skips them, until they are rewritten under other qualifiers or deleted"
	}
	return s + "every read through bttl would skip them: rewrite them under qualifiers below 0xFF 0xFF first, drop write_time, or force"
}

func (e *AdoptionError) streamLoss() string {
	change := *e.Stream
	lost := "every record it keeps"
	if change.To > 0 {
		lost = "its records older than " + timefmt.Duration(change.To)
	}
	s := fmt.Sprintf("%stable %q: %s drops %s; a consumer behind, or restarting from an older token, cannot read them", bttlerr.Prefix, e.Table, change, lost)
	if e.Forced {
		return s + "; forced"
	}
	return s + "; force to go ahead"
}

// FindAdoptionError returns the first *AdoptionError in err's tree (as
// errors.As walks it, through joins) whose finding is finding, one of the
// sentinels (ErrRealTimestamps, ErrHiddenColumns...), or nil if there is
// none. A refusal joins one AdoptionError per finding, so errors.As finds
// only the first, whatever its kind; this finds the one of a kind.
// ErrUnsafeAdoption finds the first of any kind.
func FindAdoptionError(err, finding error) *AdoptionError {
	if ae, ok := err.(*AdoptionError); ok && errors.Is(ae, finding) {
		return ae
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return FindAdoptionError(u.Unwrap(), finding)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if ae := FindAdoptionError(e, finding); ae != nil {
				return ae
			}
		}
	}
	return nil
}
