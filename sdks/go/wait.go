package dbaas

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrDatabaseFailed is wrapped by WaitForStatus's error when the database became failed instead.
var ErrDatabaseFailed = errors.New("dbaas: the database failed")

// WaitForStatus polls a database until its status is status (e.g. "running") and returns it. It
// gives up when ctx ends (or, when ctx has no deadline, after the client's wait timeout, 10 min by
// default) with an error wrapping context.DeadlineExceeded, and when the database becomes
// "failed" with one wrapping ErrDatabaseFailed.
func (c *Client) WaitForStatus(ctx context.Context, id, status string) (*Database, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.waitTimeout)
		defer cancel()
	}
	ticker := time.NewTicker(c.pollInterval)
	defer ticker.Stop()
	last := ""
	for {
		db, err := c.GetDatabase(ctx, id)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, fmt.Errorf("dbaas: waiting for %s to be %s (last %q): %w", id, status, last, ctx.Err())
		case err != nil:
			return nil, err
		case db.Status == status:
			return db, nil
		case db.Status == "failed":
			return db, fmt.Errorf("%w: %s is failed (%s), not %s", ErrDatabaseFailed, id, db.StatusReason, status)
		}
		last = db.Status
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("dbaas: waiting for %s to be %s (last %q): %w", id, status, last, ctx.Err())
		case <-ticker.C:
		}
	}
}
