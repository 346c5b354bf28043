import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import net from "node:net";

/** True when nothing listens on 127.0.0.1:`port` (a bind succeeds). */
export function portFree(port: number): Promise<boolean> {
  return new Promise((done) => {
    const probe = net.createServer();
    probe.once("error", () => done(false));
    probe.listen(port, "127.0.0.1", () => probe.close(() => done(true)));
  });
}

/**
 * Which process listens on TCP `port`, as "pid 123 (postgres -D …)", when
 * /proc lets us see it: the socket's inode from /proc/net/tcp{,6}, then the
 * process holding that inode. Undefined when it cannot tell (another user's
 * process, another network namespace).
 */
export function portOwner(port: number): string | undefined {
  const hex = port.toString(16).toUpperCase().padStart(4, "0");
  const inodes = new Set<string>();
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text = "";
    try {
      text = readFileSync(table, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      // local_address is "ADDR:PORT"; state 0A is LISTEN.
      if (f[1]?.endsWith(`:${hex}`) && f[3] === "0A" && f[9]) inodes.add(f[9]);
    }
  }
  if (inodes.size === 0) return undefined;
  for (const pid of readdirSync("/proc").filter((n) => /^\d+$/.test(n))) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      let target = "";
      try {
        target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        continue;
      }
      const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
      if (inode && inodes.has(inode)) {
        const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean).join(" ");
        return `pid ${pid} (${cmd.length > 120 ? `${cmd.slice(0, 117)}…` : cmd})`;
      }
    }
  }
  return undefined;
}
