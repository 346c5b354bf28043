package dbaas

import (
	"context"
	"net/http"
	"net/url"
)

// ListDatabasesOptions selects a page of databases, optionally only those in a status or region.
type ListDatabasesOptions struct {
	ListOptions
	Status string
	Region string
}

// CreateDatabase creates a database; its password is in this answer only.
func (c *Client) CreateDatabase(ctx context.Context, body CreateDatabaseRequest) (*CreatedDatabase, error) {
	var out CreatedDatabase
	_, err := c.call(ctx, request{method: http.MethodPost, path: "/v1/databases", body: body}, &out)
	return result(&out, err)
}

// ListDatabases returns one page of the organization's databases.
func (c *Client) ListDatabases(ctx context.Context, opts *ListDatabasesOptions) (*DatabasePage, error) {
	q := url.Values{}
	if opts != nil {
		q = opts.ListOptions.values()
		if opts.Status != "" {
			q.Set("status", opts.Status)
		}
		if opts.Region != "" {
			q.Set("region", opts.Region)
		}
	}
	var out DatabasePage
	meta, err := c.call(ctx, request{method: http.MethodGet, path: "/v1/databases", query: q}, &out)
	out.Meta = meta
	return result(&out, err)
}

// AllDatabases iterates over every database from opts.Page on (opts may be nil).
func (c *Client) AllDatabases(ctx context.Context, opts *ListDatabasesOptions) *Iterator[DatabaseListItem] {
	o := ListDatabasesOptions{}
	if opts != nil {
		o = *opts
	}
	return newIterator(ctx, o.Page, func(ctx context.Context, page int) ([]DatabaseListItem, ListMeta, error) {
		o.Page = page
		p, err := c.ListDatabases(ctx, &o)
		if err != nil {
			return nil, ListMeta{}, err
		}
		return p.Databases, p.Meta, nil
	})
}

// GetDatabase returns a database (the connection string's password masked).
func (c *Client) GetDatabase(ctx context.Context, id string) (*Database, error) {
	var out Database
	_, err := c.call(ctx, request{method: http.MethodGet, path: pathf("/v1/databases/%s", id)}, &out)
	return result(&out, err)
}

// UpdateDatabase renames a database.
func (c *Client) UpdateDatabase(ctx context.Context, id string, body UpdateDatabaseRequest) (*Database, error) {
	var out Database
	_, err := c.call(ctx, request{method: http.MethodPatch, path: pathf("/v1/databases/%s", id), body: body}, &out)
	return result(&out, err)
}

// DeleteDatabase deletes a database (its data is retained 7 days).
func (c *Client) DeleteDatabase(ctx context.Context, id string) error {
	_, err := c.call(ctx, request{method: http.MethodDelete, path: pathf("/v1/databases/%s", id)}, nil)
	return err
}

// StartDatabase starts a stopped database.
func (c *Client) StartDatabase(ctx context.Context, id string) (*DatabaseStatus, error) {
	return c.lifecycle(ctx, id, "start")
}

// StopDatabase stops a running database (compute billing stops).
func (c *Client) StopDatabase(ctx context.Context, id string) (*DatabaseStatus, error) {
	return c.lifecycle(ctx, id, "stop")
}

// RestartDatabase restarts a running database.
func (c *Client) RestartDatabase(ctx context.Context, id string) (*DatabaseStatus, error) {
	return c.lifecycle(ctx, id, "restart")
}

func (c *Client) lifecycle(ctx context.Context, id, action string) (*DatabaseStatus, error) {
	var out DatabaseStatus
	_, err := c.call(ctx, request{method: http.MethodPost, path: pathf("/v1/databases/%s/", id) + action}, &out)
	return result(&out, err)
}

// ResizeDatabase moves a database to another tier.
func (c *Client) ResizeDatabase(ctx context.Context, id string, body ResizeDatabaseRequest) (*ResizedDatabase, error) {
	var out ResizedDatabase
	_, err := c.call(ctx, request{method: http.MethodPost, path: pathf("/v1/databases/%s/resize", id), body: body}, &out)
	return result(&out, err)
}

// ResetPassword replaces a database's password; the old one stops working at once.
func (c *Client) ResetPassword(ctx context.Context, id string) (*Credentials, error) {
	var out Credentials
	_, err := c.call(ctx, request{method: http.MethodPost, path: pathf("/v1/databases/%s/reset-password", id)}, &out)
	return result(&out, err)
}

// ListOperations returns one page of the operations run on a database.
func (c *Client) ListOperations(ctx context.Context, id string, opts *ListOptions) (*OperationPage, error) {
	var out OperationPage
	meta, err := c.call(ctx, request{method: http.MethodGet, path: pathf("/v1/databases/%s/operations", id), query: opts.values()}, &out)
	out.Meta = meta
	return result(&out, err)
}

// AllOperations iterates over every operation run on a database.
func (c *Client) AllOperations(ctx context.Context, id string, opts *ListOptions) *Iterator[Operation] {
	return pages(ctx, opts, func(ctx context.Context, o *ListOptions) ([]Operation, ListMeta, error) {
		p, err := c.ListOperations(ctx, id, o)
		if err != nil {
			return nil, ListMeta{}, err
		}
		return p.Operations, p.Meta, nil
	})
}

// GetCACertificate returns the PEM of the CA that signs the database's server certificate.
func (c *Client) GetCACertificate(ctx context.Context, id string) (string, error) {
	_, body, err := c.send(ctx, request{method: http.MethodGet, path: pathf("/v1/databases/%s/ca-certificate", id)})
	return string(body), err
}

// ListRegions returns the regions a database can be created in.
func (c *Client) ListRegions(ctx context.Context) ([]Region, error) {
	var out Regions
	_, err := c.call(ctx, request{method: http.MethodGet, path: "/v1/regions"}, &out)
	return out.Regions, err
}

// ListTiers returns the instance tiers and their hourly prices.
func (c *Client) ListTiers(ctx context.Context) ([]Tier, error) {
	var out Tiers
	_, err := c.call(ctx, request{method: http.MethodGet, path: "/v1/tiers"}, &out)
	return out.Tiers, err
}

// ListVersions returns the PostgreSQL versions a database can run.
func (c *Client) ListVersions(ctx context.Context) ([]Version, error) {
	var out Versions
	_, err := c.call(ctx, request{method: http.MethodGet, path: "/v1/versions"}, &out)
	return out.Versions, err
}

// result returns (out, nil), or (nil, err) so a failed call never yields a half-filled value.
func result[T any](out *T, err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	return out, nil
}

// pages iterates over a plain paged list from opts.Page on.
func pages[T any](ctx context.Context, opts *ListOptions, list func(context.Context, *ListOptions) ([]T, ListMeta, error)) *Iterator[T] {
	o := ListOptions{}
	if opts != nil {
		o = *opts
	}
	return newIterator(ctx, o.Page, func(ctx context.Context, page int) ([]T, ListMeta, error) {
		o.Page = page
		return list(ctx, &o)
	})
}
