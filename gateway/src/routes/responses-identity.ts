import { ROLES, SCOPES, SUPPORT_PLANS } from "@dbaas/catalogue";
import type {
  AcceptInvitationResponse,
  ApiKey,
  CreateApiKeyResponse,
  Invitation,
  Member,
  Organization,
  SignupResponse,
  Token,
  TransferOwnershipResponse,
  User,
} from "@dbaas/proto/identity";
import { iso, planName, present, roleName } from "./mappers.ts";
import { arrayOf, dateTime, field, fieldsOf, id, nullableDateTime, oneOf, record, ref, str, through } from "./record.ts";

/*
 * The records of the organization, its members, invitations and API keys,
 * and of signing in (record.ts), spread into responses.ts's index.
 */

// Every plan an organization can be on: `internal` is set by support only, for our own tooling.
const PLANS = SUPPORT_PLANS;
const role = oneOf(ROLES);

/** An organization as every route shows it. */
export const ORGANIZATION = record<Organization>("An organization.")({
  id: field(id("org-"), (org) => org.id),
  name: field(str(), (org) => org.name),
  plan: field(oneOf(PLANS, "Rate limits follow the plan."), planName),
  created_at: field(dateTime(), (org) => iso(org.createdAt)),
});

export const USER = record<User>("A user.")({
  id: field(id("user-"), (u) => u.id),
  email: field(str(), (u) => u.email),
  name: field(str(), (u) => u.name),
});

export const MEMBER = record<Member>("A member of the organization.")({
  id: field(id("member-"), (m) => m.id),
  user: field(ref("User"), (m) => USER.map(present(m.user, "member.user"))),
  role: field(role, (m) => roleName(m.role)),
  joined_at: field(dateTime(), (m) => iso(m.joinedAt)),
});

export const INVITATION = record<Invitation>("An invitation.")({
  id: field(id("invite-"), (i) => i.id),
  email: field(str(), (i) => i.email),
  role: field(role, (i) => roleName(i.role)),
  status: field(oneOf(["pending", "expired"]), (i) => i.status),
  expires_at: field(dateTime(), (i) => iso(i.expiresAt)),
  created_at: field(dateTime(), (i) => iso(i.createdAt)),
});

/** 200 `{owner, previous_owner}`: both member records as they are after the transfer. */
export const TRANSFER = record<TransferOwnershipResponse>("Both member records after an ownership transfer.")({
  owner: field(ref("Member"), (res) => MEMBER.map(present(res.owner, "owner"))),
  previous_owner: field(ref("Member"), (res) => MEMBER.map(present(res.previousOwner, "previous_owner"))),
});

const API_KEY_FIELDS = fieldsOf<ApiKey>()({
  id: field(id("key-"), (key) => key.id),
  name: field(str(), (key) => key.name),
  scopes: field(arrayOf(oneOf(SCOPES)), (key) => key.scopes),
  prefix: field(str("First characters of the secret, to recognise it."), (key) => key.prefix),
  role: field(oneOf(ROLES, "The creator's role when the key was created; the key keeps it."), (key) => roleName(key.role)),
  created_by: field(str("User id of the creator."), (key) => key.createdBy),
  created_at: field(dateTime(), (key) => iso(key.createdAt)),
  expires_at: field(nullableDateTime("Null: never expires."), (key) => iso(key.expiresAt)),
});

export const API_KEY = record<ApiKey>("An API key (never its secret).")(API_KEY_FIELDS.fields);

export const CREATED_API_KEY = record<CreateApiKeyResponse>("A new API key with its secret, shown this once.")({
  ...through((res: CreateApiKeyResponse) => present(res.apiKey, "api_key"), API_KEY_FIELDS.fields),
  secret: field(str("The key itself, for `Authorization: Bearer`."), (res) => res.secret),
});

const TOKEN_FIELDS = fieldsOf<Token>()({
  access_token: field(str("Bearer credential for the Authorization header."), (t) => t.accessToken),
  token_type: field({ const: "Bearer" }, (t) => t.tokenType),
  expires_at: field(dateTime("When the token stops working (1 hour after issue)."), (t) => iso(t.expiresAt)),
});

export const TOKEN = record<Token>("A login token.")(TOKEN_FIELDS.fields);

export const SIGNUP = record<SignupResponse>("The new user, their organization and a login token.")({
  user: field(ref("User"), (res) => USER.map(present(res.user, "user"))),
  organization: field(ref("Organization"), (res) => ORGANIZATION.map(present(res.organization, "organization"))),
  ...through((res: SignupResponse) => present(res.token, "token"), TOKEN_FIELDS.fields),
});

/** Public: the token is the credential. The new membership and a login token acting in it. */
export const ACCEPTANCE = record<AcceptInvitationResponse>("The organization joined, the new membership and a login token acting in it.")({
  organization: field(ref("Organization"), (res) => ORGANIZATION.map(present(res.organization, "organization"))),
  member: field(ref("Member"), (res) => MEMBER.map(present(res.member, "member"))),
  ...through((res: AcceptInvitationResponse) => present(res.token, "token"), TOKEN_FIELDS.fields),
});
