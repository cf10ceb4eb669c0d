package ttlclient

// BreakMutationReader makes the TableAPI path behave as on a client version
// whose *bigtable.Mutation layout bttl cannot read, until restore is called.
func BreakMutationReader() (restore func()) {
	rawBroken.Store(true)
	return func() { rawBroken.Store(false) }
}
