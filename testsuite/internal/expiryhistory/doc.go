// Package expiryhistory is issue 38's random-history acceptance test of
// expiry events (package changestream/expiry fed by package changestream on
// the fake change-stream server, bttest_harness/changestreams), compared
// with the reference model (package testsuite/internal/model): one
// reference defines when a cell expires, for reads and for events alike.
// It holds tests only.
//
// TestRandomHistory drives the server and the model with the same random
// history (writes, overwrites, single-value and write-time writes, Expire
// moves both ways, column and row deletes, GC runs, clock steps, partition
// splits and merges, consumers killed and restarted, notifiers killed in
// mid-poll or losing acknowledgements) and, after each clock step, checks
// the events against the model (docs/design.md#expiry-index):
//
//   - every cell the model stores past its instant (model.Expired) has been
//     announced by then;
//   - every timer event is of a cell the model stores past its instant at
//     the poll, with the model's instant (model.Expiry), emitted at the
//     poll's time: never for a live cell;
//   - every event from a GC change is of a cell the model's GC (model.GC)
//     removed past its instant, and every such cell has been announced;
//   - at least once, and no more than its documented repeats: once an event
//     of a cell was acknowledged (its callback returned nil and its poll
//     was not killed), no further event of that cell comes unless a
//     consumer was restarted since (it replays the changes after its last
//     checkpoint, scheduling their cells again).
//
// BTTL_EXPIRY_STEPS sets the steps (default 600), BTTL_EXPIRY_SEED the seed
// (default random, printed). The 100,000-step run:
//
//	BTTL_EXPIRY_SEED=38038 BTTL_EXPIRY_STEPS=100000 go test -run TestRandomHistory -v -timeout 1h ./testsuite/internal/expiryhistory
package expiryhistory
