import express, { type Request, type RequestHandler } from "express";
import { badRequest } from "../errors.ts";

const MAX_BODY = "1mb";

// The content type is checked before this parser runs, so it may take any. Any JSON
// value parses (not only objects and arrays): a well-formed body that is not an
// object is then a validation failure, 422, not a malformed request.
const json = express.json({ limit: MAX_BODY, strict: false, type: () => true });

function hasBody(req: Request): boolean {
  const length = req.get("content-length");
  return req.get("transfer-encoding") !== undefined || (length !== undefined && length !== "0");
}

/**
 * Parses a JSON request body of at most 1 MB into `req.body` (`{}` when there
 * is none, so a missing body yields field-level 422s rather than a 400).
 * A body in another content type is refused with 400 validation_error rather
 * than 415: docs/product.md (Envelope and errors) counts a wrong content type among malformed requests,
 * and clients then handle a single "bad request" shape.
 */
export const parseJsonBody: RequestHandler = (req, res, next) => {
  if (!hasBody(req)) {
    req.body = {};
    next();
    return;
  }
  if (!req.is(["application/json", "application/*+json"])) {
    throw badRequest("request body must be JSON (Content-Type: application/json)");
  }
  res.locals.stage = "body";
  json(req, res, next);
};
