import type { Body, Schemas } from "@dbaas/client";
import { ROLE_SCOPES, SCOPES, type Scope as CatalogueScope } from "@dbaas/catalogue/scopes";
import type { MemberRole } from "./access.ts";
import { expiresAtFromInput } from "./network.ts";

/**
 * The organization's settings and API keys' forms: which scopes a key may be given, what the create form
 * sends, who may change what. The API is the judge (a scope beyond the role is its 422, beyond the calling
 * credential its 403); the console offers only what the signed-in member's role allows.
 */
export type Scope = Schemas["ApiKey"]["scopes"][number];

/**
 * The API's scopes in their canonical order; what each role allows is the catalogue's ROLE_SCOPES. Both are the
 * catalogue's own (services/catalogue/src/scopes.ts, which identity enforces), bundled from its import-free
 * `@dbaas/catalogue/scopes`, not copied.
 */
export { SCOPES };

// The client's scopes (the API document's) and the catalogue's are the same names: either gaining one fails the type check.
const sameScopes: [Exclude<Scope, CatalogueScope>, Exclude<CatalogueScope, Scope>] extends [never, never] ? true : false = true;
void sameScopes;

/** The scopes a key of this member can have: their role's (every scope while the role is not known: the API decides). */
export function scopesFor(role: MemberRole | undefined): readonly Scope[] {
  return role ? ROLE_SCOPES[role] : SCOPES;
}

/**
 * The create-key request: the scopes ticked, in canonical order (none ticked: none sent, and the key gets
 * every scope the role allows), and the expiry picked in the user's time zone sent in UTC (none: never).
 */
export function apiKeyRequest(name: string, ticked: readonly string[], expires: string): Body<"createApiKey"> {
  const scopes = SCOPES.filter((s) => ticked.includes(s));
  const expiresAt = expiresAtFromInput(expires);
  return {
    name,
    ...(scopes.length > 0 && { scopes }),
    ...(expiresAt !== undefined && { expires_at: expiresAt }),
  };
}

/**
 * Whether a key is past its expiry at `now` (ms). The API lists such a key like a live one (only a revoked key
 * leaves the list) and refuses it (401 "API key expired" from `expires_at` on): the console tells them apart
 * from `expires_at` itself, as identity does (expired once `expires_at` <= now).
 */
export const keyExpired = (expiresAt: string | null, now: number): boolean => expiresAt !== null && Date.parse(expiresAt) <= now;

/** The soonest expiry still ahead of `now` among `keys` (ms), when the list next changes by itself; undefined: none. */
export function nextExpiry(keys: readonly { expires_at: string | null }[], now: number): number | undefined {
  const ahead = keys.map((k) => (k.expires_at === null ? Number.NaN : Date.parse(k.expires_at))).filter((at) => at > now);
  return ahead.length > 0 ? Math.min(...ahead) : undefined;
}

/** The plans a customer can choose (`internal` is set by support only). */
export const PLANS = ["free", "pro", "enterprise"] as const satisfies readonly Schemas["Organization"]["plan"][];

/** Renaming needs settings:write (owner, admin); while the role is not known the controls stay enabled (the API decides). */
export const canChangeSettings = (role: MemberRole | undefined): boolean =>
  role === undefined || ROLE_SCOPES[role].includes("settings:write");

/** Inviting, changing a member's role and removing one need members:write (owner, admin); unknown role: enabled. */
export const canManageMembers = (role: MemberRole | undefined): boolean =>
  role === undefined || ROLE_SCOPES[role].includes("members:write");

/** The plan is billing (billing:write) and deleting the organization is the owner's alone. */
export const isOwner = (role: MemberRole | undefined): boolean => role === undefined || role === "owner";
