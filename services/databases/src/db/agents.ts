// The `agents` table: the hosts, what they offer, when they were last heard from; and placement's counts.
import type pg from "pg";

type Db = pg.Pool | pg.ClientBase;

export interface AgentRegistration {
  agentId: string;
  regions: string[];
  capacity: number;
  portRangeStart: number;
  portRangeEnd: number;
  versions: string[];
  caCertificatePem: string;
  publicAddresses: string[];
  /** AGENT_CONTROL_URL: its InstanceAdminService; "" from an agent that predates it. */
  controlUrl: string;
  /** Per tier, what its servers run with before a customer's override. */
  tierSettings: { tier: string; settings: Record<string, string> }[];
}

/**
 * Records an agent, or what it now says of itself when it registers again;
 * heard from at `now`. Answers whether an agent known before now publishes
 * on other addresses (its databases' DNS records are to follow).
 */
export async function upsertAgent(db: Db, a: AgentRegistration, now: Date): Promise<boolean> {
  const { rows } = await db.query<{ moved: boolean }>(
    `WITH before AS (SELECT public_addresses FROM agents WHERE id = $1)
     INSERT INTO agents (id, regions, capacity, port_range_start, port_range_end, versions, ca_certificate_pem, last_seen_at, public_addresses, control_url, tier_settings)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
     ON CONFLICT (id) DO UPDATE SET regions = $2, capacity = $3, port_range_start = $4, port_range_end = $5,
       versions = $6, ca_certificate_pem = $7, last_seen_at = $8, public_addresses = $9, control_url = $10, tier_settings = $11
     RETURNING COALESCE((SELECT public_addresses IS DISTINCT FROM $9 FROM before), false) AS moved`,
    [
      a.agentId,
      a.regions,
      a.capacity,
      a.portRangeStart,
      a.portRangeEnd,
      a.versions,
      a.caCertificatePem,
      now,
      a.publicAddresses,
      a.controlUrl,
      JSON.stringify(Object.fromEntries(a.tierSettings.map((t) => [t.tier, t.settings]))),
    ],
  );
  return rows[0]!.moved;
}

export async function agentExists(db: Db, agentId: string): Promise<boolean> {
  const known = await db.query("SELECT 1 FROM agents WHERE id = $1", [agentId]);
  return known.rowCount !== 0;
}

/** Notes that the agent was heard from at `now`; false for an agent that never registered. */
export async function touchAgent(db: Db, agentId: string, now: Date): Promise<boolean> {
  const seen = await db.query("UPDATE agents SET last_seen_at = $2 WHERE id = $1", [agentId, now]);
  return seen.rowCount !== 0;
}

/** Versions whose server binaries at least one registered agent has, newest first. */
export async function availableVersions(db: Db): Promise<string[]> {
  const { rows } = await db.query<{ v: string }>(
    "SELECT v FROM (SELECT DISTINCT unnest(versions) AS v FROM agents) s ORDER BY string_to_array(v, '.')::int[] DESC",
  );
  return rows.map((r) => r.v);
}

/**
 * The CA certificate of the agent hosting the organization's live database
 * `id`. A database with standbys may be failed over to another agent of its
 * region, whose CA issues the promoted server's certificate: it answers the
 * CAs of every agent of the region (one PEM bundle, by agent id), so a client
 * that pinned it keeps verifying across failovers.
 */
export async function caCertificateOf(db: Db, orgId: string, id: string): Promise<string | undefined> {
  const { rows } = await db.query<{ ca_certificate_pem: string }>(
    `SELECT a.ca_certificate_pem FROM databases d JOIN agents a
       ON CASE WHEN d.ha_standbys > 0 THEN d.region = ANY (a.regions) ELSE a.id = d.agent_id END
     WHERE d.id = $1 AND d.organization_id = $2 AND d.deleted_at IS NULL AND d.primary_id IS NULL
     ORDER BY a.id`,
    [id, orgId],
  );
  if (rows.length === 0) return undefined;
  return [...new Set(rows.map((r) => (r.ca_certificate_pem.endsWith("\n") ? r.ca_certificate_pem : `${r.ca_certificate_pem}\n`)))].join("");
}

/** Which agents may take a new database of `version` in `region`: live (heard from within the timeout before `now`). */
export interface Candidates {
  region: string;
  version: string;
  timeoutSeconds: number;
  now: Date;
}

/**
 * Locks the candidate agents for the caller's transaction, in id order so
 * concurrent creates queue instead of deadlocking. FOR NO KEY UPDATE, not FOR
 * UPDATE: creates still exclude each other, but the foreign-key checks of other
 * transactions (FOR KEY SHARE on the agent, e.g. a delete updating its row
 * twice) do not wait for us — while a create's INSERT may wait for that delete
 * (same name, case aside): a deadlock.
 */
export async function lockCandidates(db: pg.ClientBase, c: Candidates): Promise<void> {
  await db.query(
    `SELECT id FROM agents WHERE $1 = ANY (regions) AND $2 = ANY (versions)
       AND last_seen_at > $4::timestamptz - make_interval(secs => $3) ORDER BY id FOR NO KEY UPDATE`,
    [c.region, c.version, c.timeoutSeconds, c.now],
  );
}

export interface CandidateAgent {
  id: string;
  /** Capacity left: instances not purged count against it. */
  free: number;
  port_range_start: number;
  port_range_end: number;
}

/** The candidate agents, most free capacity first, then by id. */
export async function candidatesByFreeCapacity(db: pg.ClientBase, c: Candidates): Promise<CandidateAgent[]> {
  const { rows } = await db.query<CandidateAgent>(
    `SELECT a.id, a.port_range_start, a.port_range_end,
       a.capacity - (SELECT count(*) FROM databases d WHERE d.agent_id = a.id AND d.desired_state <> 'purged')::int
         - (SELECT count(*) FROM ha_discards x WHERE x.agent_id = a.id)::int AS free
     FROM agents a
     WHERE $1 = ANY (a.regions) AND $2 = ANY (a.versions) AND a.last_seen_at > $4::timestamptz - make_interval(secs => $3)
     ORDER BY free DESC, a.id`,
    [c.region, c.version, c.timeoutSeconds, c.now],
  );
  return rows;
}

/**
 * The lowest port of the agent's range that no instance holds (a port is held until its instance is purged,
 * an old primary's until its discard is confirmed).
 */
export async function lowestFreePort(db: pg.ClientBase, agent: CandidateAgent): Promise<number | undefined> {
  const { rows } = await db.query<{ port: number }>(
    `SELECT p AS port FROM generate_series($2::int, $3::int) AS p
     WHERE NOT EXISTS (SELECT 1 FROM databases d WHERE d.agent_id = $1 AND d.port = p AND d.desired_state <> 'purged')
       AND NOT EXISTS (SELECT 1 FROM ha_discards x WHERE x.agent_id = $1 AND x.port = p)
     ORDER BY p LIMIT 1`,
    [agent.id, agent.port_range_start, agent.port_range_end],
  );
  return rows[0]?.port;
}
