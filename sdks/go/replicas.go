package dbaas

import (
	"context"
	"net/http"
	"time"
)

// Replica is a read replica of a database: a read-only hot standby streaming from it, reached with
// the database's own username and password.
type Replica struct {
	ID               string    `json:"id"`
	Name             string    `json:"name"`
	DatabaseID       string    `json:"database_id"` // the primary
	Region           string    `json:"region"`
	Tier             string    `json:"tier"`
	Status           string    `json:"status"` // provisioning, running, starting, stopping, stopped, failed
	StatusReason     string    `json:"status_reason,omitempty"`
	Host             string    `json:"host"`
	Port             int       `json:"port"`
	Database         string    `json:"database"`
	Username         string    `json:"username"`
	ConnectionString string    `json:"connection_string"` // password masked: the database's works
	LagBytes         int64     `json:"lag_bytes"`         // WAL not yet replayed, as last measured
	CreatedAt        time.Time `json:"created_at"`
}

// ReplicaPage is one page of a database's read replicas.
type ReplicaPage struct {
	Replicas []Replica `json:"replicas"`
	Meta     ListMeta  `json:"-"`
}

// CreateReplicaRequest is the body of CreateReplica; empty Tier and Region take the database's.
type CreateReplicaRequest struct {
	Name   string `json:"name"`
	Tier   string `json:"tier,omitempty"`
	Region string `json:"region,omitempty"`
}

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
