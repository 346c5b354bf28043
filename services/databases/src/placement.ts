import { outOfCapacity } from "@dbaas/kit";
import type pg from "pg";
import { candidatesByFreeCapacity, lockCandidates, lowestFreePort, type Candidates } from "./db/agents.ts";

export interface Placement {
  agentId: string;
  port: number;
}

/**
 * Chooses the live agent of `region` with the most free capacity that has the
 * server binaries of `version`, and the lowest free port in its range. The
 * agent rows are locked for the rest of the caller's transaction, so concurrent
 * creates never take the same port or exceed capacity.
 */
export async function placeDatabase(db: pg.ClientBase, c: Candidates): Promise<Placement> {
  // Lock the candidates first, then count in a new statement: under READ COMMITTED
  // its snapshot includes creates committed while we waited.
  await lockCandidates(db, c);
  for (const agent of await candidatesByFreeCapacity(db, c)) {
    if (agent.free <= 0) continue;
    const port = await lowestFreePort(db, agent);
    if (port !== undefined) return { agentId: agent.id, port };
  }
  throw outOfCapacity(`no capacity for PostgreSQL ${c.version} in region ${c.region} right now; try again later or choose another region`);
}
