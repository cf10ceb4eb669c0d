package changestream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/internal/keytext"
)

// BigtableStore is a Store in a Bigtable table, so workers in separate
// processes share partitions and a restarted worker resumes from its
// tokens. Rows (all under Prefix):
//
//	<prefix>init             start, parts (JSON), ready
//	<prefix>p/<partition>    start, lease, inc, tok, wm, done, par:<partition>
//	                         and from:<partition> (per parent token: the token,
//	                         the parent and its inc)
//
// where <partition> is Partition.Key. Every cell is written at timestamp 0,
// so each column holds one version: give the family no GC rule (not the
// family "ck" of scan's bigtable:// checkpoint tables, whose max-age rule
// would collect cells at timestamp 0 at once; docs/design.md#change-streams).
// Leases are
// compared and tokens recorded with CheckAndMutateRow (conditional
// mutations), so two workers never both hold, nor both record progress
// for, one partition.
type BigtableStore struct {
	tbl    *bigtable.Table
	family string
	prefix string
}

// NewBigtableStore returns a store in tbl's family, its rows' keys
// beginning with prefix (one consumer's; say the table's ID and a '#').
func NewBigtableStore(tbl *bigtable.Table, family, prefix string) *BigtableStore {
	return &BigtableStore{tbl: tbl, family: family, prefix: prefix}
}

const (
	colStart  = "start"
	colParts  = "parts"
	colReady  = "ready"
	colLease  = "lease"
	colTok    = "tok"
	colWM     = "wm"
	colDone   = "done"
	colParent = "par:"
	colFrom   = "from:"
	colInc    = "inc"
)

func (s *BigtableStore) initRow() string              { return s.prefix + "init" }
func (s *BigtableStore) partRow(p Partition) string   { return s.prefix + "p/" + p.Key() }
func (s *BigtableStore) col(c string) bigtable.Filter { return s.colValue(c, ".*") }

// colValue matches the cell of column c whose whole value matches the RE2
// pattern (value filters match the whole value).
func (s *BigtableStore) colValue(c, pattern string) bigtable.Filter {
	return bigtable.ChainFilters(
		bigtable.FamilyFilter("^"+regexp.QuoteMeta(s.family)+"$"),
		bigtable.ColumnFilter("^"+regexp.QuoteMeta(c)+"$"),
		bigtable.ValueFilter("(?s)"+pattern),
	)
}

func (s *BigtableStore) set(m *bigtable.Mutation, col, v string) {
	m.Set(s.family, col, 0, []byte(v))
}

// cond applies a conditional mutation and reports whether the predicate
// matched.
func (s *BigtableStore) cond(ctx context.Context, row string, pred bigtable.Filter, mtrue, mfalse *bigtable.Mutation) (bool, error) {
	var matched bool
	err := s.tbl.Apply(ctx, row, bigtable.NewCondMutation(pred, mtrue, mfalse), bigtable.GetCondMutationResult(&matched))
	return matched, err
}

func (s *BigtableStore) Init(ctx context.Context, start time.Time, parts []Partition, lease Lease) error {
	js, err := json.Marshal(parts)
	if err != nil {
		return err
	}
	first := bigtable.NewMutation()
	s.set(first, colStart, start.UTC().Format(time.RFC3339Nano))
	s.set(first, colParts, string(js))
	// The first caller's list wins; a later caller completes it.
	if _, err := s.cond(ctx, s.initRow(), s.col(colStart), nil, first); err != nil {
		return err
	}
	row, err := s.tbl.ReadRow(ctx, s.initRow(), bigtable.RowFilter(bigtable.LatestNFilter(1)))
	if err != nil {
		return err
	}
	cells := s.cells(row)
	var stored []Partition
	if err := json.Unmarshal([]byte(cells[colParts]), &stored); err != nil {
		return fmt.Errorf("changestream: store row %s: parts: %w", keytext.Quote(s.initRow()), err)
	}
	for _, p := range stored {
		m := bigtable.NewMutation()
		s.set(m, colStart, cells[colStart])
		s.set(m, colLease, lease.encode())
		if _, err := s.cond(ctx, s.partRow(p), s.col(colLease), nil, m); err != nil {
			return err
		}
	}
	ready := bigtable.NewMutation()
	s.set(ready, colReady, "1")
	return s.tbl.Apply(ctx, s.initRow(), ready)
}

// cells maps the row's qualifiers in the store's family to values.
func (s *BigtableStore) cells(r bigtable.Row) map[string]string {
	out := map[string]string{}
	for _, it := range r[s.family] {
		out[strings.TrimPrefix(it.Column, s.family+":")] = string(it.Value)
	}
	return out
}

