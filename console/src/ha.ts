import type { Schemas } from "@dbaas/client";

type HighAvailability = Schemas["HighAvailability"];
type Operation = Schemas["Operation"];

/**
 * The high availability tab's logic: when its record is read again quickly (a member not running yet,
 * a switchover under way), whether a switchover can be asked for, and a switchover's progress in words.
 */

/** Members coming up or going (a standby seeding, one replaced): read every few seconds until all run. */
export const haSettling = (ha: HighAvailability): boolean =>
  ha.members.length !== ha.standbys + 1 || ha.members.some((m) => m.status !== "running");

/** Why a planned switchover cannot be asked for now, or undefined when it can (the API still decides: 409). */
export function failoverBlocked(ha: HighAvailability, databaseStatus: string): string | undefined {
  if (databaseStatus !== "running") return `The database is ${databaseStatus}: a switchover needs it running.`;
  if (ha.standbys === 0) return "A switchover needs a standby: set at least one above.";
  if (!ha.members.some((m) => m.role === "standby" && m.status === "running")) return "No standby is running yet.";
  return undefined;
}

/** A `failover` operation's state for people: running (from → to), done, or failed with the API's reason. */
export function failoverProgress(op: Operation): { state: "running" | "succeeded" | "failed"; text: string } {
  const route = op.from && op.to ? ` from ${op.from} to ${op.to}` : "";
  if (op.status === "running") {
    return { state: "running", text: `Switching over${route}: the standby is catching up, then it is promoted. Writes pause briefly.` };
  }
  if (op.status === "succeeded") return { state: "succeeded", text: `Switched over${route}. The connection string is unchanged.` };
  return { state: "failed", text: `The switchover${route} did not happen: ${op.error ?? op.reason ?? "no reason given"}.` };
}
