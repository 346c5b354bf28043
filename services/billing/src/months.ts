/** The calendar month (UTC) containing `now`, as [start, end) — `end` is the first instant of the next month. */
export function monthOf(now: Date): { start: Date; end: Date } {
  const y = now.getUTCFullYear();
  const m = now.getUTCMonth();
  return { start: new Date(Date.UTC(y, m, 1)), end: new Date(Date.UTC(y, m + 1, 1)) };
}

/** A month's name, `YYYY-MM`, from its first instant. */
export const periodName = (start: Date) => start.toISOString().slice(0, 7);

/** A month as metered_months keys it: its first day, `YYYY-MM-DD`. */
export type MonthKey = string;

/** The month key of the month containing `at`. */
export const monthKey = (at: Date): MonthKey => monthOf(at).start.toISOString().slice(0, 10);

/** The hours of the calendar month starting at `monthStart` (672 to 744). */
export const hoursInMonth = (monthStart: Date) => (monthOf(monthStart).end.getTime() - monthStart.getTime()) / 3_600_000;
