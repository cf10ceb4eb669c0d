package changestream

import (
	"errors"
	"fmt"

	"github.com/bttl/bttl/internal/bttlerr"
)

var (
	// ErrLeaseLost reports that another worker owns the partition now: its
	// progress is not recorded by this one.
	ErrLeaseLost = errors.New("bttl: changestream: partition lease lost")
	// ErrProtocol reports a message the protos' contract does not allow.
	ErrProtocol = errors.New("bttl: changestream: protocol violation")
	// ErrInvalidOption reports an option value that cannot work.
	ErrInvalidOption = errors.New("bttl: changestream: invalid option")
	// ErrIdle reports a stream that sent nothing, not even a heartbeat,
	// within the idle timeout.
	ErrIdle = errors.New("bttl: changestream: stream idle past its timeout")
	// ErrNotInitialized reports a worker that waited too long for task 0
	// to record the table's initial partitions.
	ErrNotInitialized = errors.New("bttl: changestream: partitions not initialized")
)

// Error is a failed call with its context: the operation, the endpoint
// (the connection's target), the table and the partition.
type Error struct {
	Op        string
	Endpoint  string
	Table     string
	Partition *Partition
	Err       error
}

func (e *Error) Error() string {
	where := e.Table
	if e.Partition != nil {
		where += " partition " + e.Partition.String()
	}
	return fmt.Sprintf("bttl: changestream: %s %s at %s: %s", e.Op, where, e.Endpoint, bttlerr.Trim(fmt.Sprint(e.Err)))
}

func (e *Error) Unwrap() error { return e.Err }
