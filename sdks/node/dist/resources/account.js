import { data, none, paged, Resource, seg } from "./base.js";
/**
 * Sign-up, log-in and joining by invitation (no credential needed):
 * `client.auth`. Each answer carries an `access_token`; pass it to the client
 * with `client.setToken(...)` to act as that user.
 */
export class Auth extends Resource {
    /** Creates a user and an organization (plan free) owned by it. */
    signup(body, opts) {
        return data(this, "POST", "/v1/auth/signup", body, opts);
    }
    /** Logs in with e-mail and password. */
    login(body, opts) {
        return data(this, "POST", "/v1/auth/token", body, opts);
    }
    /** Accepts an invitation with its one-time token: joins (creating the user if new). */
    acceptInvitation(body, opts) {
        return data(this, "POST", "/v1/invitations/accept", body, opts);
    }
}
/** The caller's organization, its members and invitations: `client.organization`. */
export class Organization extends Resource {
    get(opts) {
        return data(this, "GET", "/v1/organization", undefined, opts);
    }
    /** Renames the organization or changes its plan. */
    update(body, opts) {
        return data(this, "PATCH", "/v1/organization", body, opts);
    }
    /** Deletes the organization (owner only, without live databases). */
    delete(opts) {
        return none(this, "DELETE", "/v1/organization", opts);
    }
    listMembers(query, opts) {
        return paged(this, "/v1/organization/members", "members", query, opts);
    }
    /** Invites someone by e-mail; returns the pending invitation. */
    inviteMember(body, opts) {
        return data(this, "POST", "/v1/organization/members", body, opts);
    }
    /** Changes a member's role. */
    updateMember(memberId, body, opts) {
        return data(this, "PATCH", `/v1/organization/members/${seg(memberId)}`, body, opts);
    }
    removeMember(memberId, opts) {
        return none(this, "DELETE", `/v1/organization/members/${seg(memberId)}`, opts);
    }
    listInvitations(query, opts) {
        return paged(this, "/v1/organization/invitations", "invitations", query, opts);
    }
    cancelInvitation(invitationId, opts) {
        return none(this, "DELETE", `/v1/organization/invitations/${seg(invitationId)}`, opts);
    }
    /** Owner only: makes another member owner (the caller becomes admin). */
    transferOwnership(body, opts) {
        return data(this, "POST", "/v1/organization/transfer", body, opts);
    }
}
/** API keys: `client.apiKeys`. */
export class ApiKeys extends Resource {
    /** The caller's keys (every key of the organization for owner and admin), never their secrets. */
    list(query, opts) {
        return paged(this, "/v1/organization/api-keys", "api_keys", query, opts);
    }
    /** Creates a key; its `secret` is in this answer only. */
    create(body, opts) {
        return data(this, "POST", "/v1/organization/api-keys", body, opts);
    }
    /** Revokes a key at once. */
    revoke(keyId, opts) {
        return none(this, "DELETE", `/v1/organization/api-keys/${seg(keyId)}`, opts);
    }
}
