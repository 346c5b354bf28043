package dbaas

import (
	"context"
	"net/http"
)

// GetOrganization returns the caller's organization.
func (c *Client) GetOrganization(ctx context.Context) (*Organization, error) {
	var out Organization
	_, err := c.call(ctx, request{method: http.MethodGet, path: "/v1/organization"}, &out)
	return result(&out, err)
}

// UpdateOrganization renames the organization or changes its plan.
func (c *Client) UpdateOrganization(ctx context.Context, body UpdateOrganizationRequest) (*Organization, error) {
	var out Organization
	_, err := c.call(ctx, request{method: http.MethodPatch, path: "/v1/organization", body: body}, &out)
	return result(&out, err)
}

// DeleteOrganization deletes the organization, its members, invitations and API keys (only without live databases).
func (c *Client) DeleteOrganization(ctx context.Context) error {
	_, err := c.call(ctx, request{method: http.MethodDelete, path: "/v1/organization"}, nil)
	return err
}

// ListMembers returns one page of the organization's members.
func (c *Client) ListMembers(ctx context.Context, opts *ListOptions) (*MemberPage, error) {
	var out MemberPage
	meta, err := c.call(ctx, request{method: http.MethodGet, path: "/v1/organization/members", query: opts.values()}, &out)
	out.Meta = meta
	return result(&out, err)
}

// AllMembers iterates over every member.
func (c *Client) AllMembers(ctx context.Context, opts *ListOptions) *Iterator[Member] {
	return pages(ctx, opts, func(ctx context.Context, o *ListOptions) ([]Member, ListMeta, error) {
		p, err := c.ListMembers(ctx, o)
		if err != nil {
			return nil, ListMeta{}, err
		}
		return p.Members, p.Meta, nil
	})
}

// InviteMember invites someone by e-mail; the invitation is valid 7 days.
func (c *Client) InviteMember(ctx context.Context, body InviteMemberRequest) (*Invitation, error) {
	var out Invitation
	_, err := c.call(ctx, request{method: http.MethodPost, path: "/v1/organization/members", body: body}, &out)
	return result(&out, err)
}

// UpdateMember changes a member's role.
func (c *Client) UpdateMember(ctx context.Context, id string, body UpdateMemberRequest) (*Member, error) {
	var out Member
	_, err := c.call(ctx, request{method: http.MethodPatch, path: pathf("/v1/organization/members/%s", id), body: body}, &out)
	return result(&out, err)
}

// RemoveMember removes a member; their sessions end at once.
func (c *Client) RemoveMember(ctx context.Context, id string) error {
	_, err := c.call(ctx, request{method: http.MethodDelete, path: pathf("/v1/organization/members/%s", id)}, nil)
	return err
}

// ListInvitations returns one page of pending or expired invitations.
func (c *Client) ListInvitations(ctx context.Context, opts *ListOptions) (*InvitationPage, error) {
	var out InvitationPage
	meta, err := c.call(ctx, request{method: http.MethodGet, path: "/v1/organization/invitations", query: opts.values()}, &out)
	out.Meta = meta
	return result(&out, err)
}

// AllInvitations iterates over every pending or expired invitation.
func (c *Client) AllInvitations(ctx context.Context, opts *ListOptions) *Iterator[Invitation] {
	return pages(ctx, opts, func(ctx context.Context, o *ListOptions) ([]Invitation, ListMeta, error) {
		p, err := c.ListInvitations(ctx, o)
		if err != nil {
			return nil, ListMeta{}, err
		}
		return p.Invitations, p.Meta, nil
	})
}

// CancelInvitation cancels an invitation; its link stops working.
func (c *Client) CancelInvitation(ctx context.Context, id string) error {
	_, err := c.call(ctx, request{method: http.MethodDelete, path: pathf("/v1/organization/invitations/%s", id)}, nil)
	return err
}

// TransferOwnership makes another member owner (owner only; the caller becomes admin).
func (c *Client) TransferOwnership(ctx context.Context, body TransferOwnershipRequest) (*Transfer, error) {
	var out Transfer
	_, err := c.call(ctx, request{method: http.MethodPost, path: "/v1/organization/transfer", body: body}, &out)
	return result(&out, err)
}
