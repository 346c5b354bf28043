import { create, fromJson, type JsonValue, toJson } from "@bufbuild/protobuf";
import { ValueSchema, type Value } from "@bufbuild/protobuf/wkt";
import type { HandlerContext } from "@connectrpc/connect";
import { isTierName, type TierName } from "@dbaas/catalogue";
import { inSpan, invalidArgument, notConfirmedInTime, notFound, type Violation, withTransaction } from "@dbaas/kit";
import { ConfigParameterSchema, type ConfigParameter } from "@dbaas/proto/inside";
import type { AppContext } from "../context.ts";
import { configOf, saveParameters, tierDefaults } from "../db/config.ts";
import { findOwned, lockOwned, type DatabaseRow } from "../db/databases.ts";
import { notifyAgent } from "../db/notify.ts";
import { boundsOf, display, needsStatements, normalize, PARAMETERS, parameterSpec, type ParameterSpec } from "./parameters.ts";

/**
 * A database's configuration (docs/product.md, Inside the database): kept here, as overrides of the
 * allowlist (parameters.ts), and carried to its agent in the spec, which applies them in any status
 * (a stopped server gets them at its start). So they outlive a restart, a resize, a move; a restore
 * starts with its source's, a replica runs its primary's.
 */

const tierOf = (row: DatabaseRow): TierName => (isTierName(row.tier) ? row.tier : "micro");
const json = (v: JsonValue): Value => fromJson(ValueSchema, v);

/** The allowlist as database `row` has it: values, defaults (its agent's for its tier, else PostgreSQL's), bounds. */
async function parametersOf(ctx: AppContext, row: DatabaseRow): Promise<ConfigParameter[]> {
  const [config, defaults] = await Promise.all([configOf(ctx.pool, row.id), tierDefaults(ctx.pool, row.agent_id, row.tier)]);
  const tier = tierOf(row);
  const pending = new Set(config.pending_restart);
  return PARAMETERS.map((spec) => {
    const dflt = display(spec, defaults[spec.name] ?? spec.pgDefault);
    const override = config.parameters[spec.name];
    const { min, max } = boundsOf(spec, tier);
    return create(ConfigParameterSchema, {
      name: spec.name,
      value: json(override === undefined ? dflt : display(spec, override)),
      defaultValue: json(dflt),
      unit: spec.unit ?? "",
      type: spec.type,
      ...(min !== undefined && { min }),
      ...(max !== undefined && { max }),
      allowed: [...(spec.allowed ?? [])],
      requiresRestart: spec.restart,
      pendingRestart: pending.has(spec.name),
      description: spec.description,
      overridden: override !== undefined,
    });
  });
}

export async function getConfig(ctx: AppContext, req: { organizationId: string; databaseId: string }) {
  const row = await findOwned(ctx.pool, req.organizationId, req.databaseId);
  if (!row) throw notFound("database");
  return { parameters: await parametersOf(ctx, row) };
}

/**
 * `current` overrides changed by `changes` (null: back to the default), each checked for `tier`: the
 * new overrides, or a violation per refused parameter (`parameters.<name>`).
 */
export function mergeParameters(
  current: Record<string, string>,
  changes: Record<string, JsonValue>,
  tier: TierName,
): { parameters: Record<string, string>; violations: Violation[] } {
  const violations: Violation[] = [];
  const next = { ...current };
  for (const [name, raw] of Object.entries(changes)) {
    const spec = parameterSpec(name);
    const field = `parameters.${name}`;
    if (!spec) {
      violations.push({ field, message: "is not a parameter that can be changed (GET …/config lists those that can)" });
      continue;
    }
    if (raw === null) {
      delete next[name];
      continue;
    }
    const out = normalize(spec, raw, tier);
    if ("error" in out) violations.push({ field, message: out.error });
    else next[name] = out.value;
  }
  // Parameters of pg_stat_statements exist only while it is loaded.
  const preload = next.shared_preload_libraries ?? parameterSpec("shared_preload_libraries")!.pgDefault;
  if (!preload.split(",").includes("pg_stat_statements")) {
    for (const name of Object.keys(next).filter((n) => needsStatements(parameterSpec(n)!))) {
      violations.push({ field: `parameters.${name}`, message: "needs pg_stat_statements in shared_preload_libraries" });
    }
  }
  return { parameters: next, violations };
}

/** The overrides that do not fit `tier` (a resize or a restore to it), as messages naming them. */
export function misfits(parameters: Record<string, string>, tier: TierName): string[] {
  const out: string[] = [];
  for (const [name, value] of Object.entries(parameters)) {
    const spec = parameterSpec(name);
    if (!spec) continue;
    const checked = normalize(spec, display(spec, value) as JsonValue, tier);
    if ("error" in checked) out.push(`${name} is set to ${value}, which ${checked.error.replace(/^must/, "must")}`);
  }
  return out;
}

