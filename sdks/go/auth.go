package dbaas

import (
	"context"
	"encoding/json"
	"net/http"
)

// Signup creates a user and an organization (plan free) owned by it, and returns a login token.
func (c *Client) Signup(ctx context.Context, body SignupRequest) (*Signup, error) {
	var out Signup
	_, err := c.call(ctx, request{method: http.MethodPost, path: "/v1/auth/signup", body: body}, &out)
	return result(&out, err)
}

// Login logs in with e-mail and password (POST /v1/auth/token).
func (c *Client) Login(ctx context.Context, body LoginRequest) (*Token, error) {
	var out Token
	_, err := c.call(ctx, request{method: http.MethodPost, path: "/v1/auth/token", body: body}, &out)
	return result(&out, err)
}

// AcceptInvitation joins an organization with an invitation's one-time token (creating the user if new).
func (c *Client) AcceptInvitation(ctx context.Context, body AcceptInvitationRequest) (*Acceptance, error) {
	var out Acceptance
	_, err := c.call(ctx, request{method: http.MethodPost, path: "/v1/invitations/accept", body: body}, &out)
	return result(&out, err)
}

// OpenAPI returns the API's OpenAPI 3.1 document (not enveloped).
func (c *Client) OpenAPI(ctx context.Context) (json.RawMessage, error) {
	_, body, err := c.send(ctx, request{method: http.MethodGet, path: "/v1/openapi.json"})
	if err != nil {
		return nil, err
	}
	return json.RawMessage(body), nil
}
