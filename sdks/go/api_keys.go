package dbaas

import (
	"context"
	"net/http"
)

// ListAPIKeys returns one page of API keys: the caller's own, or everyone's for owners and admins.
func (c *Client) ListAPIKeys(ctx context.Context, opts *ListOptions) (*APIKeyPage, error) {
	var out APIKeyPage
	meta, err := c.call(ctx, request{method: http.MethodGet, path: "/v1/organization/api-keys", query: opts.values()}, &out)
	out.Meta = meta
	return result(&out, err)
}

// AllAPIKeys iterates over every API key the caller may see.
func (c *Client) AllAPIKeys(ctx context.Context, opts *ListOptions) *Iterator[APIKey] {
	return pages(ctx, opts, func(ctx context.Context, o *ListOptions) ([]APIKey, ListMeta, error) {
		p, err := c.ListAPIKeys(ctx, o)
		if err != nil {
			return nil, ListMeta{}, err
		}
		return p.APIKeys, p.Meta, nil
	})
}

// CreateAPIKey creates an API key; its secret is in this answer only.
func (c *Client) CreateAPIKey(ctx context.Context, body CreateAPIKeyRequest) (*CreatedAPIKey, error) {
	var out CreatedAPIKey
	_, err := c.call(ctx, request{method: http.MethodPost, path: "/v1/organization/api-keys", body: body}, &out)
	return result(&out, err)
}

// RevokeAPIKey revokes an API key at once.
func (c *Client) RevokeAPIKey(ctx context.Context, id string) error {
	_, err := c.call(ctx, request{method: http.MethodDelete, path: pathf("/v1/organization/api-keys/%s", id)}, nil)
	return err
}
