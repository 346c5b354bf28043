import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getDocument, VerbosityLevel } from "pdfjs-dist/legacy/build/pdf.mjs";
import { expect } from "vitest";

/** A piece of text as a reader finds it on a page: its string, page (from 1), left edge, right edge and baseline. */
export interface ShownText {
  str: string;
  page: number;
  x: number;
  right: number;
  y: number;
}

export interface CheckedPdf {
  /** The strings the pages show, in the order they are drawn. */
  shown: string[];
  /** The same, with where each is. */
  items: ShownText[];
  /** The strings of each line of text (same page and baseline), left to right, top to bottom. */
  rows: string[][];
  pages: number;
  /** The document information dictionary as the reader has it (Title, Creator, …). */
  info: Record<string, unknown>;
  /** The file's bytes as text (latin1): one character per byte, for looking at its structure. */
  text: string;
}

/**
 * Walks a PDF the way a reader does, asserting as it goes: the header and its
 * binary marker line, the trailer's startxref pointing at the xref table, every
 * in-use entry's offset pointing at its `n 0 obj`, the trailer naming the size
 * and the catalogue, each stream's /Length matching its bytes. Then Mozilla's
 * PDF.js reads it (fonts, ToUnicode maps, content) and gives back what each page
 * shows and where.
 */
export async function checkPdf(bytes: Uint8Array): Promise<CheckedPdf> {
  const text = Buffer.from(bytes).toString("latin1");
  expect(text.startsWith("%PDF-1.4\n"), "header").toBe(true);
  expect(text.slice(9), "a binary marker line (a comment of high bytes) after the header").toMatch(/^%[\x80-\xff]{4,}\n/);
  const tail = /startxref\n(\d+)\n%%EOF\n?$/.exec(text);
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
  const trailer = /^trailer\n<<([\s\S]*?)>>\nstartxref\n/.exec(text.slice(at));
  expect(trailer, "trailer after the xref table").not.toBeNull();
  expect(trailer![1]).toMatch(new RegExp(`/Size ${size}\\b`));
  const root = /\/Root (\d+) 0 R/.exec(trailer?.[1] ?? "");
  expect(root, "trailer names the catalogue").not.toBeNull();
  expect(text).toMatch(new RegExp(`(^|\\n)${root![1]} 0 obj\\n<<\\n/Type /Catalog\\n`));

  let streams = 0;
  for (const stream of text.matchAll(/\/Length (\d+)\n(?:[^\n]*\n)*?>>\nstream\n/g)) {
    const start = stream.index + stream[0].length;
    expect(
      text.startsWith("\nendstream\n", start + Number(stream[1])),
      `/Length ${stream[1]} is the byte count of the stream at ${start}`,
    ).toBe(true);
    streams++;
  }
  expect(streams, "content and font streams").toBeGreaterThan(1);

  const doc = await getDocument({
    data: new Uint8Array(bytes),
    verbosity: VerbosityLevel.ERRORS,
    isEvalSupported: false,
    disableFontFace: true,
  }).promise;
  try {
    const items: ShownText[] = [];
    for (let page = 1; page <= doc.numPages; page++) {
      const content = await (await doc.getPage(page)).getTextContent();
      for (const item of content.items) {
        if (!("str" in item) || item.str.trim() === "") continue;
        const [, , , , x = 0, y = 0] = item.transform as number[];
        items.push({ str: item.str, page, x, right: x + item.width, y });
      }
    }
    const lines = new Map<string, ShownText[]>();
    for (const item of items) {
      const key = `${item.page}:${Math.round(item.y)}`;
      lines.set(key, [...(lines.get(key) ?? []), item]);
    }
    const rows = [...lines.values()]
      .sort((a, b) => a[0]!.page - b[0]!.page || b[0]!.y - a[0]!.y)
      .map((line) => line.sort((a, b) => a.x - b.x).map((i) => i.str));
    const { info } = await doc.getMetadata();
    return { shown: items.map((i) => i.str), items, rows, pages: doc.numPages, info: info as Record<string, unknown>, text };
  } finally {
    await doc.destroy();
  }
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
