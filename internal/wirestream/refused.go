package wirestream

import (
	"sync"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/grpc/status"
)

// Refused are the rows of one call's MutateRows requests that bttl's
// client interceptor refused, E being its typed refusal (ttlclient's
// *CellError), by the client's entry (the same on every attempt of the
// call): a group the client sends again after a stream error gets the same
// answers, neither counted nor recorded again. The zero value is empty.
type Refused[E error] struct {
	mu      sync.Mutex
	rows    []E
	keys    []string // the row key of each of rows
	byEntry map[*btpb.MutateRowsRequest_Entry]E
}

// Add records e, the refusal of entry, a row of a MutateRows request, whose
// key is row.
func (r *Refused[E]) Add(entry *btpb.MutateRowsRequest_Entry, row string, e E) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rows, r.keys = append(r.rows, e), append(r.keys, row)
	if r.byEntry == nil {
		r.byEntry = map[*btpb.MutateRowsRequest_Entry]E{}
	}
	r.byEntry[entry] = e
}

// Of is the refusal of entry by an earlier attempt of the call, and
// whether it was refused.
func (r *Refused[E]) Of(entry *btpb.MutateRowsRequest_Entry) (E, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.byEntry[entry]
	return e, ok
}

// Results puts the typed refusal of each row refused in place of the
// status the client made of it: the error at a row's index is replaced
// only by a refusal of the same row with the same message.
func (r *Refused[E]) Results(rowKeys []string, errs []error) []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.rows) == 0 {
		return errs
	}
	used := make([]bool, len(r.rows))
	for i, err := range errs {
		if err == nil {
			continue
		}
		msg := status.Convert(err).Message()
		for j, e := range r.rows {
			if !used[j] && r.keys[j] == rowKeys[i] && e.Error() == msg {
				errs[i], used[j] = e, true
				break
			}
		}
	}
	return errs
}

// Dialed is what a client knows of its connection: whether it carries
// bttl's interceptor, learnt once by a probe (ttlclient's checkWire). The
// zero value knows nothing yet.
type Dialed struct {
	mu    sync.Mutex
	known bool
	ok    bool
}

// Peek reports whether the connection is known to carry the interceptor.
func (d *Dialed) Peek() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.known && d.ok
}

// Check reports whether the connection carries the interceptor, running
// probe (which reports whether the interceptor saw its call) the first
// time; calls wait for a probe running.
func (d *Dialed) Check(probe func() bool) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.known {
		d.known, d.ok = true, probe()
	}
	return d.ok
}
