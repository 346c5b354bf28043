import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "vitest";

/**
 * Walks a PDF the way a reader does, asserting as it goes: the header, the
 * trailer's startxref pointing at the xref table, every in-use entry's offset
 * pointing at its `n 0 obj`, the trailer naming the size and the catalogue,
 * the content stream's /Length matching its bytes. Returns the strings the
 * page shows (the operands of Tj), unescaped, in order.
 */
export function checkPdf(bytes: Uint8Array): { shown: string[]; text: string } {
  const text = Buffer.from(bytes).toString("latin1");
  expect(text.startsWith("%PDF-1.4\n"), "header").toBe(true);
  const tail = /startxref\n(\d+)\n%%EOF\n$/.exec(text);
  expect(tail, "startxref and %%EOF at the end").not.toBeNull();
  const xrefAt = Number(tail![1]);
  const head = /^xref\n0 (\d+)\n/.exec(text.slice(xrefAt));
  expect(head, "startxref points at the xref table").not.toBeNull();
  const size = Number(head![1]);
  let at = xrefAt + head![0].length;
  for (let i = 0; i < size; i++, at += 20) {
    const entry = text.slice(at, at + 20);
    expect(entry, `xref entry ${i}`).toMatch(/^\d{10} \d{5} [fn](?: \n|\r\n)$/);
    if (i === 0) {
      expect(entry).toBe("0000000000 65535 f \n");
      continue;
    }
    const offset = Number(entry.slice(0, 10));
    expect(text.startsWith(`${i} 0 obj\n`, offset), `object ${i} at byte ${offset}`).toBe(true);
  }
  const trailer = /^trailer\n<<(.*)>>\n/.exec(text.slice(at));
  expect(trailer, "trailer after the xref table").not.toBeNull();
  expect(trailer![1]).toContain(`/Size ${size}`);
  const root = /\/Root (\d+) 0 R/.exec(trailer![1]);
  expect(root, "trailer names the catalogue").not.toBeNull();
  expect(text).toMatch(new RegExp(`(^|\\n)${root![1]} 0 obj\\n<< /Type /Catalog`));

  const stream = /<< \/Length (\d+) >>\nstream\n/.exec(text);
  expect(stream, "a content stream").not.toBeNull();
  const start = stream!.index + stream![0].length;
  const content = text.slice(start, start + Number(stream![1]));
  expect(text.slice(start + content.length).startsWith("\nendstream\n"), "/Length is the stream's byte count").toBe(true);

  const shown = [...content.matchAll(/\(((?:\\.|[^\\)])*)\) Tj/g)].map((m) => m[1].replace(/\\(.)/g, "$1"));
  return { shown, text };
}

let pdftotext: boolean | undefined;

/** Whether poppler's pdftotext is installed (the extra check runs only then). */
export function hasPdftotext(): boolean {
  if (pdftotext === undefined) {
    try {
      execFileSync("pdftotext", ["-v"], { stdio: "ignore" });
      pdftotext = true;
    } catch {
      pdftotext = false;
    }
  }
  return pdftotext;
}

/**
 * The text poppler extracts from the document, laid out as on the page, and
 * what it complained about (a broken xref table is repaired, with a warning).
 */
export function extractText(bytes: Uint8Array): { text: string; warnings: string } {
  const dir = mkdtempSync(join(tmpdir(), "invoice-pdf-"));
  try {
    const file = join(dir, "invoice.pdf");
    writeFileSync(file, bytes);
    const run = spawnSync("pdftotext", ["-layout", file, "-"], { encoding: "utf8" });
    expect(run.status, run.stderr).toBe(0);
    return { text: run.stdout, warnings: run.stderr };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
