package scanjob

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// BigtableScheme prefixes a checkpoint path kept in a Bigtable table of
// the scanned instance: bigtable://TABLE (see WithBigtableCheckpoints).
const BigtableScheme = "bigtable://"

// The checkpoint table's layout: one row per job and shard, family
// checkpointFamily, the record in column "record" and its writer in
// column "owner" as "<generation>:<token>".
const (
	checkpointFamily = "ck"
	recordColumn     = "record"
	ownerColumn      = "owner"
)

// RecordTTL is how long a row of a checkpoint table lives after its last
// write: the table's family keeps one version, and its GC rule collects
// cells older than this (Bigtable collects within about a week after). A
// running job rewrites its row as each range finishes, so only the rows
// of jobs stopped or finished that long ago go; a job resumed after them
// starts over, which a checkpoint's jobs tolerate (migrate moves nothing
// twice). bttl checkpoint list and rm show and remove rows before then.
const RecordTTL = 30 * 24 * time.Hour

// checkpointPolicy is the checkpoint family's GC rule; legacyPolicy the
// rule tables created before RecordTTL were given, which
// ensureCheckpointTable replaces.
var (
	checkpointPolicy = bigtable.UnionPolicy(bigtable.MaxVersionsPolicy(1), bigtable.MaxAgePolicy(RecordTTL))
	legacyPolicy     = bigtable.MaxVersionsPolicy(1)
)

// WithBigtableCheckpoints lets WithCheckpoint's path be bigtable://TABLE:
// the checkpoint is then a row of TABLE in the instance of client (the
// table is created with admin when missing, one family "ck" keeping one
// version), so a worker resumes on any machine. The row is one per job
// and shard (its key: the scanned table, a hash of the job and the
// shard's piece, and i/n), so another job's or split's run starts its own
// row rather than being refused. Updates are conditional mutations on the
// row's owner cell: a run claims the row when it starts, and a run that
// another claimed since cannot write it any more (ErrCheckpointClaimed),
// so two workers on one shard never both record progress and a record
// never goes back.
func WithBigtableCheckpoints(client *bigtable.Client, admin *bigtable.AdminClient) Option {
	return func(c *config) { c.btClient, c.btAdmin = client, admin }
}

var tableIDPattern = regexp.MustCompile(`^[-_.a-zA-Z0-9]{1,50}$`)

// checkpointStore returns where the checkpoint is kept: nil without one.
// A Bigtable checkpoint's table is created here when missing.
func (c *config) checkpointStore(ctx context.Context, table string, piece Range, job []byte) (CheckpointStore, error) {
	if c.checkpoint == "" {
		return nil, nil
	}
	if !strings.HasPrefix(c.checkpoint, BigtableScheme) {
		return fileStore{c.checkpoint}, nil
	}
	id := strings.TrimPrefix(c.checkpoint, BigtableScheme)
	switch {
	case !tableIDPattern.MatchString(id):
		return nil, &OptionError{Option: "checkpoint", Reason: fmt.Sprintf("%q: want %sTABLE, a table ID of letters, digits, -, _ and .", c.checkpoint, BigtableScheme)}
	case c.btClient == nil:
		return nil, &OptionError{Option: "checkpoint", Reason: c.checkpoint + " needs WithBigtableCheckpoints (the clients of the instance that keeps it)"}
	}
	h := sha256.New()
	h.Write(job)
	fmt.Fprintf(h, "\x00%q\x00%q", piece.Start, piece.End)
	key := fmt.Sprintf("%s#%x#%d/%d", table, h.Sum(nil)[:8], c.shard.Index, c.shard.Count)
	return NewBigtableStore(ctx, c.btClient, c.btAdmin, id, key)
}

