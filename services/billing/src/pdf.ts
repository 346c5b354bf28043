import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import PDFDocument from "pdfkit";

/**
 * PDF documents on pdfkit with DejaVu Sans embedded (subset to the glyphs used),
 * so names in Latin, Greek, Cyrillic, Armenian, Georgian, Hebrew or Arabic
 * script show as written and can be copied and searched (pdfkit writes each
 * font's ToUnicode map). Known limits: a character DejaVu Sans has no glyph for
 * (CJK, Indic, Thai) is written as `?` (showing it needs a second font to fall
 * back on), and pdfkit has no bidirectional algorithm, so the words of a
 * right-to-left phrase are shaped each but placed left to right.
 */

/** The registered font families: regular text and headings. */
export const FONT = { regular: "DejaVuSans", bold: "DejaVuSans-Bold" } as const;

/** What we use of a fontkit font; pdfkit takes the object itself as a font source. */
interface FontkitFont {
  hasGlyphForCodePoint(codePoint: number): boolean;
  layout(text: string): unknown;
}

const require = createRequire(import.meta.url);
let faces: Record<keyof typeof FONT, FontkitFont> | undefined;

/**
 * DejaVu Sans, opened once per process. Parsing its TrueType tables (~700 KB a
 * face, with large shaping tables) is what most of a render cost when each
 * document opened the files again (~300 ms an invoice; ~20 ms with the faces
 * kept). Opened with the fontkit that pdfkit itself depends on, so the objects
 * are always the version pdfkit expects.
 */
function fonts(): Record<keyof typeof FONT, FontkitFont> {
  if (!faces) {
    const fontkit = createRequire(require.resolve("pdfkit"))("fontkit") as { create(data: Uint8Array): FontkitFont };
    const open = (file: string) => fontkit.create(readFileSync(require.resolve(`dejavu-fonts-ttf/ttf/${file}`)));
    faces = { regular: open("DejaVuSans.ttf"), bold: open("DejaVuSans-Bold.ttf") };
  }
  return faces;
}

/** `text` with each character both faces lack a glyph for written as `?` (an empty box otherwise, and lost when copied). */
export function printable(text: string): string {
  const { regular, bold } = fonts();
  let out = "";
  for (const ch of text) {
    const cp = ch.codePointAt(0)!;
    out += regular.hasGlyphForCodePoint(cp) && bold.hasGlyphForCodePoint(cp) ? ch : "?";
  }
  return out;
}

export interface PdfInfo {
  title: string;
  /** The document's date: with it fixed, the same content renders to the same bytes. */
  createdAt: Date;
}

/**
 * The bytes of an A4 document (PDF 1.4, 50 pt margins) that `draw` lays out,
 * with FONT.regular selected and every page kept until the end (`switchToPage`
 * works, for footers). Coordinates are pdfkit's: points from the top-left corner.
 */
export function renderPdf(info: PdfInfo, draw: (doc: PDFKit.PDFDocument) => void): Promise<Uint8Array> {
  const { regular, bold } = fonts();
  // pdfkit takes a fontkit font wherever it takes a font file; its typings name files only.
  const source = (face: FontkitFont) => face as unknown as string;
  const doc = new PDFDocument({
    size: "A4",
    margin: 50,
    pdfVersion: "1.4",
    // The regular face as the default font, so pdfkit never loads its Helvetica metrics.
    font: source(regular),
    displayTitle: true,
    bufferPages: true,
    info: { Title: info.title, Creator: "dbaas", Producer: "dbaas", CreationDate: info.createdAt },
  });
  doc.registerFont(FONT.regular, source(regular));
  doc.registerFont(FONT.bold, source(bold));
  const chunks: Buffer[] = [];
  return new Promise((resolve, reject) => {
    doc.on("data", (chunk: Buffer) => chunks.push(chunk));
    doc.on("end", () => resolve(new Uint8Array(Buffer.concat(chunks))));
    doc.on("error", reject);
    try {
      doc.font(FONT.regular);
      draw(doc);
      doc.end();
    } catch (err) {
      reject(err);
    }
  });
}
