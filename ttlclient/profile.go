package ttlclient

import (
	"context"

	"cloud.google.com/go/bigtable"
	btapb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"

	"github.com/bttl/bttl/internal/rules"
)

// App profiles (docs/design.md#app-profiles): every single-row transaction
// bttl sends (the lifecycle moves, time-to-idle refreshes, a conditional
// Mutation, ApplyReadModifyWrite) goes through Table.transact, on the
// client's transactional profile.
var (
	// ErrTransactionsNotAllowed: the server refused a single-row
	// transaction (CheckAndMutateRow, ReadModifyWriteRow) because the app
	// profile does not allow it (multi-cluster routing, or single-cluster
	// without allow_transactional_writes); see *ProfileError.
	ErrTransactionsNotAllowed = rules.ErrTransactionsNotAllowed
	// ErrReadOnlyProfile: the server refused a write through a Data Boost
	// app profile, which is read-only; see *ProfileError.
	ErrReadOnlyProfile = rules.ErrReadOnlyProfile
)

// ProfileError is a call an app profile does not allow: the profile (""
// is the instance's default), the call ("CheckAndMutateRow",
// "ReadModifyWriteRow", "MutateRow", "MutateRows"; "Open" for Open's
// check), Err (ErrTransactionsNotAllowed or ErrReadOnlyProfile) and the
// server's error (nil from Open's check), with the fix in its message. Its
// GRPCStatus keeps the server's code (FailedPrecondition).
type ProfileError = rules.ProfileError

// WithTransactionalClient gives a client you Wrap the bigtable client its
// single-row transactions go through (see ClientConfig.TransactionalAppProfile),
// created with bigtable.ClientConfig{AppProfile: profile} on the same
// connection settings as the wrapped one. Close leaves it open: its owner
// closes it. A ClientOption only: every table of the client uses it.
func WithTransactionalClient(c *bigtable.Client, profile string) ClientOption {
	return clientOption(func(cfg *config) { cfg.txn, cfg.txnProfile = c, profile })
}

// transact sends one single-row transaction through the table's
// transactional profile: send is given the table to send it on (the
// transactional client's, else the table's own). Every CheckAndMutateRow
// and ReadModifyWriteRow ttlclient sends goes through it; call names it
// in a refusal of the profile, which is a *ProfileError.
func (t *Table) transact(call string, send func(bigtable.TableAPI) error) error {
	return t.profiled(call, t.txnProfile, send(t.txn))
}

// profiled is err, a call's error through profile, as a *ProfileError
// when it is the server's refusal of the profile.
func (t *Table) profiled(call, profile string, err error) error {
	if sentinel := rules.ProfileRefusal(err); sentinel != nil {
		return &ProfileError{Profile: profile, Call: call, Err: sentinel, Server: err}
	}
	return err
}

// WithInstanceAdminClient gives Open an instance admin client to read the
// app profiles the client uses (GetAppProfile) and check them before the
// table is used: a transactional profile that does not allow single-row
// transactions fails Open of a schema with an idle TTL with a
// *ProfileError (Call "Open"), and is otherwise logged as a warning, as is
// a Data Boost profile for writes. A profile Open cannot read is logged
// and not checked. WithoutVerify skips this check too
// (docs/design.md#app-profiles).
func WithInstanceAdminClient(iac *bigtable.InstanceAdminClient, instance string) ClientOption {
	return clientOption(func(cfg *config) { cfg.instanceAdmin, cfg.instance = iac, instance })
}

// checkProfiles is Open's check of the profiles t uses (see
// WithInstanceAdminClient).
func (c *Client) checkProfiles(ctx context.Context, t *Table, cfg *config) error {
	if cfg.instanceAdmin == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.verifyTimeout)
	defer cancel()
	read := func(id string) *btapb.AppProfile {
		if id == "" {
			id = rules.DefaultProfileID
		}
		ap, err := cfg.instanceAdmin.GetAppProfile(ctx, cfg.instance, id)
		if err != nil {
			cfg.logger.Warn("bttl: app profile not checked", "table", t.name, "profile", id, "err", err)
		}
		return ap
	}
	known := c.owned || cfg.txn != nil // Wrap's own profile is not known
	if known {
		if ap := read(t.txnProfile); ap != nil && !rules.Transactional(ap) {
			e := &ProfileError{Profile: t.txnProfile, Call: "Open", Err: ErrTransactionsNotAllowed}
			if t.idle != nil {
				return e
			}
			cfg.logger.Warn("bttl: Expire, ExpireColumn, ExpireRow, conditional mutations and ApplyReadModifyWrite will fail", "table", t.name, "err", e)
		}
	}
	if c.owned {
		if ap := read(t.profile); ap != nil && ap.GetDataBoostIsolationReadOnly() != nil {
			cfg.logger.Warn("bttl: every write will fail", "table", t.name,
				"err", &ProfileError{Profile: t.profile, Call: "Open", Err: ErrReadOnlyProfile})
		}
	}
	return nil
}