// NewBigtableStore returns the record kept in row key of table id of
// client's instance, laid out as WithBigtableCheckpoints keeps checkpoints
// (and in the same table, if wanted: a checkpoint's key is the scanned
// table's ID, then "#"). The table is created with admin when missing.
// Open claims the row and Save writes it only while this store holds the
// claim (ErrCheckpointClaimed once another store claimed it since), so of
// two writers of one row the later one wins. bttl audit -report keeps a
// shard's report this way; ReadBigtableRecords reads such rows back.
func NewBigtableStore(ctx context.Context, client *bigtable.Client, admin *bigtable.AdminClient, id, key string) (CheckpointStore, error) {
	switch {
	case !tableIDPattern.MatchString(id):
		return nil, &OptionError{Option: "table", Reason: fmt.Sprintf("%q: want a table ID of letters, digits, -, _ and .", id)}
	case key == "":
		return nil, &OptionError{Option: "key", Reason: "empty row key"}
	case client == nil:
		return nil, &OptionError{Option: "client", Reason: "no data client"}
	}
	name := BigtableScheme + id + "/" + key
	if err := ensureCheckpointTable(ctx, admin, id); err != nil {
		return nil, &CheckpointError{Path: BigtableScheme + id, Reason: "cannot create the table", Err: err}
	}
	tok := make([]byte, 8)
	_, _ = rand.Read(tok)
	host, _ := os.Hostname()
	return &bigtableStore{
		tbl: client.Open(id), key: key, name: name,
		token: fmt.Sprintf("%s@%s/%d", hex.EncodeToString(tok), host, os.Getpid()),
	}, nil
}

// ReadBigtableRecords returns the records of the rows of table id whose
// keys start with prefix, as NewBigtableStore's Save wrote them, by row
// key. A row claimed but not written yet (its writer still running, or
// stopped before its Save), or whose record was saved empty, maps to nil.
func ReadBigtableRecords(ctx context.Context, client *bigtable.Client, id, prefix string) (map[string][]byte, error) {
	if !tableIDPattern.MatchString(id) {
		return nil, &OptionError{Option: "table", Reason: fmt.Sprintf("%q: want a table ID of letters, digits, -, _ and .", id)}
	}
	out := map[string][]byte{}
	err := client.Open(id).ReadRows(ctx, bigtable.PrefixRange(prefix), func(r bigtable.Row) bool {
		out[r.Key()] = nil
		for _, it := range r[checkpointFamily] {
			if it.Column == checkpointFamily+":"+recordColumn && len(it.Value) > 0 {
				out[r.Key()] = it.Value
			}
		}
		return true
	}, bigtable.RowFilter(bigtable.ChainFilters(bigtable.FamilyFilter(checkpointFamily), bigtable.LatestNFilter(1))))
	if err != nil {
		return nil, &CheckpointError{Path: BigtableScheme + id, Reason: "cannot read", Err: err}
	}
	return out, nil
}

// StoredRecord is one row of a checkpoint table, as ListBigtableRecords
// reads it: a checkpoint (NewBigtableStore's row for a scan) or another
// record kept the same way (an audit report).
type StoredRecord struct {
	Key string
	// Record is the record last saved; nil when the row was claimed but
	// not written yet (its writer running, or stopped before its Save).
	Record []byte
	// Owner is the owner cell, "<generation>:<token>", "" for none: it
	// changes with every claim and write.
	Owner string
	// Written is the row's latest write (its newest cell's timestamp):
	// the row expires RecordTTL after it.
	Written time.Time
}

// ListBigtableRecords returns the rows of table id whose keys start with
// prefix, in key order.
func ListBigtableRecords(ctx context.Context, client *bigtable.Client, id, prefix string) ([]StoredRecord, error) {
	if !tableIDPattern.MatchString(id) {
		return nil, &OptionError{Option: "table", Reason: fmt.Sprintf("%q: want a table ID of letters, digits, -, _ and .", id)}
	}
	var out []StoredRecord
	err := client.Open(id).ReadRows(ctx, bigtable.PrefixRange(prefix), func(r bigtable.Row) bool {
		rec := StoredRecord{Key: r.Key()}
		for _, it := range r[checkpointFamily] {
			if t := it.Timestamp.Time(); t.After(rec.Written) {
				rec.Written = t
			}
			switch strings.TrimPrefix(it.Column, checkpointFamily+":") {
			case recordColumn:
				if len(it.Value) > 0 {
					rec.Record = it.Value
				}
			case ownerColumn:
				rec.Owner = string(it.Value)
			}
		}
		out = append(out, rec)
		return true
	}, bigtable.RowFilter(bigtable.ChainFilters(bigtable.FamilyFilter(checkpointFamily), bigtable.LatestNFilter(1))))
	if err != nil {
		return nil, &CheckpointError{Path: BigtableScheme + id, Reason: "cannot read", Err: err}
	}
	return out, nil
}

