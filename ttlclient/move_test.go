package ttlclient_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/ttlclient"
)

func TestMoveCellMovesThePinnedCellOnly(t *testing.T) {
	e := newEnv(t, mixedSchema())
	m := ttlclient.NewMutation()
	m.SetTTL(famDef, "c", 10*time.Minute, []byte("old"))
	e.apply(t, "r", m)
	oldTS := e.storedTimestamp(t, "r", famDef, "c")
	newTS := oldTS + bigtable.Timestamp(time.Hour/time.Microsecond)

	applied, err := e.tbl.MoveCell(e.ctx, "r", famDef, "c", oldTS, []byte("old"), newTS)
	require.NoError(t, err)
	assert.True(t, applied)
	assert.Equal(t, []string{"def:c@" + itoa(int64(newTS)) + "=old"}, e.stored(t, "r"))

	// The cell is no longer at oldTS: a second move does not apply and
	// changes nothing.
	applied, err = e.tbl.MoveCell(e.ctx, "r", famDef, "c", oldTS, []byte("old"), newTS+1000)
	require.NoError(t, err)
	assert.False(t, applied)
	assert.Equal(t, []string{"def:c@" + itoa(int64(newTS)) + "=old"}, e.stored(t, "r"))
}

func TestMoveCellDoesNotMatchAnotherValueAtTheSameTimestamp(t *testing.T) {
	e := newEnv(t, mixedSchema())
	m := ttlclient.NewMutation()
	m.SetTTL(famDef, "c", 10*time.Minute, []byte("v1"))
	e.apply(t, "r", m)
	ts := e.storedTimestamp(t, "r", famDef, "c")
	// A concurrent writer replaced the value in the same millisecond.
	m = ttlclient.NewMutation()
	m.SetTTL(famDef, "c", 10*time.Minute, []byte("v2"))
	e.apply(t, "r", m)
	require.Equal(t, ts, e.storedTimestamp(t, "r", famDef, "c"))

	applied, err := e.tbl.MoveCell(e.ctx, "r", famDef, "c", ts, []byte("v1"), ts+1_000_000)
	require.NoError(t, err)
	assert.False(t, applied, "the pinned value v1 is gone")
	assert.Equal(t, []string{"def:c@" + itoa(int64(ts)) + "=v2"}, e.stored(t, "r"))
}

func TestMoveCellKeepsANewerCell(t *testing.T) {
	e := newEnv(t, mixedSchema())
	m := ttlclient.NewMutation()
	m.SetTTL(famOne, "c", time.Minute, []byte("old"))
	e.apply(t, "r", m)
	oldTS := e.storedTimestamp(t, "r", famOne, "c")
	m = ttlclient.NewMutation()
	m.SetTTL(famOne, "c", 2*time.Minute, []byte("new"))
	e.apply(t, "r", m)
	newer := oldTS + 60_000_000

	applied, err := e.tbl.MoveCell(e.ctx, "r", famOne, "c", oldTS, []byte("old"), oldTS+30_000_000)
	require.NoError(t, err)
	assert.True(t, applied)
	assert.Equal(t, []string{
		"one:c@" + itoa(int64(oldTS+30_000_000)) + "=old",
		"one:c@" + itoa(int64(newer)) + "=new",
	}, e.stored(t, "r"))
}

func TestMoveCellNeverRevivesAnExpiredCell(t *testing.T) {
	e := newEnv(t, mixedSchema())
	m := ttlclient.NewMutation()
	m.SetTTL(famOne, "c", time.Second, []byte("v"))
	e.apply(t, "r", m)
	ts := e.storedTimestamp(t, "r", famOne, "c")
	e.h.Clock.Advance(2 * time.Second) // expired, not collected yet (GC runs on the server's own clock)

	applied, err := e.tbl.MoveCell(e.ctx, "r", famOne, "c", ts, []byte("v"), ts+bigtable.Timestamp(time.Hour.Microseconds()))
	require.NoError(t, err)
	assert.False(t, applied)
	assert.Empty(t, e.read(t, "r"), "nothing live")
	for _, c := range e.stored(t, "r") {
		assert.Equal(t, "one:c@"+itoa(int64(ts))+"=v", c, "only the expired cell, unmoved")
	}
}

func TestMoveCellRefusesAValueTooLargeToPin(t *testing.T) {
	e := newEnv(t, mixedSchema())
	big := bytes.Repeat([]byte("x"), 20<<10)
	m := ttlclient.NewMutation()
	m.SetTTL(famDef, "c", 10*time.Minute, big)
	e.apply(t, "r", m)
	ts := e.storedTimestamp(t, "r", famDef, "c")

	applied, err := e.tbl.MoveCell(e.ctx, "r", famDef, "c", ts, big, ts+1_000_000)
	require.ErrorIs(t, err, filters.ErrCellTooLargeToPin)
	assert.False(t, applied)
	var ce *ttlclient.CellError
	require.True(t, errors.As(err, &ce))
	assert.Equal(t, famDef, ce.Family)
	var pe *filters.PinError
	require.True(t, errors.As(err, &pe))
	assert.Equal(t, len(big), pe.ValueBytes)
	assert.Equal(t, ts, e.storedTimestamp(t, "r", famDef, "c"), "nothing moved")
}
