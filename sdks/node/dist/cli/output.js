const cell = (v) => (v === undefined || v === null ? "" : typeof v === "object" ? JSON.stringify(v) : String(v));
/** Rows as aligned columns, headers in capitals (as doctl and neonctl print them). */
export function table(rows, columns) {
    const cells = rows.map((row) => columns.map(([, read]) => cell(read(row))));
    const headers = columns.map(([h]) => h.toUpperCase());
    const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((r) => r[i].length)));
    const line = (r) => r
        .map((c, i) => c.padEnd(widths[i]))
        .join("   ")
        .trimEnd();
    return [line(headers), ...cells.map(line)].join("\n") + "\n";
}
/** One record as `key: value` lines, nested objects flattened with dots. */
export function record(obj) {
    const pairs = [];
    const walk = (o, prefix) => {
        for (const [k, v] of Object.entries(o)) {
            if (v && typeof v === "object" && !Array.isArray(v))
                walk(v, `${prefix}${k}.`);
            else
                pairs.push([`${prefix}${k}`, Array.isArray(v) ? v.map(cell).join(", ") : cell(v)]);
        }
    };
    walk(obj, "");
    const width = Math.max(0, ...pairs.map(([k]) => k.length));
    return pairs.map(([k, v]) => `${`${k}:`.padEnd(width + 1)} ${v}`.trimEnd()).join("\n") + "\n";
}
const FRAMES = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
/**
 * Progress of a wait on stderr: a spinner redrawn in place on a terminal,
 * otherwise one plain line per change (logs and CI keep every step).
 */
export function progress(stream) {
    const tty = Boolean(stream.isTTY);
    let text = "";
    let frame = 0;
    const draw = () => stream.write(`\r\x1b[K${FRAMES[frame++ % FRAMES.length]} ${text}`);
    const timer = tty ? setInterval(draw, 100) : undefined;
    return {
        update(next) {
            if (next === text)
                return;
            text = next;
            if (tty)
                draw();
            else
                stream.write(`${next}\n`);
        },
        done(final) {
            if (timer)
                clearInterval(timer);
            stream.write(tty ? `\r\x1b[K✔ ${final}\n` : `${final}\n`);
        },
        fail() {
            if (timer)
                clearInterval(timer);
            if (tty)
                stream.write("\r\x1b[K");
        },
    };
}
