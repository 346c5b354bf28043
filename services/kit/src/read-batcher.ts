/**
 * Loads the values of many keys in one round trip; the answer lists, for each
 * key in order, its value, or an Error that rejects that key's callers alone
 * (so a value is never itself an Error).
 */
export type BatchLoad<K, V> = (keys: K[]) => Promise<(V | Error)[]>;

export interface ReadBatcherOptions<K> {
  /** Most keys one load is given; a bigger batch is split into several loads. */
  maxBatchSize: number;
  /**
   * Equal strings for keys that must get the same answer: each is loaded once
   * per batch. Without it every call is its own entry of the batch (for loads
   * that are not reads, such as counting one request each).
   */
  keyOf?: (key: K) => string;
}

interface Pending<K, V> {
  key: K;
  promise: Promise<V>;
  resolve: (value: V) => void;
  reject: (err: unknown) => void;
}

/**
 * Coalesces the lookups made in the same event-loop iteration into batched
 * loads (the DataLoader pattern): under load many requests reach the same
 * read in one iteration (they arrive together over one HTTP/2 session), and
 * one round trip for all of them costs far less — a pool checkout or an
 * HTTP/2 stream, the framing, a statement execution — than one each. Callers
 * whose keys are equal share one promise.
 *
 * The batch is flushed by `setImmediate`, once the event loop has run the
 * I/O callbacks of its current iteration. Not by `process.nextTick` or a
 * microtask: Node drains both after every callback from native code, and an
 * HTTP/2 session hands each stream of a socket read to JavaScript in its own
 * callback, so those flush once per request (measured: one key per query at
 * 50 concurrent calls over one session). `setImmediate` still flushes in the
 * iteration the call was made in, with no timer and no wait for I/O: a lone
 * call waits only for the callbacks already running in that iteration.
 *
 * A failed load rejects every caller of that batch with its error; a key the
 * load answered with an Error rejects its callers with it; later batches are
 * unaffected.
 */
export function createReadBatcher<K, V>(load: BatchLoad<K, V>, opts: ReadBatcherOptions<K>): (key: K) => Promise<V> {
  let queued = new Map<string, Pending<K, V>>();
  // Names the calls of the current batch when there is no keyOf.
  let calls = 0;

  const flush = () => {
    const batch = [...queued.values()];
    queued = new Map();
    calls = 0;
    for (let start = 0; start < batch.length; start += opts.maxBatchSize) {
      void settle(batch.slice(start, start + opts.maxBatchSize));
    }
  };

  const settle = async (batch: Pending<K, V>[]) => {
    try {
      const values = await load(batch.map((p) => p.key));
      // Positions would pair callers with other keys' values: nobody gets one.
      if (values.length !== batch.length) throw new Error(`a batch load answered ${values.length} values for ${batch.length} keys`);
      batch.forEach((p, i) => {
        const value = values[i] as V | Error;
        if (value instanceof Error) p.reject(value);
        else p.resolve(value);
      });
    } catch (err) {
      for (const p of batch) p.reject(err);
    }
  };

  return (key) => {
    const k = opts.keyOf ? opts.keyOf(key) : String(calls++);
    const existing = queued.get(k);
    if (existing) return existing.promise;
    if (queued.size === 0) setImmediate(flush);
    let resolve!: Pending<K, V>["resolve"];
    let reject!: Pending<K, V>["reject"];
    const promise = new Promise<V>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    queued.set(k, { key, promise, resolve, reject });
    return promise;
  };
}
