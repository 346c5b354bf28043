/**
 * `npm run generate:sdks`: writes the Go and Python clients' request and
 * response types from the gateway's OpenAPI document (built in-process from
 * the route table, as sdks/node/scripts/generate.ts does for the Node client):
 *
 *   sdks/go/types_gen.go        structs with their JSON tags
 *   sdks/python/dbaas/models.py TypedDicts (the client returns plain dicts; these are their shapes)
 *
 * `--check` (in `npm run check:sdk`): writes nothing and fails when either
 * committed file differs from what this would write.
 *
 * What is generated: the `data` of every enveloped success answer (a
 * component schema, or a list's inline object, which becomes Go's `<Item>Page`
 * with the envelope's `meta` beside it), every request body (`<OperationId>Request`),
 * `ListMeta`, and every schema these reach. The envelope's own schemas
 * (`Meta`, `Error`) and the unenveloped document are the clients' hand-written
 * transport. Names: a component's name, or an inline schema's `title`; an
 * inline object without a title is an anonymous struct in Go and
 * `<Parent><Field>` in Python. A tuple (`prefixItems`) has no natural shape in
 * either language: Go refers to a hand-written type of its title (`Point`,
 * with its UnmarshalJSON), Python to a `tuple[...]`.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { openApiDocument } from "../../gateway/src/routes/openapi.ts";
import { ROUTES } from "../../gateway/src/routes/table.ts";

type Schema = Record<string, unknown>;

const sdks = join(dirname(fileURLToPath(import.meta.url)), "..");
const GO_FILE = join(sdks, "go/types_gen.go");
const PY_FILE = join(sdks, "python/dbaas/models.py");
const SOURCE = "sdks/scripts/generate-types.ts from the gateway's /v1/openapi.json";

/** operationIds whose request type is not named after them: `token` is the client's Login. */
const REQUEST_NAMES: Record<string, string> = { token: "Login" };

/** Words Go writes in capitals (Go's naming convention for initialisms). */
const INITIALISMS = new Set(["id", "api", "url", "pdf", "gb", "vcpu", "ca"]);

// ---- The model: named types, each an object, from the document ----

type Type =
  | { kind: "string" | "int" | "int64" | "float" | "bool" | "time" }
  /** A value of several JSON types (a configuration parameter's: number, string, boolean, list). */
  | { kind: "any" }
  | { kind: "enum"; values: string[] }
  | { kind: "array"; items: Type }
  | { kind: "map"; values: Type }
  | { kind: "tuple"; name: string; items: Type[] }
  | { kind: "named"; name: string }
  | { kind: "object"; fields: Field[]; pyName: string };

interface Field {
  json: string;
  description?: string;
  required: boolean;
  nullable: boolean;
  type: Type;
}

interface Named {
  name: string;
  description?: string;
  fields: Field[];
  /** A list's page: Go adds the envelope's meta. */
  page?: boolean;
  request?: boolean;
  /** The operation a page or a request belongs to, e.g. `createDatabase (POST /v1/databases)`. */
  operation?: string;
}

const words = (s: string): string[] =>
  s
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .split(/[\s_-]+/)
    .filter(Boolean)
    .map((w) => w.toLowerCase());

const pascal = (s: string): string =>
  words(s)
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join("");

const goName = (s: string): string =>
  words(s)
    .map((w) => (INITIALISMS.has(w) ? w.toUpperCase() : w[0]!.toUpperCase() + w.slice(1)))
    .join("");

class Model {
  readonly named = new Map<string, Named>();
  private readonly shapes = new Map<string, string>();

  constructor(private readonly doc: Schema) {}

  private component(name: string): Schema {
    const schemas = (this.doc.components as Schema).schemas as Record<string, Schema>;
    const s = schemas[name];
    if (!s) throw new Error(`no component schema ${name}`);
    return s;
  }

  /** A named object type, once (a title used twice must name the same shape; descriptions aside, the first one's kept). */
  define(name: string, schema: Schema, extra: Partial<Named> = {}): void {
    const shape = JSON.stringify(schema, (key, value) => (key === "description" ? undefined : value));
    const seen = this.shapes.get(name);
    if (seen !== undefined) {
      if (seen !== shape) throw new Error(`${name} names two different schemas`);
      return;
    }
    this.shapes.set(name, shape);
    const entry: Named = { name, description: schema.description as string | undefined, fields: [], ...extra };
    this.named.set(name, entry);
    entry.fields = this.fields(schema, name);
  }

