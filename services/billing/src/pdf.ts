/**
 * A one-page PDF 1.4 writer for text in the standard Helvetica font: enough
 * for an invoice, small enough to read in one sitting, and no dependency.
 * Coordinates are PDF points from the bottom-left corner of an A4 page.
 */

const PAGE_WIDTH = 595;
export const PAGE_HEIGHT = 842;

export interface PdfText {
  x: number;
  y: number;
  size: number;
  text: string;
  /** `right`: the text ends at x. */
  align?: "left" | "right";
}

/** A straight line (a table rule). */
export interface PdfRule {
  x1: number;
  y1: number;
  x2: number;
  y2: number;
}

// Helvetica's advance widths (1/1000 em) for ASCII 32-126, from its AFM metrics.
// prettier-ignore
const HELVETICA_WIDTHS = [
  278, 278, 355, 556, 556, 889, 667, 191, 333, 333, 389, 584, 278, 333, 278, 278,
  556, 556, 556, 556, 556, 556, 556, 556, 556, 556, 278, 278, 584, 584, 584, 556,
  1015, 667, 667, 722, 722, 667, 611, 778, 722, 278, 500, 667, 556, 833, 722, 778,
  667, 778, 722, 667, 611, 722, 667, 944, 667, 667, 611, 278, 278, 278, 469, 556,
  333, 556, 556, 500, 556, 556, 278, 556, 556, 222, 222, 500, 222, 833, 556, 556,
  556, 556, 333, 500, 278, 556, 500, 722, 500, 500, 500, 334, 260, 334, 584,
];

/**
 * The text as WinAnsiEncoding bytes (one per character). Latin-1 letters are
 * the same there; anything else cannot be shown by a standard font without
 * embedding one, so it becomes `?`.
 */
function winAnsi(text: string): string {
  return text.replace(/[^\x20-\x7e\xa0-\xff]/g, "?");
}

/** The width of `text` in points at `size`; non-ASCII letters count as an average glyph. */
export function textWidth(text: string, size: number): number {
  let units = 0;
  for (const ch of winAnsi(text)) units += HELVETICA_WIDTHS[ch.charCodeAt(0) - 32] ?? 556;
  return (units * size) / 1000;
}

/** A PDF literal string: `\`, `(` and `)` escaped. */
function literal(text: string): string {
  return `(${winAnsi(text).replace(/[\\()]/g, (c) => `\\${c}`)})`;
}

const num = (n: number) => (Number.isInteger(n) ? String(n) : n.toFixed(2).replace(/\.?0+$/, ""));

function contentStream(texts: readonly PdfText[], rules: readonly PdfRule[]): string {
  const ops: string[] = [];
  if (rules.length > 0) {
    ops.push("0.5 w");
    for (const r of rules) ops.push(`${num(r.x1)} ${num(r.y1)} m ${num(r.x2)} ${num(r.y2)} l S`);
  }
  for (const t of texts) {
    const x = t.align === "right" ? t.x - textWidth(t.text, t.size) : t.x;
    ops.push(`BT /F1 ${num(t.size)} Tf ${num(x)} ${num(t.y)} Td ${literal(t.text)} Tj ET`);
  }
  return ops.join("\n");
}

/**
 * The document's bytes: header, five objects and the document information,
 * the cross-reference table with each object's byte offset, the trailer.
 * Everything is one byte per character (latin1), so string lengths are byte
 * lengths.
 */
export function writePdf(page: { title: string; texts: readonly PdfText[]; rules?: readonly PdfRule[] }): Uint8Array {
  const content = contentStream(page.texts, page.rules ?? []);
  const objects = [
    "<< /Type /Catalog /Pages 2 0 R >>",
    "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
    `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 ${PAGE_WIDTH} ${PAGE_HEIGHT}] /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>`,
    "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    `<< /Length ${content.length} >>\nstream\n${content}\nendstream`,
    `<< /Title ${literal(page.title)} /Creator (dbaas) /Producer (dbaas) >>`,
  ];
  // The second line's high bytes tell transfer tools the file is binary.
  let out = "%PDF-1.4\n%\xe2\xe3\xcf\xd3\n";
  const offsets: number[] = [];
  objects.forEach((body, i) => {
    offsets.push(out.length);
    out += `${i + 1} 0 obj\n${body}\nendobj\n`;
  });
  const xref = out.length;
  // Each entry is exactly 20 bytes: 10-digit offset, 5-digit generation, type, and a two-byte end of line.
  out += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`;
  for (const offset of offsets) out += `${String(offset).padStart(10, "0")} 00000 n \n`;
  out += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R /Info ${objects.length} 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return new Uint8Array(Buffer.from(out, "latin1"));
}
