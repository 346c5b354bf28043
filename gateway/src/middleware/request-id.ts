import type { RequestHandler } from "express";
import { randomToken } from "@dbaas/kit";
import "../locals.ts";

const SANE_ID = /^[A-Za-z0-9._-]{1,128}$/;

/**
 * Gives every request an id, echoed in `X-Request-Id` and `meta.request_id`.
 * A client-supplied id is kept when it is a plain token, so a client can
 * correlate its own logs; anything else is replaced, never reflected.
 */
export function requestId(): RequestHandler {
  return (req, res, next) => {
    const supplied = req.get("x-request-id");
    const id = supplied !== undefined && SANE_ID.test(supplied) ? supplied : `req_${randomToken(24)}`;
    res.locals.requestId = id;
    res.set("X-Request-Id", id);
    next();
  };
}
