import type { Schemas } from "@dbaas/client";

export type Parameter = Schemas["Config"]["parameters"][number];
export type ParameterValue = Parameter["value"];

/**
 * The configuration form's logic: each parameter is edited as text (numbers, with or without a unit
 * PostgreSQL knows: `64MB`, `30s`), as on/off, as one of an enum's values or as a list's members;
 * only what differs from the value in effect is sent, all at once, and `null` puts one back to its
 * default. The API validates (bounds on the tier, units): its 422 names each refused parameter
 * (`parameters.<name>`), shown beside it.
 */

/** A value as its control shows it: a number or string as typed, a boolean as `on`/`off`, a list comma-separated. */
export function textOf(value: ParameterValue): string {
  if (typeof value === "boolean") return value ? "on" : "off";
  if (Array.isArray(value)) return value.join(",");
  return String(value);
}

/** The value to send for what the control holds: a number when it is one, else the text as typed (`64MB`), for the API to judge. */
export function valueFromText(p: Pick<Parameter, "type">, text: string): ParameterValue {
  const t = text.trim();
  switch (p.type) {
    case "bool":
      return t === "on";
    case "list":
      return t === "" ? [] : t.split(",").map((s) => s.trim());
    case "integer":
    case "real":
      return t !== "" && Number.isFinite(Number(t)) ? Number(t) : t;
    default:
      return t;
  }
}

/** An edit of the form: new text for a parameter, or `default` to take its override away. */
export type Edit = { text: string } | "default";

/**
 * The PATCH body's `parameters`: each edited parameter whose text differs from its value in effect (a
 * list compared as a set), and `null` for each put back to its default while overridden. Empty: nothing to save.
 */
export function changesOf(parameters: readonly Parameter[], edits: Readonly<Record<string, Edit>>): Record<string, ParameterValue | null> {
  const out: Record<string, ParameterValue | null> = {};
  for (const p of parameters) {
    const edit = edits[p.name];
    if (edit === undefined) continue;
    if (edit === "default") {
      if (p.overridden) out[p.name] = null;
      continue;
    }
    if (!sameValue(p, valueFromText(p, edit.text), p.value)) out[p.name] = valueFromText(p, edit.text);
  }
  return out;
}

function sameValue(p: Pick<Parameter, "type">, a: ParameterValue, b: ParameterValue): boolean {
  if (p.type === "list" && Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x) => b.includes(x));
  return textOf(a) === textOf(b);
}

/** The API's message about a parameter (its 422 detail `parameters.<name>`, `body.` already taken off). */
export const parameterError = (fields: Readonly<Record<string, string>>, name: string): string | undefined => fields[`parameters.${name}`];

/** A value with its unit, for reading: `4096 kB`, `on`, `pg_stat_statements`, `(none)` for an empty list. */
export function shown(p: Pick<Parameter, "unit">, value: ParameterValue): string {
  if (Array.isArray(value)) return value.length === 0 ? "(none)" : value.join(", ");
  const text = textOf(value);
  return p.unit && typeof value === "number" ? `${text} ${p.unit}` : text;
}

/** The bounds' words beside a number's field: `64 … 262144 kB`, `≥ 0 ms`, or nothing. */
export function boundsText(p: Pick<Parameter, "min" | "max" | "unit">): string {
  const unit = p.unit ? ` ${p.unit}` : "";
  if (p.min !== null && p.max !== null) return `${p.min} … ${p.max}${unit}`;
  if (p.min !== null) return `≥ ${p.min}${unit}`;
  if (p.max !== null) return `≤ ${p.max}${unit}`;
  return "";
}

/** Parameters changed and waiting for a restart: the page offers one. */
export const pendingRestart = (parameters: readonly Parameter[]): string[] =>
  parameters.filter((p) => p.pending_restart).map((p) => p.name);