// RemoveBigtableRecord deletes rec's row of table id if no run claimed or
// wrote it since rec was listed (its owner cell is still rec.Owner), and
// reports whether it did: a row a run took over meanwhile is left.
func RemoveBigtableRecord(ctx context.Context, client *bigtable.Client, id string, rec StoredRecord) (bool, error) {
	if !tableIDPattern.MatchString(id) {
		return false, &OptionError{Option: "table", Reason: fmt.Sprintf("%q: want a table ID of letters, digits, -, _ and .", id)}
	}
	s := &bigtableStore{tbl: client.Open(id), key: rec.Key, name: BigtableScheme + id + "/" + rec.Key}
	m := bigtable.NewMutation()
	m.DeleteRow()
	ok, err := s.apply(ctx, rec.Owner, m)
	if err != nil {
		return false, &CheckpointError{Path: s.name, Reason: "cannot remove", Err: err}
	}
	return ok, nil
}

// ensureCheckpointTable creates the table when it does not exist, and
// checks it has the checkpoint family. Workers starting together may all
// try: AlreadyExists is success.
func ensureCheckpointTable(ctx context.Context, admin *bigtable.AdminClient, id string) error {
	if admin == nil {
		return errors.New("no admin client to look the table up")
	}
	info, err := admin.TableInfo(ctx, id)
	if status.Code(err) == codes.NotFound {
		err = admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: id,
			ColumnFamilies: map[string]bigtable.Family{checkpointFamily: {GCPolicy: checkpointPolicy}}})
		if status.Code(err) == codes.AlreadyExists {
			err = nil
		}
		if err != nil {
			return err
		}
		info, err = admin.TableInfo(ctx, id)
	}
	if err != nil {
		return err
	}
	for _, f := range info.FamilyInfos {
		if f.Name != checkpointFamily {
			continue
		}
		if f.FullGCPolicy != nil && f.FullGCPolicy.String() == legacyPolicy.String() {
			// A table bttl created before its rows expired: given the
			// expiry now (the family is bttl's own). A job whose account
			// may write rows but not change a table's schema (Bigtable
			// User) leaves it as it is rather than fail: expiry is
			// housekeeping (cbt setgcpolicy TABLE ck maxversions=1 or
			// maxage=30d sets it by hand).
			err := admin.SetGCPolicy(ctx, id, checkpointFamily, checkpointPolicy)
			if status.Code(err) == codes.PermissionDenied {
				err = nil
			}
			return err
		}
		return nil
	}
	return fmt.Errorf("table %q exists without the family %q: not a bttl checkpoint table", id, checkpointFamily)
}

// bigtableStore is one checkpoint row. owner is the owner cell this run
// last wrote ("" before Open): every Save is conditional on it.
type bigtableStore struct {
	tbl       *bigtable.Table
	key, name string
	token     string
	gen       int64
	owner     string
}

func (s *bigtableStore) Name() string { return s.name }

// Open reads the row and claims it: the owner cell moves from what was
// read to this run's, conditionally, so of two runs claiming at once one
// reads again and claims after the other (the latest claim wins).
func (s *bigtableStore) Open(ctx context.Context) ([]byte, error) {
	return s.open(ctx, false)
}

// ClaimEmpty claims store's row, a NewBigtableStore's, as Open does, and
// empties its record in the same conditional write: a record saved
// before (an earlier run's report) reads as not written from the claim
// on, even if this run stops right after it. Open then Save(nil) were
// two writes, and a run stopped between them left the earlier record
// readable under its claim.
func ClaimEmpty(ctx context.Context, store CheckpointStore) error {
	s, ok := store.(*bigtableStore)
	if !ok {
		return &CheckpointError{Path: store.Name(), Reason: "not a bigtable:// record"}
	}
	_, err := s.open(ctx, true)
	return err
}

