import { fileURLToPath } from "node:url";

/** The service's migrations (`NNNN_name.sql`), applied at start by the kit's `migrate` (services/kit/src/db.ts). */
export const MIGRATIONS_DIR = fileURLToPath(new URL("./migrations", import.meta.url));
