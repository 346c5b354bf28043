import { chmod, mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { dirname, join } from "node:path";

/** What `dbaas auth signup|login` remembers. */
export interface CliConfig {
  url?: string;
  token?: string;
  /** When the login token stops working (login tokens last an hour). */
  expires_at?: string;
  email?: string;
}

/** `$XDG_CONFIG_HOME/dbaas/config.json`, else `$HOME/.config/dbaas/config.json`. */
export function configPath(env: NodeJS.ProcessEnv): string {
  const base = env.XDG_CONFIG_HOME || join(env.HOME || homedir(), ".config");
  return join(base, "dbaas", "config.json");
}

export async function readConfig(path: string): Promise<CliConfig> {
  try {
    return JSON.parse(await readFile(path, "utf8")) as CliConfig;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return {};
    throw new Error(`cannot read ${path}: ${(err as Error).message}`);
  }
}

/** Written whole (temporary file, then rename) and readable by its owner only: it holds a credential. */
export async function writeConfig(path: string, config: CliConfig): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  await chmod(tmp, 0o600);
  await rename(tmp, path);
}

export async function removeConfigToken(path: string): Promise<boolean> {
  const config = await readConfig(path);
  if (!config.token) return false;
  const { token: _token, expires_at: _expires, ...rest } = config;
  if (Object.keys(rest).length === 0) await rm(path, { force: true });
  else await writeConfig(path, rest);
  return true;
}
