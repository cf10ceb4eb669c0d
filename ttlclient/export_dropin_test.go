package ttlclient

import (
	"unsafe"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
)

// BreakMutationReader makes the clients made until restore is called
// behave as on a client version whose *bigtable.Mutation layout bttl cannot
// read: the check fails when they are made (CheckCompatibility), and their
// tables' writes see the failed check.
func BreakMutationReader() (restore func()) {
	rawBroken.Store(true)
	return func() { rawBroken.Store(false) }
}

func opsPointer(l *rawLayout, m *bigtable.Mutation) unsafe.Pointer {
	return unsafe.Add(unsafe.Pointer(m), l.ops)
}

func rmwOpsPointer(l *rawLayout, m *bigtable.ReadModifyWrite) unsafe.Pointer {
	return unsafe.Add(unsafe.Pointer(m), l.rmwOps)
}

// BuildAPI is what Table.API().Apply does before its RPC: read m, then
// Build.
func (t *Table) BuildAPI(row string, m *bigtable.Mutation) (*bigtable.Mutation, error) {
	l := t.layout
	if l == nil {
		return nil, t.layoutErr
	}
	tm, e := l.borrow(m, nil)
	if e != nil {
		return nil, e.err
	}
	return t.build(row, tm, t.clock.Now(), false)
}

// MutationOps is m's operation slice, through the checked layout: tests
// read what a mutation sends and add operations the client cannot make.
func MutationOps(m *bigtable.Mutation) *[]*btpb.Mutation {
	l, err := layout()
	if err != nil {
		panic(err)
	}
	return (*[]*btpb.Mutation)(opsPointer(l, m))
}
