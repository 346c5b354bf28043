import type { Response } from "express";
import type { ApiError } from "../errors.ts";
import "../locals.ts";

export interface PageMeta {
  page: number;
  perPage: number;
  total: number;
}

/** What a route handler produces; the envelope is applied here, in one place. */
export type Reply =
  | { kind: "data"; status: number; data: unknown }
  /** `extra`: fields of `data` beside the items (a list's `extra` in the route table). */
  | { kind: "list"; name: string; items: unknown[]; page: PageMeta; extra?: Record<string, unknown> }
  | { kind: "empty" }
  /** A download: a string is text sent as UTF-8 (a PEM), a Buffer goes out byte for byte (a PDF). */
  | { kind: "file"; contentType: string; filename: string; body: string | Buffer }
  /** JSON that is a document in its own right (the OpenAPI description), not an API resource. */
  | { kind: "document"; body: unknown };

export const ok = (data: unknown): Reply => ({ kind: "data", status: 200, data });
export const created = (data: unknown): Reply => ({ kind: "data", status: 201, data });
/** Accepted: the work goes on after the answer (a backup). */
export const accepted = (data: unknown): Reply => ({ kind: "data", status: 202, data });
export const list = (name: string, items: unknown[], page: PageMeta, extra?: Record<string, unknown>): Reply => ({
  kind: "list",
  name,
  items,
  page,
  ...(extra && { extra }),
});
export const noContent = (): Reply => ({ kind: "empty" });
export const file = (contentType: string, filename: string, body: string | Buffer): Reply => ({
  kind: "file",
  contentType,
  filename,
  body,
});

export const document = (body: unknown): Reply => ({ kind: "document", body });

/**
 * Writes a JSON body without Express's res.json/res.send: those look the
 * content type up, re-parse it to add a charset and evaluate freshness
 * (304s), none of which applies to an API whose responses are no-store.
 * Node drops the body of a HEAD response by itself.
 */
function sendJson(res: Response, status: number, body: unknown): void {
  const json = JSON.stringify(body);
  res.writeHead(status, ["Content-Type", "application/json; charset=utf-8", "Content-Length", String(Buffer.byteLength(json))]);
  res.end(json);
}

/**
 * File names come from upstream services; anything beyond a plain ASCII name
 * would break the quoted header value (or make Node refuse the header).
 */
const safeFilename = (name: string) => name.replace(/[^A-Za-z0-9._-]/g, "_");

export function sendReply(res: Response, reply: Reply): void {
  // The request deadline answered already, or is answering (middleware/deadline.ts: it may still be reading the
  // rate-limit headers from a Redis that hangs): this late answer has nobody to go to.
  if (res.headersSent || res.locals.deadlineMissed) return;
  const meta = { request_id: res.locals.requestId };
  switch (reply.kind) {
    case "data":
      sendJson(res, reply.status, { data: reply.data, meta });
      return;
    case "list": {
      const { page, perPage, total } = reply.page;
      sendJson(res, 200, {
        data: { [reply.name]: reply.items, ...reply.extra },
        meta: { ...meta, page, per_page: perPage, total, total_pages: Math.ceil(total / perPage) },
      });
      return;
    }
    case "empty":
      res.status(204).end();
      return;
    case "file": {
      const text = typeof reply.body === "string";
      res.writeHead(200, [
        "Content-Type",
        text ? `${reply.contentType}; charset=utf-8` : reply.contentType,
        "Content-Length",
        String(Buffer.byteLength(reply.body)),
        "Content-Disposition",
        `attachment; filename="${safeFilename(reply.filename)}"`,
      ]);
      res.end(reply.body);
      return;
    }
    case "document":
      sendJson(res, 200, reply.body);
      return;
  }
}

export function sendError(res: Response, err: ApiError): void {
  if (res.headersSent) return;
  for (const [name, value] of Object.entries(err.headers)) res.setHeader(name, value);
  sendJson(res, err.status, {
    error: { code: err.code, message: err.message, details: err.details },
    meta: { request_id: res.locals.requestId },
  });
}
