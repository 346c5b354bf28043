/**
 * Request bodies for the fuzz: mostly a plausible object with one thing odd
 * about it (a field, an extra or prototype key, a missing required one, deep
 * nesting, invalid UTF-8, a duplicate key, the wrong content type), sometimes
 * not an object or not JSON at all.
 */
import type { Fixture } from "./fixture.ts";
import type { Json, Operation } from "./openapi.ts";
import type { Rng } from "./prng.ts";
import { deepJson, oddBodyText, oddValue, plausibleObject, plausibleValue, randomString } from "./values.ts";

const PLANS = new Set(["free", "pro", "enterprise", "internal"]);

/** `obj` as JSON text with `inserted` (already JSON text, `"key":value`) spliced in first. */
function splice(obj: Record<string, unknown>, inserted: string): string {
  const rest = JSON.stringify(obj);
  return rest === "{}" ? `{${inserted}}` : `{${inserted},${rest.slice(1)}`;
}

const EXTRA_KEYS = [
  '"__proto__":{"admin":true,"role":"owner"}',
  '"constructor":{"prototype":{"admin":true}}',
  '"prototype":{}',
  '"size":"big"',
  '"":""',
  '"Name":"x"',
  '"name ":"x"',
  '"toString":"x"',
  '"hasOwnProperty":1',
  '"__defineGetter__":1',
];

/** A body for `schema`: mostly one mutation of a plausible object, sometimes not an object or not JSON at all. */
export function body(
  op: Operation,
  schema: Json,
  rng: Rng,
  fixture: Fixture,
  what: string[],
): { text: string | Buffer; contentType?: string; unknownField?: boolean } {
  const obj = plausibleObject(schema, rng);
  const props = Object.keys(schema.properties ?? {});
  const strategy = rng.weighted<string>([
    [35, "field"],
    [12, "extra-keys"],
    [8, "drop-required"],
    [10, "plausible"],
    [14, "odd-text"],
    [9, "content-type"],
    [6, "deep-field"],
    [3, "bad-utf8"],
    [3, "duplicate-key"],
  ]);
  let text: string | Buffer;
  let contentType: string | undefined = "application/json";
  let unknownField = false;
  switch (strategy) {
    case "field": {
      const key = props.length > 0 && rng.chance(0.9) ? rng.pick(props) : `unknown_${randomString(rng, 6)}`;
      unknownField = !props.includes(key);
      obj[key] = oddValue(schema.properties?.[key] ?? {}, rng, obj[key] ?? plausibleValue(schema.properties?.[key] ?? {}, rng, key));
      what.push(`body ${key} odd`);
      text = JSON.stringify(makeHarmless(op, obj, fixture));
      break;
    }
    case "extra-keys": {
      const n = rng.chance(0.1) ? 1000 : rng.between(1, 3);
      const keys = Array.from({ length: n }, (_, i) => (n > 3 ? `"k${i}":${i}` : rng.pick(EXTRA_KEYS)));
      what.push(`body extra keys ${n > 3 ? `${n} keys` : keys.join(" ")}`);
      unknownField = true;
      text = splice(makeHarmless(op, obj, fixture), keys.join(","));
      break;
    }
    case "drop-required": {
      const required: string[] = schema.required ?? [];
      const key = required.length > 0 ? rng.pick(required) : props.length > 0 ? rng.pick(props) : "none";
      delete obj[key];
      what.push(`body without ${key}`);
      text = JSON.stringify(makeHarmless(op, obj, fixture));
      break;
    }
    case "odd-text":
      text = oddBodyText(rng);
      what.push(`body text ${JSON.stringify(text.slice(0, 30))}${text.length > 30 ? `… (${text.length} chars)` : ""}`);
      break;
    case "content-type":
      contentType = rng.pick([
        undefined,
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/xml",
        "application/json; charset=utf-16",
        "application/json; charset=latin1",
        "application/json; charset=nope",
        "application/jsonx",
        "application/vnd.api+json",
        "application/merge-patch+json",
        "APPLICATION/JSON",
        "application/json;;;",
        "*/*",
        "application/json, text/plain",
        "",
      ]);
      text = rng.chance(0.7) ? JSON.stringify(makeHarmless(op, obj, fixture)) : "a=1&b=2";
      what.push(`content-type ${JSON.stringify(contentType ?? "(none)")}`);
      break;
    case "deep-field": {
      const key = props.length > 0 ? rng.pick(props) : "a";
      delete obj[key];
      const depth = rng.pick([100, 1000, 10_000, 50_000]);
      what.push(`body ${key} nested ${depth} deep`);
      text = splice(makeHarmless(op, obj, fixture), `${JSON.stringify(key)}:${deepJson(rng, depth)}`);
      break;
    }
    case "bad-utf8": {
      const key = props.length > 0 ? rng.pick(props) : "a";
      const bytes = rng.pick([[0xff], [0xc3, 0x28], [0xc0, 0xae], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80], [0xe2, 0x82]]);
      what.push(`body ${key} invalid UTF-8 ${bytes.map((b) => b.toString(16)).join(" ")}`);
      delete obj[key];
      const head = splice(makeHarmless(op, obj, fixture), `${JSON.stringify(key)}:"x`);
      const cut = head.indexOf('"x') + 2;
      text = Buffer.concat([Buffer.from(head.slice(0, cut)), Buffer.from(bytes), Buffer.from(`"${head.slice(cut)}`)]);
      break;
    }
    case "duplicate-key": {
      const key = props.length > 0 ? rng.pick(props) : "a";
      what.push(`body ${key} twice`);
      text = splice(
        makeHarmless(op, obj, fixture),
        `${JSON.stringify(key)}:${JSON.stringify(oddValue(schema.properties?.[key] ?? {}, rng, "x"))}`,
      );
      break;
    }
    default:
      text = JSON.stringify(makeHarmless(op, obj, fixture));
      what.push("body plausible");
  }
  return { text, contentType, unknownField };
}

/** Keeps a body from doing what would ruin the run: moving the organization off the internal plan. */
function makeHarmless(op: Operation, obj: Record<string, unknown>, _fixture: Fixture): Record<string, unknown> {
  if (op.path === "/v1/organization" && typeof obj.plan === "string" && PLANS.has(obj.plan.trim().toLowerCase())) obj.plan = "platinum";
  return obj;
}
