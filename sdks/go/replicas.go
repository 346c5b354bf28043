package dbaas

import (
	"context"
	"net/http"
)

// ListReplicas returns one page of a database's read replicas (opts may be nil).
func (c *Client) ListReplicas(ctx context.Context, databaseID string, opts *ListOptions) (*ReplicaPage, error) {
	var out ReplicaPage
	path := pathf("/v1/databases/%s/replicas", databaseID)
	meta, err := c.call(ctx, request{method: http.MethodGet, path: path, query: opts.values()}, &out)
	out.Meta = meta
	return result(&out, err)
}

// AllReplicas iterates over every read replica of a database.
func (c *Client) AllReplicas(ctx context.Context, databaseID string, opts *ListOptions) *Iterator[Replica] {
	return pages(ctx, opts, func(ctx context.Context, o *ListOptions) ([]Replica, ListMeta, error) {
		p, err := c.ListReplicas(ctx, databaseID, o)
		if err != nil {
			return nil, ListMeta{}, err
		}
		return p.Replicas, p.Meta, nil
	})
}

// CreateReplica creates a read replica of a running database (status provisioning). At most 5
// per database; a replica is billed, so the organization needs a payment method (402 otherwise).
func (c *Client) CreateReplica(ctx context.Context, databaseID string, body CreateReplicaRequest) (*Replica, error) {
	var out Replica
	_, err := c.call(ctx, request{method: http.MethodPost, path: pathf("/v1/databases/%s/replicas", databaseID), body: body}, &out)
	return result(&out, err)
}

// GetReplica returns a read replica of a database.
func (c *Client) GetReplica(ctx context.Context, databaseID, replicaID string) (*Replica, error) {
	var out Replica
	_, err := c.call(ctx, request{method: http.MethodGet, path: pathf("/v1/databases/%s/replicas/%s", databaseID, replicaID)}, &out)
	return result(&out, err)
}

// DeleteReplica deletes a read replica; its data goes at once.
func (c *Client) DeleteReplica(ctx context.Context, databaseID, replicaID string) error {
	_, err := c.call(ctx, request{method: http.MethodDelete, path: pathf("/v1/databases/%s/replicas/%s", databaseID, replicaID)}, nil)
	return err
}

// PromoteReplica turns a running replica into an independent, writable database (a new "db-" id,
// the primary's credentials, no password in the answer); the replica is gone.
func (c *Client) PromoteReplica(ctx context.Context, databaseID, replicaID string) (*Database, error) {
	var out Database
	path := pathf("/v1/databases/%s/replicas/%s/promote", databaseID, replicaID)
	_, err := c.call(ctx, request{method: http.MethodPost, path: path}, &out)
	return result(&out, err)
}
