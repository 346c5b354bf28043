import type pg from "pg";

/** The pool (one statement, its own transaction) or a client inside the caller's transaction. */
export type Queryable = pg.Pool | pg.PoolClient;
