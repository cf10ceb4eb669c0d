package provisionjob_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	provision "github.com/bttl/bttl/internal/provisionjob"
)

// One struct error carries every adoption finding: errors.Is matches the
// finding's sentinel and ErrUnsafeAdoption, and the message says which
// finding it is, where, and what forcing loses.
func TestAdoptionErrorNamesItsFinding(t *testing.T) {
	stream := &provision.StreamChange{From: 72 * time.Hour, To: 24 * time.Hour}
	cases := []struct {
		finding      error
		says, forced string
	}{
		{provision.ErrRealTimestamps, "one-second expiry would delete cells with real timestamps", "hidden from reads through bttl now"},
		{provision.ErrAgeOverSequence, "an age rule would delete a sequence family's cells", "hidden from reads through bttl now"},
		{provision.ErrNotSequenceNumbers, "the family holds timestamps that are not sequence numbers", "until they are deleted or rewritten"},
		{provision.ErrHiddenColumns, "the family holds columns write times would hide", "every read through bttl skips them"},
		{provision.ErrChangeStreamLoss, "drops its records older than 1d", "; forced"},
	}
	others := []error{provision.ErrRealTimestamps, provision.ErrAgeOverSequence, provision.ErrNotSequenceNumbers, provision.ErrHiddenColumns, provision.ErrChangeStreamLoss}
	for _, c := range cases {
		e := &provision.AdoptionError{Err: c.finding, Table: "t", Family: "f", Cells: 2, Exact: true, Row: "r", Column: "c"}
		if c.finding == provision.ErrChangeStreamLoss {
			e = &provision.AdoptionError{Err: c.finding, Table: "t", Stream: stream}
		}
		assert.ErrorIs(t, e, c.finding)
		assert.ErrorIs(t, e, provision.ErrUnsafeAdoption)
		for _, o := range others {
			if o != c.finding {
				assert.NotErrorIs(t, e, o, "%v", c.finding)
			}
		}
		msg := e.Error()
		assert.True(t, strings.HasPrefix(msg, "bttl: "), msg)
		assert.Contains(t, msg, c.says)
		assert.Contains(t, msg, `table "t"`)
		assert.Contains(t, msg, "force", "an unforced refusal says how to go ahead")
		assert.NotContains(t, msg, c.forced)
		e.Forced = true
		assert.Contains(t, e.Error(), c.forced)
	}
}

// An AdoptionError built without a finding still wraps ErrUnsafeAdoption
// and says where, rather than printing an empty message.
func TestAdoptionErrorWithoutAFinding(t *testing.T) {
	e := &provision.AdoptionError{Table: "t", Family: "f"}
	assert.ErrorIs(t, e, provision.ErrUnsafeAdoption)
	assert.Equal(t, `bttl: the rule change would delete or hide stored cells: table "t", family "f"`, e.Error())
	assert.Contains(t, (&provision.AdoptionError{Err: provision.ErrChangeStreamLoss, Table: "t"}).Error(), `table "t"`, "no Stream: no panic")
	wrapped := &provision.AdoptionError{Err: fmt.Errorf("migration 7: %w", provision.ErrHiddenColumns), Table: "t", Family: "f"}
	assert.ErrorIs(t, wrapped, provision.ErrHiddenColumns)
	assert.Contains(t, wrapped.Error(), "the family holds columns write times would hide", "a wrapped finding keeps its kind's message")
}

// Refusals are joined, one per finding: errors.As gives the first, and
// every finding stays reachable by its sentinel.
func TestAdoptionErrorsJoined(t *testing.T) {
	err := errors.Join(
		&provision.AdoptionError{Err: provision.ErrNotSequenceNumbers, Table: "t", Family: "a", Cells: 1},
		&provision.AdoptionError{Err: provision.ErrHiddenColumns, Table: "t", Family: "b", Cells: 1},
	)
	var first *provision.AdoptionError
	require.ErrorAs(t, err, &first)
	assert.Equal(t, "a", first.Family)
	assert.ErrorIs(t, err, provision.ErrNotSequenceNumbers)
	assert.ErrorIs(t, err, provision.ErrHiddenColumns)
	var families []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var ae *provision.AdoptionError
		require.ErrorAs(t, e, &ae)
		families = append(families, fmt.Sprintf("%s:%v", ae.Family, errors.Is(ae, provision.ErrHiddenColumns)))
	}
	assert.Equal(t, []string{"a:false", "b:true"}, families)
}

// An AdoptionError missing the evidence its kind's message needs (no
// cells, no Stream), or built with an error that is not a finding, says
// what it knows and nothing it does not: no "at least 0 cell(s)", no
// empty first cell, no "off -> off", no table "". It is a refusal all the
// same: errors.Is matches ErrUnsafeAdoption, as the type promises, and
// the message starts "bttl: ".
func TestAdoptionErrorWithoutEvidence(t *testing.T) {
	assert.Equal(t, "bttl: the rule change would delete or hide stored cells", (&provision.AdoptionError{}).Error())

	noCells := (&provision.AdoptionError{Err: provision.ErrRealTimestamps, Table: "t", Family: "f"}).Error()
	assert.Contains(t, noCells, "one-second expiry would delete cells with real timestamps")
	assert.Contains(t, noCells, `table "t", family "f"`)
	assert.NotContains(t, noCells, "0 cell(s)")
	assert.NotContains(t, noCells, `row ""`)

	noStream := (&provision.AdoptionError{Err: provision.ErrChangeStreamLoss, Table: "t"}).Error()
	assert.Contains(t, noStream, "the change stream would lose records")
	assert.NotContains(t, noStream, "off -> off")
	noLoss := (&provision.AdoptionError{Err: provision.ErrChangeStreamLoss, Table: "t", Stream: &provision.StreamChange{To: 24 * time.Hour}}).Error()
	assert.NotContains(t, noLoss, "drops", "enabling a stream drops nothing")
	assert.Contains(t, noLoss, "change stream: off -> retention 1d")

	other := &provision.AdoptionError{Err: io.EOF, Table: "t", Family: "f"}
	assert.ErrorIs(t, other, provision.ErrUnsafeAdoption)
	assert.ErrorIs(t, other, io.EOF)
	assert.True(t, strings.HasPrefix(other.Error(), "bttl: "), other.Error())
	assert.Contains(t, other.Error(), `EOF: table "t", family "f"`)
}
