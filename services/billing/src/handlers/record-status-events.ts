import type { HandlerContext } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { callerKey, Validator } from "@dbaas/kit";
import { TIERS } from "@dbaas/catalogue";
import { RecordStatusEventsResponseSchema, type RecordStatusEventsRequest, type RecordStatusEventsResponse } from "@dbaas/proto/billing";
import type { AppContext } from "../context.ts";
import { insertStatusChanges, type InstanceKind, type StatusChange } from "../db/status-events.ts";
import { checkId, checkTimestamp } from "../validation.ts";

/** Bounds one call's statement and transaction; the outbox relay sends smaller batches. */
export const MAX_EVENTS_PER_CALL = 1000;

const TIER_NAMES = TIERS.map((t) => t.name);
// Statuses are an open set on purpose: a status billing has not heard of yet
// must still stop the meter rather than wedge the sender's outbox on a rejection.
const STATUS_PATTERN = /^[a-z][a-z_]{0,31}$/;
// Unlike statuses, kinds are a closed set: an unknown one cannot be priced
// (compute or replica hours?), so it is refused rather than guessed.
const KINDS: readonly InstanceKind[] = ["database", "replica"];

/** The event's kind; empty is a database (senders from before replicas). Undefined when it is invalid. */
function checkKind(v: Validator, field: string, kind: string): InstanceKind | undefined {
  if (kind === "") return "database";
  const known = KINDS.find((k) => k === kind);
  if (known) return known;
  v.add(field, `must be one of: ${KINDS.join(", ")} (empty means database)`);
  return undefined;
}

function validate(req: RecordStatusEventsRequest): StatusChange[] {
  const v = new Validator();
  if (req.events.length === 0) v.add("events", "must contain at least one event");
  if (req.events.length > MAX_EVENTS_PER_CALL) v.add("events", `must contain at most ${MAX_EVENTS_PER_CALL} events`);
  v.throwIfAny();
  const changes: StatusChange[] = [];
  req.events.forEach((e, i) => {
    const at = `events[${i}]`;
    checkId(v, `${at}.event_id`, e.eventId);
    checkId(v, `${at}.organization_id`, e.organizationId);
    checkId(v, `${at}.database_id`, e.databaseId);
    const kind = checkKind(v, `${at}.kind`, e.kind);
    v.oneOf(`${at}.tier`, e.tier, TIER_NAMES);
    if (e.status === "") v.add(`${at}.status`, "is required");
    else if (!STATUS_PATTERN.test(e.status)) v.add(`${at}.status`, "must be a lowercase status name such as running");
    if (checkTimestamp(v, `${at}.occurred_at`, e.occurredAt) && kind) {
      changes.push({
        eventId: e.eventId,
        organizationId: e.organizationId,
        databaseId: e.databaseId,
        kind,
        tier: e.tier,
        status: e.status,
        occurredAt: timestampDate(e.occurredAt),
      });
    }
  });
  v.throwIfAny();
  return changes;
}

/**
 * Ingests status changes from the databases outbox. Delivery is at-least-once
 * and unordered, so storing is idempotent per event_id and nothing here depends
 * on arrival order: usage is computed from occurred_at when it is read.
 */
export function recordStatusEvents(ctx: AppContext) {
  return async (req: RecordStatusEventsRequest, call: HandlerContext): Promise<RecordStatusEventsResponse> => {
    const changes = validate(req);
    const recorded = await insertStatusChanges(ctx.pool, changes);
    ctx.log.info("status events recorded", {
      caller: call.values.get(callerKey),
      received: changes.length,
      recorded,
    });
    return create(RecordStatusEventsResponseSchema, { recorded });
  };
}
