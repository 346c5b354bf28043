import { describe, expect, it } from "vitest";
import { createReadBatcher, type BatchLoad } from "../src/index.ts";

/** A batcher over `answer`, recording the keys of every load it makes. */
function recorded<V>(answer: BatchLoad<string, V>, maxBatchSize = 100) {
  const loads: string[][] = [];
  const get = createReadBatcher(
    async (keys: string[]) => {
      loads.push(keys);
      return await answer(keys);
    },
    { maxBatchSize, keyOf: (k) => k },
  );
  return { get, loads };
}

const upper: BatchLoad<string, string> = async (keys) => keys.map((k) => k.toUpperCase());

/** Each outcome: the value, or the rejection's message prefixed with "!". */
const outcomes = <V>(promises: Promise<V>[]) =>
  Promise.all(
    promises.map((p) =>
      p.then(
        (v) => v,
        (err: Error) => `!${err.message}`,
      ),
    ),
  );

describe("createReadBatcher", () => {
  it("loads the keys asked for in one iteration together, in call order, and answers each caller its own value", async () => {
    const { get, loads } = recorded(upper);
    expect(await Promise.all([get("a"), get("b"), get("c")])).toEqual(["A", "B", "C"]);
    expect(loads).toEqual([["a", "b", "c"]]);
  });

  it("batches calls made from separate callbacks of one iteration, where a microtask flush would not", async () => {
    const { get, loads } = recorded(upper);
    // Two timers due together run in one timers phase, each as its own callback with microtasks drained in between.
    const calls = await new Promise<Promise<string>[]>((resolve) => {
      const made: Promise<string>[] = [];
      setTimeout(() => made.push(get("a")), 1);
      setTimeout(() => {
        made.push(get("b"));
        resolve(made);
      }, 1);
    });
    expect(await Promise.all(calls)).toEqual(["A", "B"]);
    expect(loads).toEqual([["a", "b"]]);
  });

  it("loads a key asked for twice once, and the next iteration's keys in a load of their own", async () => {
    const { get, loads } = recorded(upper);
    const first = [get("a"), get("b"), get("a")];
    expect(first[0]).toBe(first[2]);
    expect(await Promise.all(first)).toEqual(["A", "B", "A"]);
    expect(await get("a")).toBe("A");
    expect(loads).toEqual([["a", "b"], ["a"]]);
  });

  it("without keyOf, gives every call its own entry, equal keys included", async () => {
    const loads: string[][] = [];
    let n = 0;
    const count = createReadBatcher(
      async (keys: string[]) => {
        loads.push(keys);
        return keys.map((k) => `${k}${++n}`);
      },
      { maxBatchSize: 100 },
    );
    expect(await Promise.all([count("a"), count("a"), count("b")])).toEqual(["a1", "a2", "b3"]);
    expect(await Promise.all([count("a"), count("a")])).toEqual(["a4", "a5"]);
    expect(loads).toEqual([
      ["a", "a", "b"],
      ["a", "a"],
    ]);
  });

  it("splits a batch bigger than maxBatchSize into several loads", async () => {
    const { get, loads } = recorded(upper, 2);
    expect(await Promise.all(["a", "b", "c", "d", "e"].map(get))).toEqual(["A", "B", "C", "D", "E"]);
    expect(loads).toEqual([["a", "b"], ["c", "d"], ["e"]]);
  });

  it("passes undefined through as a value", async () => {
    const { get } = recorded<string | undefined>(async (keys) => keys.map((k) => (k === "gone" ? undefined : k)));
    expect(await Promise.all([get("here"), get("gone")])).toEqual(["here", undefined]);
  });

  it("rejects only the callers of a key the load answered with an Error", async () => {
    const { get, loads } = recorded(async (keys) => keys.map((k) => (k.startsWith("bad") ? new Error(`${k} refused`) : k)));
    expect(await outcomes([get("a"), get("bad1"), get("b"), get("bad1"), get("bad2")])).toEqual([
      "a",
      "!bad1 refused",
      "b",
      "!bad1 refused",
      "!bad2 refused",
    ]);
    expect(loads).toHaveLength(1);
  });

  it("rejects every caller of a failed load with its error, and only those; later batches load again", async () => {
    const { get, loads } = recorded(async (keys) => {
      if (keys.includes("boom")) throw new Error("load failed");
      return keys.map((k) => k.toUpperCase());
    }, 2);
    expect(await outcomes([get("a"), get("boom"), get("b"), get("c")])).toEqual(["!load failed", "!load failed", "B", "C"]);
    expect(await get("a")).toBe("A");
    expect(loads).toEqual([["a", "boom"], ["b", "c"], ["a"]]);
  });

  it("rejects every caller when the load answers a different number of values than keys", async () => {
    const { get } = recorded(async (keys) => keys.slice(1));
    expect(await outcomes([get("a"), get("b")])).toEqual([
      "!a batch load answered 1 values for 2 keys",
      "!a batch load answered 1 values for 2 keys",
    ]);
  });
});
