/**
 * Values for the fuzz: plausible ones built from a JSON Schema, and the odd
 * ones a hostile client sends instead — wrong types, nulls, huge and odd
 * strings, NUL and control characters, lone surrogates, prototype keys, deep
 * nesting. None contains the words the oracle looks for in answers (a stack
 * frame, a SQL error), so an echo of the input is never taken for a leak.
 */
import type { Json } from "./openapi.ts";
import type { Rng } from "./prng.ts";

const CONTROL = Array.from({ length: 32 }, (_, i) => String.fromCharCode(i)).concat(["\u007f", "\u0085", "\u009b"]);
/** Unicode format and separator characters: bidi overrides, zero-width, BOM, line/paragraph separators. */
const FORMAT = [
  "\u200b",
  "\u200c",
  "\u200d",
  "\u200e",
  "\u200f",
  "\u202a",
  "\u202e",
  "\u2066",
  "\u2069",
  "\u2028",
  "\u2029",
  "\ufeff",
  "\u00ad",
  "\u061c",
];
const SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff", "a\ud800b", "\udc00\ud800", "\ud83d"];

/** Strings every string field gets now and then. */
export const ODD_STRINGS: readonly string[] = [
  "",
  " ",
  "   ",
  "\t",
  "\u0000",
  "a\u0000b",
  "\u0000\u0000\u0000\u0000",
  "%00",
  "\r\n",
  "line1\nline2",
  "name\r\nX-Injected: 1",
  "\ud83d\ude00",
  "🐘".repeat(40),
  "e\u0301",
  "\u00e9",
  "İstanbul",
  "ß",
  "\uffff",
  "\ufffe",
  "\u{10ffff}",
  "-",
  "--",
  "_",
  "a",
  "ab",
  "abc",
  "a b",
  "UPPER",
  "../../etc/passwd",
  "..",
  "/",
  "\\",
  "%",
  "%ZZ",
  "%2e%2e%2f",
  "'",
  '"',
  "' OR '1'='1",
  "'; DROP TABLE users; --",
  "$(id)",
  "`id`",
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a template-injection probe, meant literally
  "${7*7}",
  "{{7*7}}",
  "<script>alert(1)</script>",
  "null",
  "undefined",
  "NaN",
  "Infinity",
  "-1",
  "0",
  "1e309",
  "true",
  "[]",
  "{}",
  "__proto__",
  "constructor",
  "prototype",
  "toString",
  "hasOwnProperty",
  "a@b",
  "@",
  "a@",
  "@b.c",
  "A@EXAMPLE.COM",
  "a\u0000@example.com",
  "victim@example.com\r\nBcc: x@example.com",
  "ü@exämple.com",
  "2024-13-45T99:99:99Z",
  "0000-00-00T00:00:00Z",
  "9999-12-31T23:59:59Z",
  "1970-01-01T00:00:00Z",
  "2000-01-01",
  "now",
  ...FORMAT,
  ...SURROGATES,
];

const LENGTHS = [63, 64, 100, 254, 255, 256, 1000, 4096, 10_000, 100_000, 300_000];

/** A random string from a mix of ASCII, control, Latin-1, BMP, astral characters and lone surrogates. */
export function randomString(rng: Rng, maxLength = 40): string {
  const length = rng.int(maxLength + 1);
  let s = "";
  for (let i = 0; i < length; i++) {
    const kind = rng.weighted<string>([
      [10, "ascii"],
      [2, "control"],
      [2, "latin1"],
      [2, "bmp"],
      [1, "astral"],
      [1, "surrogate"],
      [1, "format"],
    ]);
    if (kind === "ascii") s += String.fromCharCode(rng.between(0x20, 0x7e));
    else if (kind === "control") s += rng.pick(CONTROL);
    else if (kind === "latin1") s += String.fromCharCode(rng.between(0xa0, 0xff));
    else if (kind === "bmp") s += String.fromCharCode(rng.between(0x100, 0xd7ff));
    else if (kind === "astral") s += String.fromCodePoint(rng.between(0x10000, 0x10ffff));
    else if (kind === "surrogate") s += String.fromCharCode(rng.between(0xd800, 0xdfff));
    else s += rng.pick(FORMAT);
  }
  return s;
}

