import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";

/**
 * What the agent last carried out for an instance, persisted so that after a
 * crash it knows whether a spec generation (a restart, a resize) was already
 * applied — and applies it again if it was not. Written atomically.
 */
export interface AppliedState {
  generation: string;
  credentialsGeneration: string;
  tier: string;
}

export function createAppliedStore(dataDir: string) {
  const dir = join(dataDir, "applied");
  const file = (id: string) => join(dir, `${id}.json`);
  return {
    async read(id: string): Promise<AppliedState | undefined> {
      try {
        return JSON.parse(await readFile(file(id), "utf8")) as AppliedState;
      } catch {
        return undefined;
      }
    },
    async write(id: string, state: AppliedState): Promise<void> {
      await mkdir(dir, { recursive: true });
      const tmp = `${file(id)}.tmp`;
      await writeFile(tmp, JSON.stringify(state));
      await rename(tmp, file(id));
    },
    async remove(id: string): Promise<void> {
      await rm(file(id), { force: true });
    },
  };
}

export type AppliedStore = ReturnType<typeof createAppliedStore>;
