/**
 * Per-instance serialisation: operations on one id run one after another, in
 * the order they were asked for; different ids run concurrently. A failed
 * operation does not stop the next one.
 */
export interface Serializer {
  /** Runs `fn` after every operation queued before it for `id`. Joins the queue synchronously. */
  run<T>(id: string, fn: () => Promise<T>): Promise<T>;
  /** Whether an operation for `id` is queued or under way. */
  isQueued(id: string): boolean;
}

export function createSerializer(): Serializer {
  const chains = new Map<string, Promise<unknown>>();
  return {
    run<T>(id: string, fn: () => Promise<T>): Promise<T> {
      const prev = chains.get(id) ?? Promise.resolve();
      const run = prev.then(fn, fn);
      const settled = run.then(
        () => {},
        () => {},
      );
      chains.set(id, settled);
      void settled.then(() => {
        if (chains.get(id) === settled) chains.delete(id);
      });
      return run;
    },
    isQueued: (id) => chains.has(id),
  };
}