/** Violations (field `tier`) when database `id`'s overrides do not fit `tier`: lower them first. */
export async function configFitsTier(ctx: AppContext, id: string, tier: string): Promise<Violation[]> {
  if (!isTierName(tier)) return [];
  const { parameters } = await configOf(ctx.pool, id);
  return misfits(parameters, tier).map((m) => ({
    field: "tier",
    message: `the configuration does not fit it: ${m}; change it first (PATCH …/config)`,
  }));
}

/**
 * What a replica of tier `tier` runs of its primary's overrides: not what hot standby forces on it
 * (its own connection floors), nor what does not fit its tier.
 */
export function replicaParameters(primary: Record<string, string>, tier: string): Record<string, string> {
  if (!isTierName(tier)) return {};
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(primary)) {
    const spec: ParameterSpec | undefined = parameterSpec(name);
    if (!spec || spec.primaryOnly) continue;
    if (misfits({ [name]: value }, tier).length === 0) out[name] = value;
  }
  return out;
}

const CONFIG_WAIT_POLL_MS = 500;
const ANSWER_MARGIN_MS = 500;
export const CONFIG_NOT_CONFIRMED =
  "the configuration was saved, but the database did not confirm it in time; it will be applied when its host is reachable";

/** Resolves once database `id`'s agent reports config generation `target` applied; DEADLINE_EXCEEDED after the wait. */
async function waitForConfig(ctx: AppContext, id: string, target: bigint, handlerCtx: HandlerContext): Promise<void> {
  const callerLeft = handlerCtx.timeoutMs();
  const waitMs = Math.min(ctx.cfg.passwordApplyTimeoutMs, callerLeft === undefined ? Infinity : callerLeft - ANSWER_MARGIN_MS);
  const deadline = ctx.clock.now().getTime() + waitMs;
  let wake: () => void = () => {};
  let notified = false;
  const unsubscribe = ctx.feed.onDatabase(id, () => {
    notified = true;
    wake();
  });
  try {
    for (;;) {
      if (BigInt((await configOf(ctx.pool, id)).applied_generation) >= target) return;
      const left = deadline - ctx.clock.now().getTime();
      if (left <= 0 || handlerCtx.signal.aborted) break;
      await new Promise<void>((resolve) => {
        if (notified) return resolve();
        const timer = setTimeout(resolve, Math.min(CONFIG_WAIT_POLL_MS, left));
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      notified = false;
    }
  } finally {
    unsubscribe();
  }
  ctx.log.warn("the agent did not confirm a configuration in time", { database_id: id });
  throw notConfirmedInTime(CONFIG_NOT_CONFIRMED);
}

/**
 * Changes some overrides, all or none (one refused: 422 naming each, nothing saved). A running
 * database answers once its server has them (reloaded; restart-only ones shown pending); any other
 * status answers at once (the next start applies them).
 */
export async function updateConfig(
  ctx: AppContext,
  req: { organizationId: string; databaseId: string; parameters: Record<string, Value> },
  handlerCtx: HandlerContext,
) {
  const changes = Object.fromEntries(Object.entries(req.parameters).map(([k, v]) => [k, toJson(ValueSchema, v)]));
  if (Object.keys(changes).length === 0) throw invalidArgument([{ field: "parameters", message: "must name at least one parameter" }]);
  // Spans (when tracing) for where a change's time goes: the checks, the save, the wait for the agent's apply.
  const saved = await withTransaction(ctx.pool, async (db) => {
    const { row, current, parameters } = await inSpan("validate", async () => {
      const row = await lockOwned(db, req.organizationId, req.databaseId);
      const current = await configOf(db, row.id);
      const { parameters, violations } = mergeParameters(current.parameters, changes, tierOf(row));
      if (violations.length > 0) throw invalidArgument(violations, `${violations.length} parameter(s) refused; nothing was changed`);
      return { row, current, parameters };
    });
    if (JSON.stringify(Object.entries(parameters).sort()) === JSON.stringify(Object.entries(current.parameters).sort()))
      return { row, generation: undefined };
    return inSpan("save", async () => {
      const generation = await saveParameters(db, row.id, parameters);
      await notifyAgent(db, row.agent_id);
      return { row, generation };
    });
  });
  ctx.log.info("configuration changed", { database_id: saved.row.id, parameters: Object.keys(changes) });
  if (saved.generation !== undefined && saved.row.status === "running") {
    const generation = saved.generation;
    await inSpan("wait for the agent", () => waitForConfig(ctx, saved.row.id, generation, handlerCtx), {
      "dbaas.database_id": saved.row.id,
      "dbaas.config_generation": String(generation),
    });
  }
  return { parameters: await parametersOf(ctx, saved.row) };
}
