/** `node:timers/promises`'s setTimeout (the client's retry waits) on the browser's timer, honouring an AbortSignal. */
export function setTimeout<T = void>(ms: number, value?: T, opts: { signal?: AbortSignal | undefined } = {}): Promise<T> {
  return new Promise((resolve, reject) => {
    const signal = opts.signal;
    if (signal?.aborted) return reject(signal.reason);
    const timer = globalThis.setTimeout(() => {
      signal?.removeEventListener("abort", abort);
      resolve(value as T);
    }, ms);
    const abort = () => {
      globalThis.clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", abort, { once: true });
  });
}