  fields(schema: Schema, parent: string): Field[] {
    const object = schema.type === "object" || (Array.isArray(schema.type) && schema.type.includes("object"));
    if (!object || typeof schema.properties !== "object") throw new Error(`${parent} is not an object with properties`);
    const required = new Set((schema.required as string[] | undefined) ?? []);
    return Object.entries(schema.properties as Record<string, Schema>).map(([json, s]) => {
      const nullable = Array.isArray(s.type) && s.type.includes("null");
      return {
        json,
        description: s.description as string | undefined,
        required: required.has(json),
        nullable,
        type: this.type(s, parent + pascal(json)),
      };
    });
  }

  type(s: Schema, pyName: string): Type {
    if (typeof s.$ref === "string") {
      const name = s.$ref.replace("#/components/schemas/", "");
      this.define(name, this.component(name));
      return { kind: "named", name };
    }
    const types = Array.isArray(s.type) ? s.type.filter((t) => t !== "null") : [s.type];
    if (types.length > 1 || Array.isArray(s.anyOf)) return { kind: "any" };
    const type = types[0];
    if (s.const !== undefined || Array.isArray(s.enum)) {
      const values = (s.enum as unknown[] | undefined) ?? [s.const];
      if (!values.every((v) => typeof v === "string")) throw new Error(`${pyName}: only string enums are supported`);
      return { kind: "enum", values: values as string[] };
    }
    switch (type) {
      case "string":
        return { kind: s.format === "date-time" ? "time" : "string" };
      case "integer":
        return { kind: s.format === "int64" ? "int64" : "int" };
      case "number":
        return { kind: "float" };
      case "boolean":
        return { kind: "bool" };
      case "array":
        if (Array.isArray(s.prefixItems)) {
          if (typeof s.title !== "string") throw new Error(`${pyName}: a tuple needs a title`);
          return { kind: "tuple", name: s.title, items: (s.prefixItems as Schema[]).map((p, i) => this.type(p, `${pyName}${i}`)) };
        }
        return { kind: "array", items: this.type(s.items as Schema, pyName) };
      case "object":
        if ((!s.properties || Object.keys(s.properties).length === 0) && typeof s.additionalProperties === "object") {
          return { kind: "map", values: this.type(s.additionalProperties as Schema, pyName) };
        }
        if (typeof s.title === "string") {
          this.define(s.title, s);
          return { kind: "named", name: s.title };
        }
        return { kind: "object", fields: this.fields(s, pyName), pyName };
    }
    throw new Error(`${pyName}: unsupported schema ${JSON.stringify(s)}`);
  }
}

function model(): Model {
  const doc = openApiDocument(ROUTES, "http://127.0.0.1:8080") as Schema;
  const m = new Model(doc);
  m.type({ $ref: "#/components/schemas/ListMeta" }, "ListMeta"); // every list's meta
  for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, Schema>>)) {
    for (const [method, op] of Object.entries(item)) {
      if (typeof op !== "object" || typeof op.operationId !== "string") continue;
      const id = op.operationId;
      const operation = `${id} (${method.toUpperCase()} ${path})`;
      const body = (((op.requestBody as Schema | undefined)?.content as Schema | undefined)?.["application/json"] as Schema | undefined)
        ?.schema as Schema | undefined;
      if (body) m.define(`${pascal(REQUEST_NAMES[id] ?? id)}Request`, body, { request: true, operation });
      for (const [status, response] of Object.entries(op.responses as Record<string, Schema>)) {
        if (!status.startsWith("2")) continue;
        const envelope = ((response.content as Schema | undefined)?.["application/json"] as Schema | undefined)?.schema as
          | Schema
          | undefined;
        const data = (envelope?.properties as Record<string, Schema> | undefined)?.data;
        if (!data) continue; // 204, a file, or the unenveloped document
        if (data.$ref) m.type(data, id);
        else {
          // A list: `list<Items>` → `<Item>Page`.
          const listed = words(id.replace(/^list/, ""));
          const last = listed.length - 1;
          listed[last] = listed[last]!.replace(/s$/, "");
          m.define(`${pascal(listed.join(" "))}Page`, data, { page: true, operation });
        }
      }
    }
  }
  return m;
}

