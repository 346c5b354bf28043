import { useEffect, useRef, useState } from "preact/hooks";
import { problemOf } from "./errors.ts";
import { signOut } from "./session.ts";

/**
 * Bounded polling: `read` runs now and then every `intervalMs` while
 * `active(value)` holds (e.g. a database in a transitional status), never two
 * reads at once, none while the tab is hidden (it reads again when shown).
 * Idle pages poll slowly (`idleMs`) or not at all (`idleMs: 0`): the
 * organization's rate limit (60 requests a minute on the free plan) is shared
 * with everything else it runs.
 */
export interface PollOptions<T> {
  intervalMs: number;
  /** Between reads when `active` is false; 0: stop until `refresh()`. */
  idleMs: number;
  active: (value: T) => boolean;
}

export interface Poller<T> {
  value: T | undefined;
  error: unknown;
  /** Reads now (after an action), and polls again from here. */
  refresh: () => void;
}

/** The scheduling itself, outside any component (tested on its own). */
export function startPolling<T>(
  read: () => Promise<T>,
  opts: PollOptions<T>,
  onValue: (value: T) => void,
  onError: (err: unknown) => void,
  doc: { hidden: boolean; addEventListener: Document["addEventListener"]; removeEventListener: Document["removeEventListener"] } = document,
): { refresh: () => void; stop: () => void } {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let inFlight = false;
  let again = false;
  let stopped = false;
  let last: T | undefined;
  const schedule = () => {
    if (stopped || doc.hidden) return;
    const wait = last === undefined ? opts.intervalMs : opts.active(last) ? opts.intervalMs : opts.idleMs;
    if (wait > 0) timer = setTimeout(tick, wait);
  };
  const tick = async () => {
    clearTimeout(timer);
    timer = undefined;
    if (stopped) return;
    if (inFlight) {
      again = true;
      return;
    }
    inFlight = true;
    try {
      last = await read();
      if (!stopped) onValue(last);
    } catch (err) {
      if (!stopped) onError(err);
    } finally {
      inFlight = false;
    }
    if (again) {
      again = false;
      void tick();
    } else schedule();
  };
  const visibility = () => {
    if (!doc.hidden && timer === undefined && !inFlight) void tick();
    else if (doc.hidden) {
      clearTimeout(timer);
      timer = undefined;
    }
  };
  doc.addEventListener("visibilitychange", visibility);
  void tick();
  return {
    refresh: () => void tick(),
    stop: () => {
      stopped = true;
      clearTimeout(timer);
      doc.removeEventListener("visibilitychange", visibility);
    },
  };
}

export function usePoll<T>(read: () => Promise<T>, opts: PollOptions<T>, deps: unknown[]): Poller<T> {
  const [value, setValue] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const control = useRef<{ refresh: () => void }>({ refresh: () => {} });
  // The caller names what restarts the polling (`deps`), as with useEffect itself.
  useEffect(() => {
    // What was read for other deps (another database's id) is not shown as this one's.
    setValue(undefined);
    setError(undefined);
    const poller = startPolling(
      read,
      opts,
      (v) => {
        setValue(v);
        setError(undefined);
      },
      (err) => {
        // An expired or revoked token: back to the login page.
        if (problemOf(err).unauthenticated) signOut();
        setError(err);
      },
    );
    control.current = poller;
    return poller.stop;
  }, deps);
  return { value, error, refresh: () => control.current.refresh() };
}