/** An odd string: from the catalogue, random, long, or a plausible value with something odd inside. */
export function oddString(rng: Rng, plausible = "fuzz"): string {
  switch (rng.int(8)) {
    case 6:
    case 7: {
      // NUL is what PostgreSQL refuses in text: alone, leading, inside, trailing.
      const at = rng.pick([0, Math.floor(plausible.length / 2), plausible.length]);
      return rng.chance(0.2) ? "\u0000" : plausible.slice(0, at) + "\u0000" + plausible.slice(at);
    }
    case 0:
    case 1:
      return rng.pick(ODD_STRINGS);
    case 2:
      return randomString(rng);
    case 3: {
      const n = rng.pick(LENGTHS);
      return rng.chance(0.7) ? "a".repeat(n) : "é".repeat(Math.ceil(n / 2));
    }
    case 4: {
      const at = rng.int(plausible.length + 1);
      const odd = rng.pick([...CONTROL, ...FORMAT, ...SURROGATES]);
      return plausible.slice(0, at) + odd + plausible.slice(at);
    }
    default:
      return plausible + rng.pick(["\u0000", " ", "\n", "\u202e", "\ud800", "%00", "'", "A"]);
  }
}

export function oddNumber(rng: Rng): number {
  return rng.pick([
    0,
    -0,
    -1,
    1,
    0.5,
    -0.0001,
    1e-300,
    2 ** 31,
    2 ** 32,
    2 ** 53 + 1,
    -(2 ** 53),
    1e21,
    1e308,
    -1e308,
    Number.MAX_VALUE,
    Number.MIN_VALUE,
    999_999_999,
    1_000_000.01,
  ]);
}

/** A value of another type than `schema` asks for, or null, or an odd value of the same type. */
export function oddValue(schema: Json, rng: Rng, plausible: unknown): unknown {
  const types = typesOf(schema);
  const choice = rng.int(10);
  if (choice === 0) return null;
  if (choice === 1) return rng.pick<unknown>([true, false, 0, 1, -1, "", [], {}, [null], { "": "" }]);
  if (choice === 2)
    return rng.pick<unknown>([["a", "b"], [plausible], [[[]]], Array.from({ length: rng.pick([100, 10_000]) }, (_, i) => i)]);
  if (choice === 3) return { value: plausible, __proto__x: 1, nested: { deeper: [plausible] } };
  if (types.includes("string")) return oddString(rng, typeof plausible === "string" ? plausible : "fuzz");
  if (types.includes("integer") || types.includes("number")) {
    return rng.chance(0.5) ? oddNumber(rng) : rng.pick<unknown>(["1", "abc", "1e3", "0x10", " 1", "", "١"]);
  }
  if (types.includes("boolean")) return rng.pick<unknown>(["true", "false", 0, 1, "yes", "", "TRUE"]);
  if (types.includes("array")) {
    const item = schema.items ?? {};
    return rng.pick<unknown>([
      "not-an-array",
      [null],
      [oddValue(item, rng, "x")],
      Array.from({ length: rng.pick([2, 50, 1000]) }, () => oddValue(item, rng, "x")),
      [[plausible]],
    ]);
  }
  if (types.includes("object")) return rng.pick<unknown>(["not-an-object", [], { unknown_field: 1 }]);
  return oddString(rng);
}

export function typesOf(schema: Json): string[] {
  if (Array.isArray(schema.type)) return schema.type as string[];
  if (typeof schema.type === "string") return [schema.type];
  for (const key of ["anyOf", "oneOf"]) {
    if (Array.isArray(schema[key])) return (schema[key] as Json[]).flatMap(typesOf);
  }
  if (schema.enum) return [...new Set((schema.enum as unknown[]).map((v) => (v === null ? "null" : typeof v)))];
  if (schema.properties) return ["object"];
  return [];
}

