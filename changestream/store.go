package changestream

import (
	"context"
	"strconv"
	"sync"
	"time"
)

// Lease is a worker's claim on a partition until Expires. A lease with no
// Owner belongs to nobody yet: the partition's preferred worker may take it
// at once, any other once it has expired.
type Lease struct {
	Owner   string
	Expires time.Time
}

// encode is the lease's one canonical form, compared whole by Acquire:
// millisecond precision, so a lease read back equals the one written.
func (l Lease) encode() string {
	return l.Owner + "|" + strconv.FormatInt(l.Expires.UnixMilli(), 10)
}

func decodeLease(s string) Lease {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '|' {
			ms, _ := strconv.ParseInt(s[i+1:], 10, 64)
			return Lease{Owner: s[:i], Expires: time.UnixMilli(ms)}
		}
	}
	return Lease{}
}

// State is what a Store keeps for one partition.
type State struct {
	Partition Partition
	// StartTime is where an initial partition starts when it has no
	// Progress: the consumer's start time.
	StartTime time.Time
	// Progress is the partition's own last persisted position.
	Progress *Token
	// Parents are the tokens closed parent partitions handed over (from
	// CloseStream.continuation_tokens): one for a split, one per parent
	// for a merge.
	Parents []Token
	// Watermark is the last low watermark persisted with Progress.
	Watermark time.Time
	Lease     Lease
	// Done marks a partition that closed: its children carry on, or the
	// stream ended (end time).
	Done bool
	// Pending marks a child whose parent's close is not yet recorded whole
	// (a store whose Close spans rows): it waits.
	Pending bool
}

// Ready reports whether the partition can be read: from its own progress,
// from its start time, or from its parents' tokens once they cover it (a
// merged partition waits for every parent).
func (s State) Ready() bool {
	if s.Pending && s.Progress == nil {
		return false
	}
	return s.Progress != nil || !s.StartTime.IsZero() || covers(s.Partition, s.Parents)
}

// Child is a partition a closed one hands its tokens to.
type Child struct {
	Partition Partition
	Tokens    []Token
	// Lease is the child's lease if the child is new (normally no owner).
	Lease Lease
}

// Store persists the partitions' tokens and leases. Every change but Init
// is conditional: Acquire compares the lease whole, and Checkpoint and
// Close apply only while owner holds the partition's lease, so two workers
// never both record progress for one partition.
type Store interface {
	// Init records the initial partitions, all starting at start with
	// lease, unless partitions were recorded already. It is idempotent:
	// a second call (after a crash half way) completes the first call's
	// partitions, not its own.
	Init(ctx context.Context, start time.Time, parts []Partition, lease Lease) error
	// List returns every partition's state; initialized is false until an
	// Init completed.
	List(ctx context.Context) (initialized bool, states []State, err error)
	// Acquire replaces the partition's lease by next if it is still prev,
	// and reports whether it did.
	Acquire(ctx context.Context, p Partition, prev, next Lease) (bool, error)
	// Checkpoint records tok and watermark for p; ErrLeaseLost if owner no
	// longer holds p's lease.
	Checkpoint(ctx context.Context, p Partition, owner string, tok Token, watermark time.Time) error
	// Close hands p's tokens to its children (creating them if new) and then
	// marks p done; ErrLeaseLost if owner no longer holds p's lease. No
	// children means the stream ended.
	Close(ctx context.Context, p Partition, owner string, children []Child) error
}

// MemoryStore is a Store in memory, for tests and single-process
// consumers whose progress may be lost with the process.
type MemoryStore struct {
	mu    sync.Mutex
	init  bool
	parts map[string]*State
	order []string
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{parts: map[string]*State{}} }

func (m *MemoryStore) Init(ctx context.Context, start time.Time, parts []Partition, lease Lease) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.init {
		return nil
	}
	for _, p := range parts {
		m.add(&State{Partition: p, StartTime: start, Lease: decodeLease(lease.encode())})
	}
	m.init = true
	return nil
}

func (m *MemoryStore) add(s *State) {
	k := s.Partition.Key()
	if _, ok := m.parts[k]; !ok {
		m.order = append(m.order, k)
	}
	m.parts[k] = s
}

func (m *MemoryStore) List(ctx context.Context) (bool, []State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]State, 0, len(m.order))
	for _, k := range m.order {
		s := *m.parts[k]
		s.Parents = append([]Token(nil), s.Parents...)
		out = append(out, s)
	}
	return m.init, out, nil
}

func (m *MemoryStore) Acquire(ctx context.Context, p Partition, prev, next Lease) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.parts[p.Key()]
	if !ok || s.Lease.encode() != prev.encode() {
		return false, nil
	}
	s.Lease = decodeLease(next.encode())
	return true, nil
}

func (m *MemoryStore) Checkpoint(ctx context.Context, p Partition, owner string, tok Token, wm time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.parts[p.Key()]
	if !ok || s.Lease.Owner != owner {
		return ErrLeaseLost
	}
	t := tok
	s.Progress = &t
	s.Watermark = wm
	return nil
}

func (m *MemoryStore) Close(ctx context.Context, p Partition, owner string, children []Child) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.parts[p.Key()]
	if !ok || s.Lease.Owner != owner {
		return ErrLeaseLost
	}
	for _, c := range children {
		cs, ok := m.parts[c.Partition.Key()]
		// Close is atomic here, so never a replay: a done row of the same
		// range is an earlier incarnation (split, then merged back), and the
		// child starts afresh.
		if !ok || cs.Done {
			cs = &State{Partition: c.Partition, Lease: decodeLease(c.Lease.encode())}
			m.add(cs)
		}
	next:
		for _, t := range c.Tokens {
			for i, have := range cs.Parents {
				if have.Partition == t.Partition {
					cs.Parents[i] = t
					continue next
				}
			}
			cs.Parents = append(cs.Parents, t)
		}
	}
	s.Done = true
	return nil
}
