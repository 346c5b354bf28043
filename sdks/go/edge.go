package dbaas

import (
	"context"
	"net/http"
)

// ListTrustedSources returns one page of the addresses allowed to connect to a database, its
// pooler and its replicas (opts may be nil). An empty list admits every address.
func (c *Client) ListTrustedSources(ctx context.Context, databaseID string, opts *ListOptions) (*TrustedSourcePage, error) {
	var out TrustedSourcePage
	path := pathf("/v1/databases/%s/trusted-sources", databaseID)
	meta, err := c.call(ctx, request{method: http.MethodGet, path: path, query: opts.values()}, &out)
	out.Meta = meta
	return result(&out, err)
}

// AllTrustedSources iterates over every trusted source of a database.
func (c *Client) AllTrustedSources(ctx context.Context, databaseID string, opts *ListOptions) *Iterator[TrustedSource] {
	return pages(ctx, opts, func(ctx context.Context, o *ListOptions) ([]TrustedSource, ListMeta, error) {
		p, err := c.ListTrustedSources(ctx, databaseID, o)
		if err != nil {
			return nil, ListMeta{}, err
		}
		return p.TrustedSources, p.Meta, nil
	})
}

// AddTrustedSource admits an IPv4 or IPv6 address or network (ExpiresAt: for a while only); any
// other address is refused within 5 seconds. At most 50 per database; a CIDR with host bits set is
// a 422 naming the network meant.
func (c *Client) AddTrustedSource(ctx context.Context, databaseID string, body CreateTrustedSourceRequest) (*TrustedSource, error) {
	var out TrustedSource
	_, err := c.call(ctx, request{method: http.MethodPost, path: pathf("/v1/databases/%s/trusted-sources", databaseID), body: body}, &out)
	return result(&out, err)
}

// RemoveTrustedSource removes a trusted source of a database.
func (c *Client) RemoveTrustedSource(ctx context.Context, databaseID, trustedSourceID string) error {
	path := pathf("/v1/databases/%s/trusted-sources/%s", databaseID, trustedSourceID)
	_, err := c.call(ctx, request{method: http.MethodDelete, path: path}, nil)
	return err
}

// GetPooler returns the database's connection pooler (PgBouncer): its host, port, mode and pool
// size; Enabled false with a Reason where its host cannot run one.
func (c *Client) GetPooler(ctx context.Context, databaseID string) (*Pooler, error) {
	var out Pooler
	_, err := c.call(ctx, request{method: http.MethodGet, path: pathf("/v1/databases/%s/pooler", databaseID)}, &out)
	return result(&out, err)
}

// UpdatePooler enables or disables the pooler, or changes its mode or pool size.
func (c *Client) UpdatePooler(ctx context.Context, databaseID string, body UpdatePoolerRequest) (*Pooler, error) {
	var out Pooler
	_, err := c.call(ctx, request{method: http.MethodPatch, path: pathf("/v1/databases/%s/pooler", databaseID), body: body}, &out)
	return result(&out, err)
}