/** A value `schema` accepts, as far as a generator without a JSON Schema solver can tell. */
export function plausibleValue(schema: Json, rng: Rng, name = "value"): unknown {
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return rng.pick(schema.enum as unknown[]);
  if (schema.const !== undefined) return schema.const;
  const nonNull = (["anyOf", "oneOf"] as const)
    .flatMap((k) => (Array.isArray(schema[k]) ? (schema[k] as Json[]) : []))
    .filter((s) => s.type !== "null");
  if (nonNull.length > 0) return plausibleValue(rng.pick(nonNull), rng, name);
  const type = typesOf(schema).find((t) => t !== "null") ?? "string";
  switch (type) {
    case "integer": {
      const min = typeof schema.minimum === "number" ? schema.minimum : 1;
      const max = typeof schema.maximum === "number" ? schema.maximum : Math.max(min, 100);
      return rng.between(Math.ceil(min), Math.floor(Math.min(max, min + 1000)));
    }
    case "number": {
      const min =
        typeof schema.exclusiveMinimum === "number" ? schema.exclusiveMinimum + 1 : typeof schema.minimum === "number" ? schema.minimum : 1;
      return min + rng.int(100);
    }
    case "boolean":
      return rng.chance(0.5);
    case "array": {
      const item = schema.items ?? { type: "string" };
      return Array.from({ length: rng.int(3) }, () => plausibleValue(item, rng, name));
    }
    case "object":
      return plausibleObject(schema, rng);
    default:
      return plausibleString(schema, rng, name);
  }
}

function plausibleString(schema: Json, rng: Rng, name: string): string {
  // From the PRNG, not a counter: the same seed gives the same values whatever ran before in the process.
  const n = rng.int(1e9);
  if (schema.format === "email" || /email/.test(name)) return `fuzz-${rng.seed.toString(36)}-${n}@example.com`;
  if (schema.format === "date-time" || /_at$/.test(name)) return new Date(Date.now() + rng.between(1, 400) * 86_400_000).toISOString();
  if (/password/.test(name)) return `fuzz-password-${n}-${rng.int(1e9)}`;
  const min = typeof schema.minLength === "number" ? schema.minLength : 3;
  const max = typeof schema.maxLength === "number" ? schema.maxLength : 40;
  let s = `fuzz-${n.toString(36)}-${rng.int(1e6).toString(36)}`;
  while (s.length < min) s += "x";
  return s.slice(0, Math.max(min, Math.min(max, s.length)));
}

/** The required properties and some optional ones, each plausible. */
export function plausibleObject(schema: Json, rng: Rng): Record<string, unknown> {
  const required = new Set<string>(schema.required ?? []);
  const out: Record<string, unknown> = {};
  for (const [key, prop] of Object.entries<Json>(schema.properties ?? {})) {
    if (required.has(key) || rng.chance(0.5)) out[key] = plausibleValue(prop, rng, key);
  }
  return out;
}

/** JSON nested `depth` levels deep, as text (JSON.stringify would recurse as deep). */
export function deepJson(rng: Rng, depth: number): string {
  return rng.chance(0.5) ? "[".repeat(depth) + "]".repeat(depth) : '{"a":'.repeat(depth) + "1" + "}".repeat(depth);
}

/** Bodies that are not a JSON object, or not JSON at all. */
export function oddBodyText(rng: Rng): string {
  return rng.pick([
    "",
    " ",
    "null",
    "true",
    "0",
    "-1e400",
    '"a string"',
    "[]",
    "[{}]",
    "{",
    "}",
    '{"a":}',
    '{"a":1,}',
    "{'a':1}",
    '{"a":NaN}',
    '{"a":Infinity}',
    '{"a":undefined}',
    '{"a":1}{"b":2}',
    '{"a":"\\ud800"}',
    '{"a":"\\u0000"}',
    '{"a":"\\x00"}',
    '{"a" 1}',
    "\ufeff{}",
    '{"a":1}\u0000',
    "{\u0000}",
    '{"__proto__":{"admin":true}}',
    '{"constructor":{"prototype":{"admin":true}}}',
    "123456789012345678901234567890",
    '{"a":123456789012345678901234567890e99999}',
    "\u00ff\u00fe{\u0000}",
    "<xml/>",
    "a=1&b=2",
    deepJson(rng, rng.pick([64, 1000, 10_000, 100_000])),
    "x".repeat(rng.pick([1000, 1_100_000])),
  ]);
}
