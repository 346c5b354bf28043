import type { Schemas } from "@dbaas/client";

export type LogEntry = Schemas["LogPage"]["entries"][number];

/** The API's severities, least severe first; a filter returns the one named and worse (docs/product.md, Logs). */
export const SEVERITIES = ["DEBUG", "INFO", "LOG", "NOTICE", "WARNING", "ERROR", "FATAL", "PANIC"] as const;

export type Severity = (typeof SEVERITIES)[number];

/** The filters shown: a severity ("" for all) and text ("" for none). */
export interface LogFilters {
  severity: Severity | "";
  q: string;
}

/** Entries per read: one page of the list, and at most this many new ones per follow read. */
export const LOG_PAGE = 50;

/** Between two reads of what is new while following (the page's other polling shares the rate limit: 20 reads a minute). */
export const FOLLOW_MS = 3_000;

/** What the API is asked for: only the filters set (an empty `q` is refused by the API, and means no filter). */
export function logQuery(filters: LogFilters, cursor?: string | null): { limit: number; severity?: Severity; q?: string; cursor?: string } {
  const q = filters.q.trim();
  return {
    limit: LOG_PAGE,
    ...(filters.severity ? { severity: filters.severity } : {}),
    ...(q ? { q } : {}),
    ...(cursor ? { cursor } : {}),
  };
}

const timeOf = (e: LogEntry) => (e.time ? Date.parse(e.time) : Number.NEGATIVE_INFINITY);

/**
 * The shown list, newest first, from pages the API gives oldest first: `newer` (a follow read) goes on
 * top, `older` (a "load older" read) below. The API's order is the log file's, in which processes'
 * entries can be a few milliseconds out of time order: the list is ordered by the entries' times (a stable
 * sort, so entries of the same instant keep the file's order, reversed).
 */
export function newestFirst(shown: LogEntry[], page: LogEntry[], where: "newer" | "older"): LogEntry[] {
  const reversed = [...page].reverse();
  const merged = where === "newer" ? [...reversed, ...shown] : [...shown, ...reversed];
  return merged.sort((a, b) => timeOf(b) - timeOf(a));
}

/** At most this many entries are shown while following: a busy server's log does not grow the page without bound. */
export const MAX_SHOWN = 1_000;

/**
 * What follow read `page` adds on top of `shown`, newest first, kept to the newest `MAX_SHOWN`; `trimmed` when
 * older ones left the view (what is below them can then no longer be loaded from the cursor the list had).
 */
export function followed(shown: LogEntry[], page: LogEntry[], max = MAX_SHOWN): { entries: LogEntry[]; trimmed: boolean } {
  const entries = newestFirst(shown, page, "newer");
  return entries.length > max ? { entries: entries.slice(0, max), trimmed: true } : { entries, trimmed: false };
}

/** The CSS class of a severity: errors and worse in red, warnings in amber. */
export function severityClass(severity: string): string {
  if (["ERROR", "FATAL", "PANIC"].includes(severity)) return "status status-failed";
  if (severity === "WARNING") return "status status-pending";
  return "status";
}

export type QueryOrder = "total_time" | "mean_time" | "calls";

/** Milliseconds as people read them: 0.42 ms, 12.3 ms, 4.56 s. */
export function duration(ms: number): string {
  if (ms >= 1000) return `${(ms / 1000).toFixed(2)} s`;
  if (ms >= 10) return `${ms.toFixed(1)} ms`;
  return `${ms.toFixed(2)} ms`;
}

/** The share of blocks found in the cache, or a dash when the statement read none. */
export function ratio(r: number | null): string {
  return r === null ? "—" : `${(r * 100).toFixed(1)} %`;
}
