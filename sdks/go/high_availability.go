package dbaas

import (
	"context"
	"net/http"
)

// GetHighAvailability returns a database's high availability: its standbys and mode, its members (the
// primary first) and its last failover (nil before the first).
func (c *Client) GetHighAvailability(ctx context.Context, databaseID string) (*HighAvailability, error) {
	var out HighAvailability
	_, err := c.call(ctx, request{method: http.MethodGet, path: pathf("/v1/databases/%s/high-availability", databaseID)}, &out)
	return result(&out, err)
}

// SetHighAvailability sets a database's standbys (0, 1 or 2, each on another host of its region, billed as
// compute) and synchronous mode (a commit returns once a standby has its WAL).
func (c *Client) SetHighAvailability(ctx context.Context, databaseID string, body SetHighAvailabilityRequest) (*HighAvailability, error) {
	var out HighAvailability
	_, err := c.call(ctx, request{method: http.MethodPut, path: pathf("/v1/databases/%s/high-availability", databaseID), body: body}, &out)
	return result(&out, err)
}

// Failover asks for a planned switchover to the database's healthiest standby (the connection string stays
// the same); it answers the failover operation, running until the standby runs as the primary.
func (c *Client) Failover(ctx context.Context, databaseID string) (*Operation, error) {
	var out Operation
	_, err := c.call(ctx, request{method: http.MethodPost, path: pathf("/v1/databases/%s/failover", databaseID)}, &out)
	return result(&out, err)
}
