import { Code, ConnectError } from "@connectrpc/connect";
import { notFound } from "@dbaas/kit";
import type { RoleName } from "./authz.ts";
import type { InvitationRow } from "./db/invitations.ts";
import type { Mail } from "./mail.ts";

/** How long an invitation's link works, from when it was made (on the context's clock). */
export const INVITATION_TTL_MS = 7 * 24 * 3600 * 1000;

export const alreadyExists = (message: string) => new ConnectError(message, Code.AlreadyExists);

/** The mail inviting `to`, with the one-time link. */
export function invitationMail(opts: {
  to: string;
  inviter: { name: string; email: string };
  organization: string;
  role: RoleName;
  link: string;
  expiresAt: Date;
}): Mail {
  const subject = `${opts.inviter.name} invited you to ${opts.organization}`;
  const text = [
    `${opts.inviter.name} (${opts.inviter.email}) invited you to join the organization "${opts.organization}" as ${opts.role}.`,
    "",
    `Accept the invitation: ${opts.link}`,
    "",
    `The link works once and expires on ${opts.expiresAt.toISOString()}.`,
    "If you did not expect this invitation, ignore this e-mail.",
    "",
  ].join("\n");
  return { to: opts.to, subject, text, link: opts.link };
}

/** Why an invitation's token cannot be used (any longer) at `now`, or nothing when it can. */
export function refusal(inv: InvitationRow | undefined, now: Date): ConnectError | undefined {
  if (!inv) return notFound("invitation");
  if (inv.status === "cancelled") return new ConnectError("invitation was cancelled", Code.NotFound);
  if (inv.status === "accepted") return alreadyExists("invitation was already accepted");
  if (inv.status === "expired" || inv.expires_at.getTime() <= now.getTime()) {
    return new ConnectError(`invitation expired at ${inv.expires_at.toISOString()}; ask for a new one`, Code.FailedPrecondition);
  }
  return undefined;
}
