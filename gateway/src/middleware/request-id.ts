import { randomFillSync } from "node:crypto";
import type { RequestHandler } from "express";
import "../locals.ts";

/** A client's X-Request-Id is echoed only when it matches this (the generated ones do too). */
export const SANE_REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;
const ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789";
// Bytes at or above this are rejected: 252 is the largest multiple of 36 below 256 (no modulo bias).
const LIMIT = 256 - (256 % ALPHABET.length);
const ID_LENGTH = 24;

/**
 * `req_` and 24 random lowercase alphanumerics. Random bytes are drawn 4 KiB
 * at a time: one system call per ~160 ids instead of one per request.
 */
export function createIdSource(): () => string {
  const pool = Buffer.alloc(4096);
  let at = pool.length;
  return () => {
    let id = "req_";
    while (id.length < ID_LENGTH + 4) {
      if (at === pool.length) {
        randomFillSync(pool);
        at = 0;
      }
      const b = pool[at++]!;
      if (b < LIMIT) id += ALPHABET[b % ALPHABET.length];
    }
    return id;
  };
}

/**
 * Gives every request an id, echoed in `X-Request-Id` and `meta.request_id`.
 * A client-supplied id is kept when it is a plain token, so a client can
 * correlate its own logs; anything else is replaced, never reflected.
 */
export function requestId(): RequestHandler {
  const newId = createIdSource();
  return (req, res, next) => {
    const supplied = req.headers["x-request-id"];
    const id = typeof supplied === "string" && SANE_REQUEST_ID.test(supplied) ? supplied : newId();
    // Echoed in X-Request-Id by stampResponses (security-headers.ts).
    res.locals.requestId = id;
    next();
  };
}
