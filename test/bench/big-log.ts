/**
 * A large jsonlog file as PostgreSQL's logging collector writes them, for the `/logs` benches (logs-bench.ts through
 * the agent's handlers, inside-bench.ts through the public API): ~300-byte LOG lines, an ERROR every ~1 MiB and a
 * WARNING naming `needle_<n>` every ~200 MiB (what a text search finds).
 */
import { open } from "node:fs/promises";
import path from "node:path";

const line = (t: number, severity: string, message: string, extra = "") =>
  `{"timestamp":"${new Date(t).toISOString().replace("T", " ").replace("Z", " UTC")}","user":"dbadmin","dbname":"defaultdb","pid":4242,"remote_host":"127.0.0.1","remote_port":5432,"session_id":"6745a1b2.1092","line_num":1,"ps":"SELECT","session_start":"2026-11-01 00:00:00 UTC","vxid":"3/42","txid":0,"error_severity":"${severity}","message":"${message}"${extra},"application_name":"app","backend_type":"client backend","query_id":0}\n`;

/** The file's name follows the collector's (`postgresql-YYYYMMDD-HHMMSS.json`, UTC) at `startedAt`; returns it. */
export async function bigLog(dir: string, bytes: number, startedAt = new Date(Date.UTC(2026, 10, 1, 0, 0, 0))): Promise<string> {
  const T0 = startedAt.getTime();
  const name = `postgresql-${startedAt
    .toISOString()
    .slice(0, 19)
    .replace("T", "-")
    .replaceAll(/[-:]/g, "")
    .replace(/^(\d{8})/, "$1-")}.json`;
  const fh = await open(path.join(dir, name), "w", 0o600);
  let block = "";
  for (let i = 0; i < 3500; i++)
    block += line(T0 + i, "LOG", `duration: ${(i % 97) / 10} ms  statement: SELECT * FROM orders WHERE id = $1`);
  const blockBytes = Buffer.byteLength(block);
  let written = 0;
  for (let n = 0; written < bytes; n++) {
    const err = line(
      T0 + n * 1000,
      "ERROR",
      `relation \\"missing_${n}\\" does not exist`,
      `,"state_code":"42P01","statement":"SELECT * FROM missing_${n}"`,
    );
    const rare = n % 200 === 199 ? line(T0 + n * 1000 + 1, "WARNING", `needle_${n} found`) : "";
    await fh.write(block + err + rare);
    written += blockBytes + Buffer.byteLength(err + rare);
  }
  await fh.close();
  return name;
}
