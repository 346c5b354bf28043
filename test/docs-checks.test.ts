/** The docs checks of `npm run check:docs`: docs/decisions.md's index (docs/scripts/decisions-index.ts) and references (docs/scripts/references.ts). */
import { describe, expect, it } from "vitest";
import { decisions, index, withIndex } from "../docs/scripts/decisions-index.ts";
import { findings } from "../docs/scripts/references.ts";

const DOC = `# Decisions

Intro.

## Architecture and runtime
- **One schema per service.** Each has its own migrations,
  applied under a lock.
- Passwords: scrypt, re-hashed on login.
  - a nested note, part of the decision above

## Gateway (issue 5)

- **A [bracketed] title** and more.
`;

describe("the decisions index", () => {
  it("has one line per top-level decision, its bold title or first sentence, linking to its section", () => {
    expect(decisions(DOC)).toEqual([
      { section: "Architecture and runtime", anchor: "architecture-and-runtime", summary: "One schema per service" },
      { section: "Architecture and runtime", anchor: "architecture-and-runtime", summary: "Passwords" },
      { section: "Gateway (issue 5)", anchor: "gateway-issue-5", summary: "A [bracketed] title" },
    ]);
    expect(index(DOC)).toContain("- [A \\[bracketed\\] title](#gateway-issue-5)");
  });

  it("a decision appended after the index was written makes it stale; rewriting takes it in, and is stable", () => {
    const indexed = withIndex(DOC);
    expect(indexed.indexOf("<!-- index")).toBeLessThan(indexed.indexOf("## Architecture"));
    expect(withIndex(indexed)).toBe(indexed);
    const appended = `${indexed}- **Appended later.** By another branch.\n`;
    expect(withIndex(appended)).not.toBe(appended);
    expect(withIndex(appended)).toContain("- [Appended later](#gateway-issue-5)");
    expect(decisions(withIndex(appended))).toHaveLength(4);
  });
});

describe("references that must resolve inside the repository", () => {
  const exists = (p: string) => ["docs/product.md", "README.md"].includes(p);

  it("flags citations of the outside design notes and specification, and Markdown links to missing files", () => {
    const text = [
      "/** Live replicas (DESIGN.md, Read replicas). */",
      "// the role matrix of spec 2.7",
      "see [rules](product.md#billing) and [readme](../README.md) and [site](https://example.com)",
      "but [gone](decisions/gateway.md)",
    ].join("\n");
    expect(findings("docs/x.md", text, exists).map((f) => [f.line, f.text])).toEqual([
      [1, 'cites "DESIGN.md", which is not in the repository'],
      [2, 'cites "spec 2.7", which is not in the repository'],
      [4, "links to decisions/gateway.md, which does not exist"],
    ]);
  });

  it("leaves the repository's own references alone (a spec generation is not the specification)", () => {
    const text = "/** docs/product.md, Read replicas; the agent's spec generation 3. */";
    expect(findings("services/a.ts", text, exists)).toEqual([]);
  });
});
