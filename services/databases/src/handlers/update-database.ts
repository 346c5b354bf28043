import { Code, ConnectError } from "@connectrpc/connect";
import { Validator, withTransaction } from "@dbaas/kit";
import type { UpdateDatabaseRequest } from "@dbaas/proto/databases";
import type { AppContext } from "../context.ts";
import { lockOwned, nameTaken, rename } from "../db/databases.ts";
import { transitionFrom } from "../lifecycle.ts";
import { toDatabase } from "../mappers.ts";
import { validateName } from "../validation.ts";

/** Renames a database (in any status); a name already taken by a live database of the organization, case aside, is ALREADY_EXISTS. */
export function updateDatabase(ctx: AppContext) {
  return async (req: UpdateDatabaseRequest) => {
    const v = new Validator();
    const name = req.name === undefined ? undefined : validateName(v, req.name);
    v.throwIfAny();
    try {
      const row = await withTransaction(ctx.pool, async (db) => {
        const current = await lockOwned(db, req.organizationId, req.id);
        if (name === undefined || name === current.name) return current;
        transitionFrom("rename", current.status);
        return await rename(db, req.id, name);
      });
      return { database: toDatabase(row, ctx.cfg.databaseDomain) };
    } catch (err) {
      if (nameTaken(err)) throw new ConnectError(`a database named "${name}" already exists`, Code.AlreadyExists);
      throw err;
    }
  };
}
