import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tarWithout } from "../../src/backups/tar-filter.ts";

// The filter base backups go through, against archives GNU tar writes (ustar as
// BASE_BACKUP does, and gnu/pax with long names), read back by GNU tar.

async function filtered(archive: Buffer, chunk: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  const source = Readable.from(
    (function* () {
      for (let at = 0; at < archive.length; at += chunk) yield archive.subarray(at, at + chunk);
    })(),
  );
  for await (const c of source.pipe(tarWithout(["server.key"]))) parts.push(c as Buffer);
  return Buffer.concat(parts);
}

const list = (archive: Buffer) => execFileSync("tar", ["-t"], { input: archive }).toString().trim().split("\n");

describe("tarWithout", () => {
  let dir: string;
  const longDir = `base/${"d".repeat(120)}`;
  const big = randomBytes(700_000);

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "dbaas-tar-"));
    const data = path.join(dir, "data");
    await mkdir(path.join(data, longDir), { recursive: true });
    await writeFile(path.join(data, "PG_VERSION"), "17\n");
    await writeFile(path.join(data, "server.crt"), "-----BEGIN CERTIFICATE-----\n");
    await writeFile(path.join(data, "server.key"), "-----BEGIN PRIVATE KEY-----\n");
    await writeFile(path.join(data, longDir, "server.key"), "not the top-level key");
    await writeFile(path.join(data, "base", "1"), big);
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  for (const format of ["ustar", "gnu", "pax"]) {
    it(`drops server.key and only it (${format} archive), whatever the chunking`, async () => {
      const names = format === "ustar" ? ["PG_VERSION", "server.crt", "server.key", "base/1"] : ["."];
      const archive = execFileSync("tar", ["-c", `--format=${format}`, "-C", path.join(dir, "data"), ...names], { maxBuffer: 1 << 26 });
      const before = list(archive);
      expect(before.some((n) => n.replace(/^\.\//, "") === "server.key")).toBe(true);
      for (const chunk of [511, 4096, 1 << 20]) {
        const out = await filtered(archive, chunk);
        const after = list(out);
        expect(after, `${chunk}`).toEqual(before.filter((n) => n.replace(/^\.\//, "") !== "server.key"));
        expect(out.includes("PRIVATE KEY")).toBe(false);
        // What is kept is kept byte for byte.
        const x = path.join(dir, `x-${format}-${chunk}`);
        await mkdir(x);
        execFileSync("tar", ["-x", "-C", x], { input: out });
        expect((await readFile(path.join(x, "base", "1"))).equals(big)).toBe(true);
      }
    });
  }

  it("refuses an archive cut inside a member", async () => {
    const archive = execFileSync("tar", ["-c", "--format=ustar", "-C", path.join(dir, "data"), "base/1"], { maxBuffer: 1 << 26 });
    await expect(filtered(archive.subarray(0, 100_000), 4096)).rejects.toThrow(/ends inside a member/);
  });
});
