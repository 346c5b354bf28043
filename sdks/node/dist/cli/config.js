import { chmod, mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
/** `$XDG_CONFIG_HOME/dbaas/config.json`, else `$HOME/.config/dbaas/config.json`. */
export function configPath(env) {
    const base = env.XDG_CONFIG_HOME || join(env.HOME || homedir(), ".config");
    return join(base, "dbaas", "config.json");
}
export async function readConfig(path) {
    try {
        return JSON.parse(await readFile(path, "utf8"));
    }
    catch (err) {
        if (err.code === "ENOENT")
            return {};
        throw new Error(`cannot read ${path}: ${err.message}`);
    }
}
/** Written whole (temporary file, then rename) and readable by its owner only: it holds a credential. */
export async function writeConfig(path, config) {
    await mkdir(dirname(path), { recursive: true, mode: 0o700 });
    const tmp = `${path}.${process.pid}.tmp`;
    await writeFile(tmp, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
    await chmod(tmp, 0o600);
    await rename(tmp, path);
}
export async function removeConfigToken(path) {
    const config = await readConfig(path);
    if (!config.token)
        return false;
    const { token: _token, expires_at: _expires, ...rest } = config;
    if (Object.keys(rest).length === 0)
        await rm(path, { force: true });
    else
        await writeConfig(path, rest);
    return true;
}
