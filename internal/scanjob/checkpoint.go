package scanjob

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

const checkpointVersion = 1

// CheckpointStore keeps one scan's checkpoint record (one shard of one
// job): a file (WithCheckpoint's path), or a row of a Bigtable table
// (a path bigtable://TABLE with WithBigtableCheckpoints). The store moves
// the record's bytes; what a record holds is this file's business alone.
type CheckpointStore interface {
	// Name says where the record is kept, for messages.
	Name() string
	// Open returns the record, or nil when there is none, and makes this
	// scan its writer: a store shared by processes refuses the Saves of a
	// scan that opened it before another did (ErrCheckpointClaimed).
	Open(ctx context.Context) ([]byte, error)
	// Save replaces the record atomically: a reader sees the old record or
	// the new one, never a mix.
	Save(ctx context.Context, rec []byte) error
}

// fileStore is a checkpoint in a local file.
type fileStore struct{ path string }

func (f fileStore) Name() string { return f.path }

func (f fileStore) Open(context.Context) ([]byte, error) {
	b, err := os.ReadFile(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &CheckpointError{Path: f.path, Reason: "cannot read", Err: err}
	}
	return b, nil
}

// Save replaces the file atomically: a temporary file in the same
// directory, synced, then renamed over it.
func (f fileStore) Save(_ context.Context, b []byte) error {
	path := f.path
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return &CheckpointError{Path: path, Reason: "cannot write", Err: err}
	}
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return &CheckpointError{Path: path, Reason: "cannot write", Err: err}
	}
	return nil
}

// checkpointFile is the checkpoint's JSON form: the shard's ranges, fixed
// at the first run, and which are finished (with the result RunRanges'
// done returned for each).
type checkpointFile struct {
	Version int             `json:"version"`
	Table   string          `json:"table"`
	Shard   Shard           `json:"shard"`
	Piece   Range           `json:"piece"` // the shard's part of the scanned range
	Job     json.RawMessage `json:"job,omitempty"`
	// Filters are WithFilter's filters; null in a checkpoint written
	// before they were recorded, which is not checked against them.
	Filters []string          `json:"filters"`
	Updated string            `json:"updated"` // RFC 3339 UTC
	Ranges  []checkpointRange `json:"ranges"`
}

type checkpointRange struct {
	Range  Range           `json:"range"`
	Weight int             `json:"weight"` // SampleRowKeys intervals merged into it
	Done   bool            `json:"done"`
	Result json.RawMessage `json:"result,omitempty"`
	fresh  bool            // finished by this run
}

// CheckpointInfo is what a checkpoint record says about its scan, for a
// listing (bttl checkpoint list).
type CheckpointInfo struct {
	Table string
	Shard Shard
	Piece Range
	// Job is the job the checkpoint was written for (WithCheckpoint's and
	// WithJob's), as JSON.
	Job     json.RawMessage
	Updated time.Time // the record's last write
	// Ranges is the shard's ranges; Done how many are finished.
	Ranges, Done int
}

// ParseCheckpoint reads a checkpoint record (a file WithCheckpoint
// wrote, or a StoredRecord's Record); an error wrapping ErrCheckpoint when
// rec is not one.
func ParseCheckpoint(rec []byte) (*CheckpointInfo, error) {
	var c checkpointFile
	if err := json.Unmarshal(rec, &c); err != nil {
		return nil, &CheckpointError{Reason: "not a scan checkpoint", Err: err}
	}
	if c.Version != checkpointVersion {
		return nil, &CheckpointError{Reason: fmt.Sprintf("version %d, want %d", c.Version, checkpointVersion)}
	}
	info := &CheckpointInfo{Table: c.Table, Shard: c.Shard, Piece: c.Piece, Job: json.RawMessage(canonicalJSON(c.Job)), Ranges: len(c.Ranges)}
	info.Updated, _ = time.Parse(time.RFC3339, c.Updated)
	for _, r := range c.Ranges {
		if r.Done {
			info.Done++
		}
	}
	return info, nil
}

// loadCheckpoint reads the checkpoint st keeps; (nil, nil) when there is
// none.
func loadCheckpoint(ctx context.Context, st CheckpointStore) (*checkpointFile, error) {
	b, err := st.Open(ctx)
	if err != nil || b == nil {
		return nil, err
	}
	return parseCheckpoint(st.Name(), b)
}

// parseCheckpoint decodes a record kept at path.
func parseCheckpoint(path string, b []byte) (*checkpointFile, error) {
	var c checkpointFile
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, &CheckpointError{Path: path, Reason: "not a scan checkpoint", Err: err}
	}
	if c.Version != checkpointVersion {
		return nil, &CheckpointError{Path: path, Reason: fmt.Sprintf("version %d, want %d", c.Version, checkpointVersion)}
	}
	return &c, nil
}

// fits checks that c was written for this scan, and that its ranges tile
// its piece.
func (c *checkpointFile) fits(path, table string, shard Shard, piece Range, job json.RawMessage, filters []string) error {
	mismatch := func(what string, got, want any) error {
		return &CheckpointError{Path: path, Reason: fmt.Sprintf("written for %s %v, this scan is for %v", what, got, want)}
	}
	switch {
	case c.Table != table:
		return mismatch("table", c.Table, table)
	case c.Shard != shard:
		return mismatch("shard", c.Shard, shard)
	case c.Piece != piece:
		return mismatch("key range", c.Piece, piece)
	}
	if a, b := canonicalJSON(c.Job), canonicalJSON(job); a != b {
		return mismatch("job", a, b)
	}
	if c.Filters != nil && !slices.Equal(c.Filters, filters) {
		return mismatch("filters", c.Filters, filters)
	}
	start := piece.Start
	for i, r := range c.Ranges {
		if r.Range.Start != start || (r.Range.End != "" && r.Range.End <= r.Range.Start) || (r.Range.End == "") != (i == len(c.Ranges)-1 && piece.End == "") {
			return &CheckpointError{Path: path, Reason: fmt.Sprintf("range %d %s does not follow the one before it", i, r.Range)}
		}
		start = r.Range.End
	}
	if len(c.Ranges) == 0 || start != piece.End {
		return &CheckpointError{Path: path, Reason: "its ranges do not cover the shard's key range " + piece.String()}
	}
	return nil
}

// write replaces the record st keeps.
func (c *checkpointFile) write(ctx context.Context, st CheckpointStore, now time.Time) error {
	c.Updated = now.UTC().Format(time.RFC3339)
	b, err := json.MarshalIndent(c, "", " ")
	if err != nil {
		return err
	}
	return st.Save(ctx, append(b, '\n'))
}

// canonicalJSON is raw re-encoded compactly with its keys sorted and
// without HTML escaping, so that two encodings of one job compare equal
// and an error message shows "->", not "-\u003e".
func canonicalJSON(raw json.RawMessage) string {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return string(raw)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
