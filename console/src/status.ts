/** Statuses that change by themselves: while a database or replica is in one, its page reads it again every few seconds. */
export const TRANSITIONAL = new Set(["provisioning", "starting", "stopping", "restarting", "resizing"]);

export const isTransitional = (status: string): boolean => TRANSITIONAL.has(status);

/** How often a page reads again: every 3 s while something is changing, every 30 s otherwise (2 requests a minute idle). */
export const FAST_MS = 3_000;
export const IDLE_MS = 30_000;
