import { ScalarType, type DescField, type DescMessage, type DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { invalidArgument, type Violation } from "./errors.ts";

/**
 * Top-level request fields that name what the call looks up: an id holding
 * NUL cannot exist, so the call answers NOT_FOUND, as for any unknown id.
 */
const LOOKUP_FIELDS: Record<string, string> = {
  id: "resource",
  organization_id: "organization",
  database_id: "database",
  member_id: "member",
};

/** Messages nest this deep at most in our protocols; deeper is not walked (and not ours to store). */
const MAX_DEPTH = 16;

type Probe = (message: Record<string, unknown>, path: string, depth: number, found: string[]) => void;

const probes = new WeakMap<DescMessage, Probe>();

/** Paths (public JSON field names: `actor.user_id`, `events[2].database_id`) of strings in `message` holding NUL. */
export function stringsWithNul(desc: DescMessage, message: unknown): string[] {
  const found: string[] = [];
  probeOf(desc)(message as Record<string, unknown>, "", 0, found);
  return found;
}

function probeOf(desc: DescMessage): Probe {
  let probe = probes.get(desc);
  if (probe) return probe;
  // Set before the fields are compiled, so a recursive message type finds itself.
  const fieldProbes: Probe[] = [];
  probe = (message, path, depth, found) => {
    if (depth > MAX_DEPTH) return;
    for (const p of fieldProbes) p(message, path, depth, found);
  };
  probes.set(desc, probe);
  for (const field of desc.fields) {
    const p = fieldProbe(field);
    if (p) fieldProbes.push(p);
  }
  return probe;
}

const hasNul = (v: unknown) => typeof v === "string" && v.includes("\0");

/** Reads the field's value from a protobuf-es message, whether it is in a oneof or not. */
function fieldValue(field: DescField, message: Record<string, unknown>): unknown {
  if (!field.oneof) return message[field.localName];
  const group = message[field.oneof.localName] as { case?: string; value?: unknown } | undefined;
  return group?.case === field.localName ? group.value : undefined;
}

function fieldProbe(field: DescField): Probe | undefined {
  const name = field.name;
  const at = (path: string) => (path === "" ? name : `${path}.${name}`);
  switch (field.fieldKind) {
    case "scalar":
      if (field.scalar !== ScalarType.STRING) return undefined;
      return (m, path, _d, found) => {
        if (hasNul(fieldValue(field, m))) found.push(at(path));
      };
    case "message": {
      const inner = field.message;
      return (m, path, depth, found) => {
        const v = fieldValue(field, m);
        if (v !== undefined && v !== null) probeOf(inner)(v as Record<string, unknown>, at(path), depth + 1, found);
      };
    }
    case "list":
      if (field.listKind === "scalar" && field.scalar === ScalarType.STRING) {
        return (m, path, _d, found) => {
          const list = (fieldValue(field, m) ?? []) as unknown[];
          list.forEach((v, i) => {
            if (hasNul(v)) found.push(`${at(path)}[${i}]`);
          });
        };
      }
      if (field.listKind === "message") {
        const inner = field.message;
        return (m, path, depth, found) => {
          const list = (fieldValue(field, m) ?? []) as Record<string, unknown>[];
          list.forEach((v, i) => {
            probeOf(inner)(v, `${at(path)}[${i}]`, depth + 1, found);
          });
        };
      }
      return undefined;
    case "map": {
      const keyIsString = field.mapKey === ScalarType.STRING;
      const valueIsString = field.mapKind === "scalar" && field.scalar === ScalarType.STRING;
      const inner = field.mapKind === "message" ? field.message : undefined;
      if (!keyIsString && !valueIsString && !inner) return undefined;
      return (m, path, depth, found) => {
        const map = (fieldValue(field, m) ?? {}) as Record<string, unknown>;
        for (const [k, v] of Object.entries(map)) {
          if ((keyIsString && hasNul(k)) || (valueIsString && hasNul(v))) found.push(at(path));
          else if (inner) probeOf(inner)(v as Record<string, unknown>, at(path), depth + 1, found);
        }
      };
    }
    default:
      return undefined;
  }
}

/**
 * The error a request message holding NUL in `paths` gets: NOT_FOUND when one
 * of them is a top-level id the call looks up (it cannot exist), else
 * INVALID_ARGUMENT with a FieldViolation per field.
 */
export function nulError(paths: string[]): ConnectError {
  const lookup = paths.find((p) => Object.hasOwn(LOOKUP_FIELDS, p));
  if (lookup) return new ConnectError(`${LOOKUP_FIELDS[lookup]} not found`, Code.NotFound);
  const violations: Violation[] = paths.map((field) => ({ field, message: "must not contain NUL (U+0000) characters" }));
  return invalidArgument(violations);
}

/**
 * A batch of a sibling method's requests (AIP-231's BatchGet shape: the only
 * field is a list of the other method's request message): its handler answers
 * each item as that method would, so one impossible item must not fail the
 * others' — items are checked by the handler, not here.
 */
function isBatchOfSiblingRequests(method: DescMethod): boolean {
  const fields = method.input.fields;
  if (fields.length !== 1) return false;
  const only = fields[0]!;
  return (
    only.fieldKind === "list" &&
    only.listKind === "message" &&
    method.parent.methods.some((m) => m !== method && m.input.typeName === only.message.typeName)
  );
}

/**
 * Refuses every request message holding a NUL (U+0000) in any string, at any
 * depth, before its handler runs. PostgreSQL cannot store NUL in text and
 * answers such a parameter with an error, so without this guard the request
 * would end as an internal error. Every server installs it (startServer).
 * Batches of a sibling method's requests are left to their handlers (see
 * isBatchOfSiblingRequests).
 */
export function textGuardInterceptor(): Interceptor {
  const batches = new WeakMap<DescMethod, boolean>();
  const isBatch = (method: DescMethod) => {
    let batch = batches.get(method);
    if (batch === undefined) {
      batch = isBatchOfSiblingRequests(method);
      batches.set(method, batch);
    }
    return batch;
  };
  return (next) => async (req) => {
    if (isBatch(req.method)) return await next(req);
    const input = req.method.input;
    if (!req.stream) {
      const paths = stringsWithNul(input, req.message);
      if (paths.length > 0) throw nulError(paths);
      return await next(req);
    }
    const messages = req.message;
    return await next({
      ...req,
      message: (async function* () {
        for await (const m of messages) {
          const paths = stringsWithNul(input, m);
          if (paths.length > 0) throw nulError(paths);
          yield m;
        }
      })(),
    });
  };
}