func (s *BigtableStore) List(ctx context.Context) (bool, []State, error) {
	var (
		initialized bool
		states      []State
		bad         error
		froms       = map[int][]string{} // state index -> its parents' keys
		done        = map[string]bool{}  // partition key -> done
	)
	err := s.tbl.ReadRows(ctx, bigtable.PrefixRange(s.prefix), func(r bigtable.Row) bool {
		c := s.cells(r)
		if r.Key() == s.initRow() {
			initialized = c[colReady] != ""
			return true
		}
		key, ok := strings.CutPrefix(r.Key(), s.prefix+"p/")
		if !ok {
			return true
		}
		p, err := partitionOfKey(key)
		if err != nil {
			bad = fmt.Errorf("changestream: store row %s: %w", keytext.Quote(r.Key()), err)
			return false
		}
		st := State{Partition: p, Lease: decodeLease(c[colLease]), Done: c[colDone] != ""}
		if v := c[colStart]; v != "" {
			st.StartTime, _ = time.Parse(time.RFC3339Nano, v)
		}
		if v, ok := c[colTok]; ok {
			st.Progress = &Token{Partition: p, Token: v}
		}
		if v := c[colWM]; v != "" {
			st.Watermark, _ = time.Parse(time.RFC3339Nano, v)
		}
		for q, v := range c {
			if _, ok := strings.CutPrefix(q, colFrom); ok {
				froms[len(states)] = append(froms[len(states)], v)
			}
			if k, ok := strings.CutPrefix(q, colParent); ok {
				tp, err := partitionOfKey(k)
				if err != nil {
					bad = fmt.Errorf("changestream: store row %s: %w", keytext.Quote(r.Key()), err)
					return false
				}
				st.Parents = append(st.Parents, Token{Partition: tp, Token: v})
			}
		}
		done[key+"@"+c[colInc]] = st.Done
		states = append(states, st)
		return true
	}, bigtable.RowFilter(bigtable.LatestNFilter(1)))
	if err == nil {
		err = bad
	}
	for i, parents := range froms {
		// Pending while the very incarnation that wrote the token is not
		// done; a row of its range created since means it was done (only
		// done rows are replaced).
		for _, k := range parents {
			if d, ok := done[k]; ok && !d {
				states[i].Pending = true
			}
		}
	}
	return initialized, states, err
}

func partitionOfKey(k string) (Partition, error) {
	a, b, ok := strings.Cut(k, "-")
	if !ok {
		return Partition{}, fmt.Errorf("partition key %q", k)
	}
	start, err1 := hex.DecodeString(a)
	end, err2 := hex.DecodeString(b)
	if err1 != nil || err2 != nil {
		return Partition{}, fmt.Errorf("partition key %q", k)
	}
	return Partition{Start: string(start), End: string(end)}, nil
}

func (s *BigtableStore) Acquire(ctx context.Context, p Partition, prev, next Lease) (bool, error) {
	m := bigtable.NewMutation()
	s.set(m, colLease, next.encode())
	return s.cond(ctx, s.partRow(p), s.colValue(colLease, regexp.QuoteMeta(prev.encode())), m, nil)
}

// owned matches the partition's lease while owner holds it.
func (s *BigtableStore) owned(owner string) bigtable.Filter {
	return s.colValue(colLease, regexp.QuoteMeta(owner+"|")+"-?[0-9]+")
}

func (s *BigtableStore) Checkpoint(ctx context.Context, p Partition, owner string, tok Token, wm time.Time) error {
	m := bigtable.NewMutation()
	s.set(m, colTok, tok.Token)
	if !wm.IsZero() {
		s.set(m, colWM, wm.UTC().Format(time.RFC3339Nano))
	}
	ok, err := s.cond(ctx, s.partRow(p), s.owned(owner), m, nil)
	if err == nil && !ok {
		err = ErrLeaseLost
	}
	return err
}

func (s *BigtableStore) Close(ctx context.Context, p Partition, owner string, children []Child) error {
	// Close spans rows, so it cannot be atomic: a worker killed half way
	// leaves the parent not done, and its next owner reads the parent's end
	// again and closes it again. So a child names the parent it has each
	// token from (from:<token partition>), and List holds a child back
	// until those parents are done: no child runs before its parent's close
	// is recorded whole, a repeated close may rewrite the children freely,
	// and a done child row met here is an earlier incarnation of its range
	// (split, then merged back), which starts afresh. Each row incarnation
	// has an id (inc), so "done" is asked of the parent incarnation.
	prow, err := s.tbl.ReadRow(ctx, s.partRow(p), bigtable.RowFilter(bigtable.LatestNFilter(1)))
	if err != nil {
		return err
	}
	from := p.Key() + "@" + s.cells(prow)[colInc]
	for _, c := range children {
		row := s.partRow(c.Partition)
		wipe := bigtable.NewMutation()
		wipe.DeleteRow()
		if _, err := s.cond(ctx, row, s.col(colDone), wipe, nil); err != nil {
			return err
		}
		toks := bigtable.NewMutation()
		fresh := bigtable.NewMutation()
		for _, t := range c.Tokens {
			for _, m := range []*bigtable.Mutation{toks, fresh} {
				s.set(m, colParent+t.Partition.Key(), t.Token)
				s.set(m, colFrom+t.Partition.Key(), from)
			}
		}
		s.set(fresh, colLease, c.Lease.encode())
		s.set(fresh, colInc, newInc())
		if _, err := s.cond(ctx, row, s.col(colLease), toks, fresh); err != nil {
			return err
		}
	}
	m := bigtable.NewMutation()
	s.set(m, colDone, "1")
	ok, err := s.cond(ctx, s.partRow(p), s.owned(owner), m, nil)
	if err == nil && !ok {
		err = ErrLeaseLost
	}
	return err
}

// newInc names a row incarnation.
func newInc() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