// open is Open; empty also deletes the record in the claiming write.
func (s *bigtableStore) open(ctx context.Context, empty bool) ([]byte, error) {
	for try := 0; try < 5; try++ {
		row, err := s.tbl.ReadRow(ctx, s.key, bigtable.RowFilter(bigtable.ChainFilters(
			bigtable.FamilyFilter(checkpointFamily), bigtable.LatestNFilter(1))))
		if err != nil {
			return nil, &CheckpointError{Path: s.name, Reason: "cannot read", Err: err}
		}
		var rec []byte
		cur := ""
		for _, it := range row[checkpointFamily] {
			switch strings.TrimPrefix(it.Column, checkpointFamily+":") {
			case recordColumn:
				rec = it.Value
			case ownerColumn:
				cur = string(it.Value)
			}
		}
		gen := int64(0)
		if cur != "" {
			g, _, _ := strings.Cut(cur, ":")
			if gen, err = strconv.ParseInt(g, 10, 64); err != nil {
				return nil, &CheckpointError{Path: s.name, Reason: fmt.Sprintf("owner cell %q is not a bttl checkpoint's", cur)}
			}
		}
		next := s.ownerValue(gen + 1)
		m := bigtable.NewMutation()
		if empty {
			m.DeleteCellsInColumn(checkpointFamily, recordColumn)
			rec = nil
		}
		m.DeleteCellsInColumn(checkpointFamily, ownerColumn)
		m.Set(checkpointFamily, ownerColumn, bigtable.Now(), []byte(next))
		ok, err := s.apply(ctx, cur, m)
		if err != nil {
			return nil, &CheckpointError{Path: s.name, Reason: "cannot claim", Err: err}
		}
		if ok {
			s.gen, s.owner = gen+1, next
			return rec, nil
		}
	}
	return nil, &CheckpointError{Path: s.name, Reason: "cannot claim: other runs keep claiming the same shard", Err: ErrCheckpointClaimed}
}

// peek reads the record without claiming the row.
func (s *bigtableStore) peek(ctx context.Context) ([]byte, error) {
	row, err := s.tbl.ReadRow(ctx, s.key, bigtable.RowFilter(bigtable.ChainFilters(
		bigtable.FamilyFilter(checkpointFamily), bigtable.LatestNFilter(1))))
	if err != nil {
		return nil, &CheckpointError{Path: s.name, Reason: "cannot read", Err: err}
	}
	for _, it := range row[checkpointFamily] {
		if it.Column == checkpointFamily+":"+recordColumn && len(it.Value) > 0 {
			return it.Value, nil
		}
	}
	return nil, nil
}

// Save writes the record if this run still owns the row.
func (s *bigtableStore) Save(ctx context.Context, rec []byte) error {
	if s.owner == "" {
		return &CheckpointError{Path: s.name, Reason: "written before it was opened"}
	}
	next := s.ownerValue(s.gen + 1)
	m := bigtable.NewMutation()
	m.DeleteCellsInColumn(checkpointFamily, recordColumn)
	m.DeleteCellsInColumn(checkpointFamily, ownerColumn)
	ts := bigtable.Now()
	m.Set(checkpointFamily, recordColumn, ts, rec)
	m.Set(checkpointFamily, ownerColumn, ts, []byte(next))
	ok, err := s.apply(ctx, s.owner, m)
	if err != nil {
		return &CheckpointError{Path: s.name, Reason: "cannot write", Err: err}
	}
	if !ok {
		return &CheckpointError{Path: s.name, Reason: "another run claimed this shard since this one started (two workers on one shard?): stopped without writing", Err: ErrCheckpointClaimed}
	}
	s.gen, s.owner = s.gen+1, next
	return nil
}

func (s *bigtableStore) ownerValue(gen int64) string { return fmt.Sprintf("%d:%s", gen, s.token) }

// apply applies m if the row's owner cell is exactly want ("": the row
// has no owner cell), and reports whether it did.
func (s *bigtableStore) apply(ctx context.Context, want string, m *bigtable.Mutation) (bool, error) {
	owner := bigtable.ChainFilters(bigtable.FamilyFilter(checkpointFamily),
		bigtable.ColumnFilter(regexp.QuoteMeta(ownerColumn)), bigtable.LatestNFilter(1))
	var cond *bigtable.Mutation
	if want == "" {
		cond = bigtable.NewCondMutation(owner, nil, m)
	} else {
		cond = bigtable.NewCondMutation(bigtable.ChainFilters(owner, bigtable.ValueFilter(regexp.QuoteMeta(want))), m, nil)
	}
	var matched bool
	if err := s.tbl.Apply(ctx, s.key, cond, bigtable.GetCondMutationResult(&matched)); err != nil {
		return false, err
	}
	return matched == (want != ""), nil
}

// saveTimeout bounds one checkpoint write made after the scan's context
// ended (a range finished as Ctrl-C arrived is still recorded).
const saveTimeout = 30 * time.Second
