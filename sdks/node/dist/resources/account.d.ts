import type { PageIterator } from "../pages.ts";
import type { RequestOptions } from "../transport.ts";
import type { Body, Query, Schemas } from "../types.ts";
import { Resource } from "./base.ts";
/**
 * Sign-up, log-in and joining by invitation (no credential needed):
 * `client.auth`. Each answer carries an `access_token`; pass it to the client
 * with `client.setToken(...)` to act as that user.
 */
export declare class Auth extends Resource {
    /** Creates a user and an organization (plan free) owned by it. */
    signup(body: Body<"signup">, opts?: RequestOptions): Promise<Schemas["Signup"]>;
    /** Logs in with e-mail and password. */
    login(body: Body<"token">, opts?: RequestOptions): Promise<Schemas["Token"]>;
    /** Accepts an invitation with its one-time token: joins (creating the user if new). */
    acceptInvitation(body: Body<"acceptInvitation">, opts?: RequestOptions): Promise<Schemas["Acceptance"]>;
}
/** The caller's organization, its members and invitations: `client.organization`. */
export declare class Organization extends Resource {
    get(opts?: RequestOptions): Promise<Schemas["Organization"]>;
    /** Renames the organization or changes its plan. */
    update(body: Body<"updateOrganization">, opts?: RequestOptions): Promise<Schemas["Organization"]>;
    /** Deletes the organization (owner only, without live databases). */
    delete(opts?: RequestOptions): Promise<void>;
    listMembers(query?: Query<"listMembers">, opts?: RequestOptions): PageIterator<Schemas["Member"]>;
    /** Invites someone by e-mail; returns the pending invitation. */
    inviteMember(body: Body<"inviteMember">, opts?: RequestOptions): Promise<Schemas["Invitation"]>;
    /** Changes a member's role. */
    updateMember(memberId: string, body: Body<"updateMember">, opts?: RequestOptions): Promise<Schemas["Member"]>;
    removeMember(memberId: string, opts?: RequestOptions): Promise<void>;
    listInvitations(query?: Query<"listInvitations">, opts?: RequestOptions): PageIterator<Schemas["Invitation"]>;
    cancelInvitation(invitationId: string, opts?: RequestOptions): Promise<void>;
    /** Owner only: makes another member owner (the caller becomes admin). */
    transferOwnership(body: Body<"transferOwnership">, opts?: RequestOptions): Promise<Schemas["Transfer"]>;
}
/** API keys: `client.apiKeys`. */
export declare class ApiKeys extends Resource {
    /** The caller's keys (every key of the organization for owner and admin), never their secrets. */
    list(query?: Query<"listApiKeys">, opts?: RequestOptions): PageIterator<Schemas["ApiKey"]>;
    /** Creates a key; its `secret` is in this answer only. */
    create(body: Body<"createApiKey">, opts?: RequestOptions): Promise<Schemas["CreatedApiKey"]>;
    /** Revokes a key at once. */
    revoke(keyId: string, opts?: RequestOptions): Promise<void>;
}
