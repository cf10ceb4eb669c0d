package scanjob

import (
	"errors"
	"fmt"
	"time"

	"github.com/bttl/bttl/internal/bttlerr"
)

var (
	// ErrOption reports an option or argument the scan cannot use; no RPC
	// was made.
	ErrOption = errors.New("bttl: invalid scan option")
	// ErrCheckpoint reports a checkpoint file that cannot be used for this
	// scan: unreadable, or written for another table, job, range or shard.
	ErrCheckpoint = errors.New("bttl: scan checkpoint does not fit this scan")
	// ErrCheckpointClaimed reports a shared checkpoint (bigtable://) that
	// another run claimed after this one: this run stops without writing.
	ErrCheckpointClaimed = errors.New("bttl: scan checkpoint claimed by another run")
	// ErrStalled reports a read that received nothing for the stall
	// interval (WithStall), on its first try and on its retry.
	ErrStalled = errors.New("bttl: scan got no answer from the server")
	// ErrUnfinished, wrapped in the error a RangeFunc's done returns, says
	// the range was read but its work is not done (migrate: a cell left
	// unmoved): its result is recorded and reported, the scan goes on, and
	// the range is not marked finished, so a rerun with the checkpoint
	// reads it again.
	ErrUnfinished = errors.New("bttl: scan range not finished")
)

// StallError is a range whose read received nothing for Interval, twice
// (the retry continues after the last row received), usable with
// errors.Is(err, ErrStalled).
type StallError struct {
	Range    Range
	Interval time.Duration
	Step     string // "ReadRows", "SampleRowKeys" or "checkpoint"
}

func (e *StallError) Error() string {
	if e.Step != "ReadRows" {
		return fmt.Sprintf("bttl: scan: %s: no answer within %s (the stall interval)", e.Step, e.Interval)
	}
	// A RangeError wrapping it names the range, and trims the prefix.
	return fmt.Sprintf("bttl: nothing received for %s (the stall interval), on the read and on its retry", e.Interval)
}
func (e *StallError) Unwrap() error { return ErrStalled }

// OptionError is an invalid option, usable with errors.Is(err, ErrOption).
type OptionError struct {
	Option string // the option's name, e.g. "workers", "shard"
	Reason string
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("bttl: scan option %s: %s", e.Option, e.Reason)
}
func (e *OptionError) Unwrap() error { return ErrOption }

// CheckpointError is a checkpoint file that cannot be used, usable with
// errors.Is(err, ErrCheckpoint).
type CheckpointError struct {
	Path   string
	Reason string // what differs, or why the file cannot be read
	Err    error  // the underlying error, if any
}

func (e *CheckpointError) Error() string {
	msg := fmt.Sprintf("bttl: scan checkpoint %s: %s", e.Path, e.Reason)
	if e.Err != nil {
		msg += ": " + bttlerr.Trim(e.Err.Error())
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

func (e *RangeError) Error() string {
	return fmt.Sprintf("bttl: scan range %s: %s", e.Range, bttlerr.Trim(e.Err.Error()))
}
func (e *RangeError) Unwrap() error { return e.Err }
