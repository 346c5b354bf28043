package dbaas

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// User is a user of the service.
type User struct {
	ID    string `json:"id"`
	Email string `json:"email"`
	Name  string `json:"name"`
}

// Token is a login token: pass AccessToken to WithToken.
type Token struct {
	AccessToken string    `json:"access_token"`
	TokenType   string    `json:"token_type"` // "Bearer"
	ExpiresAt   time.Time `json:"expires_at"` // 1 hour after issue
}

// Signup is the new user, their organization and a login token.
type Signup struct {
	User         User         `json:"user"`
	Organization Organization `json:"organization"`
	Token
}

// Acceptance is the organization joined by accepting an invitation, the new membership and a login token.
type Acceptance struct {
	Organization Organization `json:"organization"`
	Member       Member       `json:"member"`
	Token
}

// SignupRequest is the body of Signup.
type SignupRequest struct {
	Email            string `json:"email"`
	Password         string `json:"password"`
	Name             string `json:"name"`
	OrganizationName string `json:"organization_name"`
}

// LoginRequest is the body of Login; OrganizationID empty means the user's oldest membership.
type LoginRequest struct {
	Email          string `json:"email"`
	Password       string `json:"password"`
	OrganizationID string `json:"organization_id,omitempty"`
}

// AcceptInvitationRequest is the body of AcceptInvitation; Name is needed for a new user.
type AcceptInvitationRequest struct {
	Token    string `json:"token"`
	Name     string `json:"name,omitempty"`
	Password string `json:"password"`
}

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
