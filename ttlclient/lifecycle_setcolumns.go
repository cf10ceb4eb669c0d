package ttlclient

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/internal/lifecycle"
	"github.com/bttl/bttl/internal/rules"
)

// SetCondition is when SetColumns writes, like Redis HSETEX's FNX and
// FXX, judged on the columns' live cells.
type SetCondition uint8

const (
	// SetAlways: no condition (HSETEX without FNX or FXX).
	SetAlways SetCondition = iota
	// SetIfNoneExist (FNX): only when none of the columns holds a live
	// cell.
	SetIfNoneExist
	// SetIfAllExist (FXX): only when every one of the columns holds a
	// live cell.
	SetIfAllExist
)

// String is the condition's Redis flag ("FNX", "FXX"; "" for SetAlways).
func (c SetCondition) String() string {
	switch c {
	case SetAlways:
		return ""
	case SetIfNoneExist:
		return "FNX"
	case SetIfAllExist:
		return "FXX"
	}
	return fmt.Sprintf("SetCondition(%d)", uint8(c))
}

// SetColumns writes values (qualifier -> value) to family of row, each
// cell with the TTL ttl (as Mutation.SetTTL), all or none, when cond
// holds, like Redis HSETEX ... FNX|FXX EX: applied reports whether it
// wrote. A column "exists" when it holds a live cell as a read through the
// table sees it; the condition is the predicate of the one
// CheckAndMutateRow that writes, so the server decides on the cells it
// stores (docs/design.md#set-columns). family must be an age family (else
// ErrNotApplicable); the other refusals are a Mutation's, and an empty
// values is ErrEmptyMutation, before any RPC.
func (t *Table) SetColumns(ctx context.Context, row, family string, values map[string][]byte, ttl time.Duration, cond SetCondition) (applied bool, err error) {
	if err := t.checkRowKey(row); err != nil {
		return false, err
	}
	if _, err := lifecycle.AgePolicy(t.rules.Policy(family)); err != nil {
		return false, t.refuse(row, family, "", err)
	}
	if len(values) == 0 {
		return false, t.refuse(row, family, "", rules.ErrEmptyMutation)
	}
	if cond > SetIfAllExist {
		return false, t.refuse(row, family, "", fmt.Errorf("%w: %s", rules.ErrNotApplicable, cond))
	}
	columns := slices.Sorted(maps.Keys(values)) // the mutation is the same every time
	m := NewMutation()
	for _, c := range columns {
		m.SetTTL(family, c, ttl, values[c])
	}
	if cond == SetAlways {
		if err := t.Apply(ctx, row, m); err != nil {
			return false, err
		}
		return true, nil
	}
	pred := lifecycle.ColumnsExist(family, columns, cond == SetIfAllExist)
	var cm *Mutation
	if cond == SetIfAllExist {
		cm = NewCondMutation(pred, m, nil)
	} else {
		cm = NewCondMutation(pred, nil, m)
	}
	var matched bool
	if err := t.Apply(ctx, row, cm, bigtable.GetCondMutationResult(&matched)); err != nil {
		return false, err
	}
	return matched == (cond == SetIfAllExist), nil
}

// SetColumnsKeepTTL writes values (qualifier -> value) to family of row
// keeping each column's TTL, like Redis HSETEX ... FXX KEEPTTL: each value
// replaces its column's newest live cell at that cell's timestamp, as
// SetKeepTTL does, all in one conditional row mutation. A column without a
// live cell makes it ExpireNoCell, a change to any of the cells since the
// read ExpireChanged, both with nothing written; else ExpireSet
// (docs/design.md#set-columns). The refusals are SetKeepTTL's, and an
// empty values is ErrEmptyMutation, before any write.
func (t *Table) SetColumnsKeepTTL(ctx context.Context, row, family string, values map[string][]byte) (ExpireResult, error) {
	if len(values) == 0 {
		if err := t.checkRowKey(row); err != nil {
			return ExpireNoCell, err
		}
		return ExpireNoCell, t.refuse(row, family, "", rules.ErrEmptyMutation)
	}
	columns := slices.Sorted(maps.Keys(values))
	vs := make([][]byte, len(columns))
	for i, c := range columns {
		vs[i] = values[c]
	}
	r, err := t.life.SetColumnsKeepTTL(ctx, row, family, columns, vs)
	return ExpireResult(r), err
}
