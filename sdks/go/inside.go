package dbaas

import (
	"context"
	"net/http"
	"net/url"
)

// Inside a database: its roles and logical databases, read from and changed on the running server
// (409 while it is not running).

// ListRoles returns one page of a database's roles, by name, dbadmin included (opts may be nil).
func (c *Client) ListRoles(ctx context.Context, databaseID string, opts *ListOptions) (*RolePage, error) {
	var out RolePage
	meta, err := c.call(ctx, request{method: http.MethodGet, path: pathf("/v1/databases/%s/roles", databaseID), query: opts.values()}, &out)
	out.Meta = meta
	return result(&out, err)
}

// AllRoles iterates over every role of a database.
func (c *Client) AllRoles(ctx context.Context, databaseID string, opts *ListOptions) *Iterator[Role] {
	return pages(ctx, opts, func(ctx context.Context, o *ListOptions) ([]Role, ListMeta, error) {
		p, err := c.ListRoles(ctx, databaseID, o)
		if err != nil {
			return nil, ListMeta{}, err
		}
		return p.Roles, p.Meta, nil
	})
}

// CreateRole creates a LOGIN role (never superuser) with a generated password, in the answer only.
func (c *Client) CreateRole(ctx context.Context, databaseID string, body CreateRoleRequest) (*CreatedRole, error) {
	var out CreatedRole
	_, err := c.call(ctx, request{method: http.MethodPost, path: pathf("/v1/databases/%s/roles", databaseID), body: body}, &out)
	return result(&out, err)
}

// DeleteRole drops a role and ends its sessions (409 while it owns objects; dbadmin cannot go).
func (c *Client) DeleteRole(ctx context.Context, databaseID, name string) error {
	_, err := c.call(ctx, request{method: http.MethodDelete, path: pathf("/v1/databases/%s/roles/%s", databaseID, name)}, nil)
	return err
}

// ResetRolePassword gives a role a new password; the old one and its sessions end before the answer.
func (c *Client) ResetRolePassword(ctx context.Context, databaseID, name string) (*CreatedRole, error) {
	var out CreatedRole
	_, err := c.call(ctx, request{method: http.MethodPost, path: pathf("/v1/databases/%s/roles/%s/reset-password", databaseID, name)}, &out)
	return result(&out, err)
}

// ListDbs returns one page of the server's logical databases, by name (opts may be nil).
func (c *Client) ListDbs(ctx context.Context, databaseID string, opts *ListOptions) (*DbPage, error) {
	var out DbPage
	meta, err := c.call(ctx, request{method: http.MethodGet, path: pathf("/v1/databases/%s/dbs", databaseID), query: opts.values()}, &out)
	out.Meta = meta
	return result(&out, err)
}

// AllDbs iterates over every logical database of a database's server.
func (c *Client) AllDbs(ctx context.Context, databaseID string, opts *ListOptions) *Iterator[LogicalDb] {
	return pages(ctx, opts, func(ctx context.Context, o *ListOptions) ([]LogicalDb, ListMeta, error) {
		p, err := c.ListDbs(ctx, databaseID, o)
		if err != nil {
			return nil, ListMeta{}, err
		}
		return p.Dbs, p.Meta, nil
	})
}

// CreateDb creates a logical database owned by body.Owner (default dbadmin).
func (c *Client) CreateDb(ctx context.Context, databaseID string, body CreateDbRequest) (*LogicalDb, error) {
	var out LogicalDb
	_, err := c.call(ctx, request{method: http.MethodPost, path: pathf("/v1/databases/%s/dbs", databaseID), body: body}, &out)
	return result(&out, err)
}

// DeleteDb drops a logical database (409 for defaultdb, or while it has connections).
func (c *Client) DeleteDb(ctx context.Context, databaseID, name string) error {
	_, err := c.call(ctx, request{method: http.MethodDelete, path: pathf("/v1/databases/%s/dbs/%s", databaseID, name)}, nil)
	return err
}

// GetConfig returns a database's configuration: every parameter that can be changed, with its value,
// default, unit, type, bounds and restart flags.
func (c *Client) GetConfig(ctx context.Context, databaseID string) (*Config, error) {
	var out Config
	_, err := c.call(ctx, request{method: http.MethodGet, path: pathf("/v1/databases/%s/config", databaseID)}, &out)
	return result(&out, err)
}

// UpdateConfig changes parameters, all or nothing (a nil value sets one back to its default); a running
// database answers once its server has them.
func (c *Client) UpdateConfig(ctx context.Context, databaseID string, body UpdateConfigRequest) (*Config, error) {
	var out Config
	_, err := c.call(ctx, request{method: http.MethodPatch, path: pathf("/v1/databases/%s/config", databaseID), body: body}, &out)
	return result(&out, err)
}

// ExtensionsOptions names the logical database (default defaultdb) and the page; it may be nil.
type ExtensionsOptions struct {
	ListOptions
	Db string
}

// ListExtensions returns one page of what the server's binaries offer, installed or not in the logical database.
func (c *Client) ListExtensions(ctx context.Context, databaseID string, opts *ExtensionsOptions) (*ExtensionPage, error) {
	var out ExtensionPage
	q := url.Values{}
	if opts != nil {
		q = opts.ListOptions.values()
		if opts.Db != "" {
			q.Set("db", opts.Db)
		}
	}
	meta, err := c.call(ctx, request{method: http.MethodGet, path: pathf("/v1/databases/%s/extensions", databaseID), query: q}, &out)
	out.Meta = meta
	return result(&out, err)
}

// AllExtensions iterates over every extension the server offers.
func (c *Client) AllExtensions(ctx context.Context, databaseID string, opts *ListOptions) *Iterator[Extension] {
	return pages(ctx, opts, func(ctx context.Context, o *ListOptions) ([]Extension, ListMeta, error) {
		var eo *ExtensionsOptions
		if o != nil {
			eo = &ExtensionsOptions{ListOptions: *o}
		}
		p, err := c.ListExtensions(ctx, databaseID, eo)
		if err != nil {
			return nil, ListMeta{}, err
		}
		return p.Extensions, p.Meta, nil
	})
}

// InstallExtension installs an extension of the allowlist as superuser (422 for any other).
func (c *Client) InstallExtension(ctx context.Context, databaseID string, body InstallExtensionRequest) (*Extension, error) {
	var out Extension
	_, err := c.call(ctx, request{method: http.MethodPost, path: pathf("/v1/databases/%s/extensions", databaseID), body: body}, &out)
	return result(&out, err)
}

// DeleteExtension drops an extension from the logical database db ("" for defaultdb).
func (c *Client) DeleteExtension(ctx context.Context, databaseID, name, db string) error {
	q := url.Values{}
	if db != "" {
		q.Set("db", db)
	}
	_, err := c.call(ctx, request{method: http.MethodDelete, path: pathf("/v1/databases/%s/extensions/%s", databaseID, name), query: q}, nil)
	return err
}
