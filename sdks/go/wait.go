package dbaas

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrDatabaseFailed is wrapped by WaitForStatus's (and WaitForReplicaStatus's) error when the
// database (or replica) became failed instead.
var ErrDatabaseFailed = errors.New("dbaas: the database failed")

// WaitForStatus polls a database until its status is status (e.g. "running") and returns it. It
// gives up when ctx ends (or, when ctx has no deadline, after the client's wait timeout, 10 min by
// default) with an error wrapping context.DeadlineExceeded, and when the database becomes
// "failed" with one wrapping ErrDatabaseFailed (the database returned beside it).
func (c *Client) WaitForStatus(ctx context.Context, id, status string) (*Database, error) {
	var db *Database
	err := c.poll(ctx, id, status, func(ctx context.Context) (string, string, error) {
		var err error
		if db, err = c.GetDatabase(ctx, id); err != nil {
			return "", "", err
		}
		return db.Status, db.StatusReason, nil
	})
	return lastSeen(db, err)
}

// WaitForReplicaStatus polls a read replica until its status is status, as WaitForStatus does a
// database's; a replica that became "failed" gives an error wrapping ErrDatabaseFailed.
func (c *Client) WaitForReplicaStatus(ctx context.Context, databaseID, replicaID, status string) (*Replica, error) {
	var r *Replica
	err := c.poll(ctx, replicaID, status, func(ctx context.Context) (string, string, error) {
		var err error
		if r, err = c.GetReplica(ctx, databaseID, replicaID); err != nil {
			return "", "", err
		}
		return r.Status, r.StatusReason, nil
	})
	return lastSeen(r, err)
}

// lastSeen is what a wait returns: the record with a nil error, the failed record beside the
// ErrDatabaseFailed error, nothing beside any other error.
func lastSeen[T any](v *T, err error) (*T, error) {
	if err != nil && !errors.Is(err, ErrDatabaseFailed) {
		return nil, err
	}
	return v, err
}

// poll reads what id names until its status is status, it is "failed", read fails, or ctx (or the
// client's wait timeout) ends.
func (c *Client) poll(ctx context.Context, id, status string, read func(context.Context) (string, string, error)) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.waitTimeout)
		defer cancel()
	}
	ticker := time.NewTicker(c.pollInterval)
	defer ticker.Stop()
	last := ""
	for {
		now, reason, err := read(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return fmt.Errorf("dbaas: waiting for %s to be %s (last %q): %w", id, status, last, ctx.Err())
		case err != nil:
			return err
		case now == status:
			return nil
		case now == "failed":
			return fmt.Errorf("%w: %s is failed (%s), not %s", ErrDatabaseFailed, id, reason, status)
		}
		last = now
		select {
		case <-ctx.Done():
			return fmt.Errorf("dbaas: waiting for %s to be %s (last %q): %w", id, status, last, ctx.Err())
		case <-ticker.C:
		}
	}
}