// ---- Go ----

function goType(t: Type, indent: string): string {
  switch (t.kind) {
    case "string":
    case "enum":
      return "string";
    case "int":
      return "int";
    case "int64":
      return "int64";
    case "float":
      return "float64";
    case "bool":
      return "bool";
    case "time":
      return "time.Time";
    case "array":
      return `[]${goType(t.items, indent)}`;
    case "map":
      return `map[string]${goType(t.values, indent)}`;
    case "any":
      return "any";
    case "tuple":
      return t.name;
    case "named":
      return goName(t.name);
    case "object":
      return `struct {\n${goFields(t.fields, `${indent}\t`)}${indent}}`;
  }
}

/** A field's Go type: a pointer where the zero value would mean something (null, or an optional number, time, bool or object). */
function goFieldType(f: Field, indent: string): string {
  const base = goType(f.type, indent);
  const scalarOrObject = !["string", "enum", "array", "map", "any"].includes(f.type.kind);
  if (f.nullable || (!f.required && scalarOrObject)) return `*${base}`;
  return base;
}

/** A field's description; for Go, an enum's values too (Python's Literal lists them). */
function comment(f: Field, values: boolean): string | undefined {
  const parts: string[] = [];
  if (f.description) parts.push(oneLine(f.description));
  if (values && f.type.kind === "enum" && f.type.values.length > 1) parts.push(`One of: ${f.type.values.join(", ")}.`);
  return parts.length > 0 ? parts.join(" ") : undefined;
}

const oneLine = (s: string): string => s.replace(/\s+/g, " ").trim();

/** `text` as lines of at most 110 characters, each starting with `prefix`. */
function wrap(text: string, prefix: string): string {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(" ")) {
    if (line && prefix.length + line.length + 1 + word.length > 110) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  lines.push(line);
  return lines.map((l) => `${prefix}${l}\n`).join("");
}

/**
 * Fields as gofmt lays them out: names, types and tags in aligned columns,
 * each field's description on the line above it; a comment line and a
 * multi-line type each end a run of aligned lines.
 */
function goFields(fields: Field[], indent: string, page = false): string {
  const rows: { comment?: string; name: string; type: string; tag: string }[] = fields.map((f) => ({
    comment: comment(f, true),
    name: goName(f.json),
    type: goFieldType(f, indent),
    tag: `\`json:"${f.json}${f.required ? "" : ",omitempty"}"\``,
  }));
  if (page) rows.push({ comment: "The list's paging, from the envelope's meta.", name: "Meta", type: "ListMeta", tag: '`json:"-"`' });
  let out = "";
  let run: typeof rows = [];
  const flush = () => {
    const nameWidth = Math.max(...run.map((r) => r.name.length));
    const typeWidth = Math.max(...run.map((r) => (r.type.includes("\n") ? 0 : r.type.length)));
    for (const r of run) {
      if (r.comment) out += wrap(r.comment, `${indent}// `);
      const type = r.type.includes("\n") ? `${r.type} ` : r.type.padEnd(typeWidth + 1);
      out += `${indent}${r.name.padEnd(nameWidth + 1)}${type}${r.tag}\n`;
    }
    run = [];
  };
  for (const r of rows) {
    if (r.comment && run.length > 0) flush();
    run.push(r);
    if (r.type.includes("\n")) flush();
  }
  if (run.length > 0) flush();
  return out;
}

function goFile(m: Model): string {
  let out = `// Code generated by ${SOURCE}. DO NOT EDIT.\n\npackage dbaas\n\nimport "time"\n`;
  for (const t of m.named.values()) {
    const name = goName(t.name);
    const what = t.request ? `is the body of ${t.operation}.` : t.page ? `is one page of ${t.operation}.` : undefined;
    const description = what ?? (t.description ? `: ${oneLine(t.description)}` : undefined);
    out += "\n";
    if (description) out += wrap(`${name}${description.startsWith(":") ? description : ` ${description}`}`, "// ");
    out += `type ${name} struct {\n${goFields(t.fields, "\t", t.page)}}\n`;
  }
  return out;
}

