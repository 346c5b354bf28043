/**
 * Issue 15: every operation of the public API has a method in each official
 * client, and every paged list (an operation taking `page`) an iterator that
 * walks all of its pages. The operationIds come from the document the gateway serves at
 * /v1/openapi.json (built here from the same route table, no server needed);
 * each client names the method performing each operation: Node's OPERATIONS,
 * Python's dbaas.OPERATIONS, Go's dbaas.Operations (printed by
 * sdks/go/internal/cmd/operations, whose method expressions fail to compile
 * when a method is missing).
 */
import { execFileSync } from "node:child_process";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { openApiDocument } from "../../gateway/src/routes/openapi.ts";
import { ROUTES } from "../../gateway/src/routes/table.ts";
import { OPERATIONS, PAGED } from "../../sdks/node/src/operations.ts";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

interface DocOperation {
  operationId: string;
  parameters?: { name: string; in: string }[];
}

function documentOperations(): DocOperation[] {
  const doc = openApiDocument(ROUTES, "http://127.0.0.1:8080") as { paths: Record<string, Record<string, DocOperation>> };
  return Object.values(doc.paths).flatMap((ops) => Object.values(ops));
}

function documentOperationIds(): string[] {
  return documentOperations()
    .map((op) => op.operationId)
    .sort();
}

/** The operations answering one page of a list: those with a `page` query parameter. */
function pagedOperationIds(): string[] {
  return documentOperations()
    .filter((op) => op.parameters?.some((p) => p.in === "query" && p.name === "page"))
    .map((op) => op.operationId)
    .sort();
}

/**
 * dbaas.ITERATORS' operations whose method, called with placeholder ids,
 * returns an iterator (a generator: nothing is sent until it is advanced).
 */
const PYTHON_ITERATORS = `
import collections.abc, inspect, json, sys
sys.path.insert(0, "sdks/python")
import dbaas
client = dbaas.Client("http://127.0.0.1:9", token="t")
ok = []
for op, method in dbaas.ITERATORS.items():
    ids = [p for p in inspect.signature(method).parameters.values() if p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD][1:]
    if isinstance(method(client, *["x"] * len(ids)), collections.abc.Iterator):
        ok.append(op)
print(json.dumps(sorted(ok)))
`;

/** What a client's hook prints: a JSON array of operationIds. */
function hook(command: string, args: string[], cwd: string): string[] {
  let out: string;
  try {
    out = execFileSync(command, args, { cwd, encoding: "utf8", timeout: 300_000, stdio: ["ignore", "pipe", "pipe"] });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`the hook \`${command} ${args.join(" ")}\` (in ${cwd}) failed: ${e.stderr || e.message}`);
  }
  return (JSON.parse(out) as string[]).sort();
}

const CLIENTS: Record<string, () => string[]> = {
  node: () => Object.keys(OPERATIONS).sort(),
  python: () =>
    hook(
      "python3",
      ["-c", "import sys,json; sys.path.insert(0,'sdks/python'); import dbaas; print(json.dumps(sorted(dbaas.OPERATIONS)))"],
      root,
    ),
  go: () => hook("go", ["run", "./internal/cmd/operations"], join(root, "sdks/go")),
};

const ITERATORS: Record<string, () => string[]> = {
  // PAGED's type makes tsc fail when one of these methods returns anything but a PageIterator.
  node: () => Object.keys(PAGED).sort(),
  python: () => hook("python3", ["-c", PYTHON_ITERATORS], root),
  go: () => hook("go", ["run", "./internal/cmd/operations", "-iterators"], join(root, "sdks/go")),
};

describe("every operation of /v1/openapi.json has a method in every client", () => {
  const ids = documentOperationIds();

  it("the document has operations to check", () => {
    expect(ids.length).toBeGreaterThan(40);
    expect(new Set(ids).size).toBe(ids.length);
  });

  for (const [client, operationIds] of Object.entries(CLIENTS)) {
    it(`${client}: no operation missing, none unknown`, { timeout: 300_000 }, () => {
      const have = operationIds();
      expect({ missing: ids.filter((id) => !have.includes(id)), unknown: have.filter((id) => !ids.includes(id)) }).toEqual({
        missing: [],
        unknown: [],
      });
    });
  }

  it("node: each entry is a method", () => {
    for (const [id, method] of Object.entries(OPERATIONS)) expect(typeof method, id).toBe("function");
  });
});

describe("every paged list of /v1/openapi.json has a page iterator in every client", () => {
  const paged = pagedOperationIds();

  it("the document has paged lists", () => {
    expect(paged).toEqual(expect.arrayContaining(["listDatabases", "listBackups", "listReplicas", "listMembers", "listApiKeys"]));
  });

  for (const [client, iterated] of Object.entries(ITERATORS)) {
    it(`${client}: an iterator for each, none for anything else`, { timeout: 300_000 }, () => {
      expect(iterated()).toEqual(paged);
    });
  }
});
