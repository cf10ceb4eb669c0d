package scan

import (
	"errors"
	"fmt"
)

var (
	// ErrOption reports an option or argument the scan cannot use; no RPC
	// was made.
	ErrOption = errors.New("scan: invalid option")
	// ErrCheckpoint reports a checkpoint file that cannot be used for this
	// scan: unreadable, or written for another table, job, range or shard.
	ErrCheckpoint = errors.New("scan: checkpoint does not fit this scan")
	// ErrUnfinished, wrapped in the error a RangeFunc's done returns, says
	// the range was read but its work is not done (migrate: a cell left
	// unmoved): its result is recorded and reported, the scan goes on, and
	// the range is not marked finished, so a rerun with the checkpoint
	// reads it again.
	ErrUnfinished = errors.New("scan: range not finished")
)

// OptionError is an invalid option, usable with errors.Is(err, ErrOption).
type OptionError struct {
	Option string // the option's name, e.g. "workers", "shard"
	Reason string
}

func (e *OptionError) Error() string { return fmt.Sprintf("scan: %s: %s", e.Option, e.Reason) }
func (e *OptionError) Unwrap() error { return ErrOption }

// CheckpointError is a checkpoint file that cannot be used, usable with
// errors.Is(err, ErrCheckpoint).
type CheckpointError struct {
	Path   string
	Reason string // what differs, or why the file cannot be read
	Err    error  // the underlying error, if any
}

func (e *CheckpointError) Error() string {
	msg := fmt.Sprintf("scan: checkpoint %s: %s", e.Path, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns ErrCheckpoint and the underlying error, if any.
func (e *CheckpointError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrCheckpoint}
	}
	return []error{ErrCheckpoint, e.Err}
}

// RangeError is an error that stopped the scan while it read Range: the
// callback's error, or ReadRows's.
type RangeError struct {
	Range Range
	Err   error
}

func (e *RangeError) Error() string { return fmt.Sprintf("scan: range %s: %v", e.Range, e.Err) }
func (e *RangeError) Unwrap() error { return e.Err }