// ---- Python ----

function pyType(t: Type, extra: string[]): string {
  switch (t.kind) {
    case "string":
    case "time": // RFC 3339, as the client returns the JSON
      return "str";
    case "enum":
      return `Literal[${t.values.map((v) => JSON.stringify(v)).join(", ")}]`;
    case "int":
    case "int64":
      return "int";
    case "float":
      return "float";
    case "bool":
      return "bool";
    case "array":
      return `list[${pyType(t.items, extra)}]`;
    case "map":
      return `dict[str, ${pyType(t.values, extra)}]`;
    case "any":
      return "Any";
    case "tuple":
      return `tuple[${t.items.map((i) => pyType(i, extra)).join(", ")}]`;
    case "named":
      return t.name;
    case "object":
      extra.push(pyClass(t.pyName, undefined, t.fields));
      return t.pyName;
  }
}

/** Python's keywords: a field named like one (`from`) cannot be a class attribute. */
const PY_KEYWORDS = new Set(
  "False None True and as assert async await break class continue def del elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield".split(
    " ",
  ),
);

function pyClass(name: string, description: string | undefined, fields: Field[]): string {
  const nested: string[] = [];
  const typed = fields.map((f) => {
    let type = pyType(f.type, nested);
    if (f.nullable) type = `${type} | None`;
    if (!f.required) type = `NotRequired[${type}]`;
    return { f, type, c: comment(f, false) };
  });
  if (fields.some((f) => PY_KEYWORDS.has(f.json))) {
    // The functional form takes any key; its types are strings, resolved like the class form's annotations.
    const doc = description ? wrap(oneLine(description), "# ") : "";
    const lines = typed.map(
      ({ f, type, c }) =>
        `${c ? wrap(c, "    #: ") : ""}    ${JSON.stringify(f.json)}: ${type.includes('"') ? `'${type}'` : JSON.stringify(type)},\n`,
    );
    return `${nested.join("")}\n\n${doc}${name} = TypedDict(\n    ${JSON.stringify(name)},\n    {\n${lines.map((l) => l.replace(/^ {4}/gm, "        ")).join("")}    },\n)\n`;
  }
  const lines = typed.map(({ f, type, c }) => `${c ? wrap(c, "    #: ") : ""}    ${f.json}: ${type}\n`);
  const doc = description ? `${wrap(`"""${oneLine(description).replace(/\\/g, "\\\\")}"""`, "    ")}\n` : "";
  return `${nested.join("")}\n\nclass ${name}(TypedDict):\n${doc}${lines.join("")}`;
}

function pyFile(m: Model): string {
  let out =
    `# Code generated by ${SOURCE}. DO NOT EDIT.\n` +
    '"""The shapes of the API\'s JSON: what each ``Client`` method returns (plain dicts; these TypedDicts\n' +
    'describe them for type checkers) and each request body it sends. Times are RFC 3339 strings."""\n\n' +
    "from __future__ import annotations\n\nfrom typing import Any, Literal, NotRequired, TypedDict\n";
  for (const t of m.named.values()) {
    if (t.page) continue; // Page carries a list's items, meta and data
    const description = t.request ? `The body of ${t.operation}.` : t.description;
    out += pyClass(t.name, description, t.fields);
  }
  return out;
}

// ---- main ----

const m = model();
const outputs = new Map([
  [GO_FILE, goFile(m)],
  [PY_FILE, pyFile(m)],
]);

if (process.argv.includes("--check")) {
  const stale = [...outputs].filter(([file, text]) => {
    try {
      return readFileSync(file, "utf8") !== text;
    } catch {
      return true;
    }
  });
  if (stale.length > 0) {
    process.stderr.write(
      `${stale.map(([f]) => relative(join(sdks, ".."), f)).join(", ")} out of date: run \`npm run generate:sdks\` and commit the result.\n`,
    );
    process.exitCode = 1;
  }
} else {
  for (const [file, text] of outputs) writeFileSync(file, text);
}
