import type { AddressInfo } from "node:net";
import express, { type ErrorRequestHandler, type RequestHandler } from "express";
import { describe, expect, it } from "vitest";
import { series } from "../src/middleware/series.ts";

/** One app per case: `series(steps)` on GET /, an error handler answering 500 with the error's message. */
async function run(steps: RequestHandler[]): Promise<{ status: number; body: string; trail: string[] }> {
  const trail: string[] = [];
  const app = express();
  app.get(
    "/",
    series(
      steps.map((s, i) => (req, res, next) => {
        trail.push(`step${i}`);
        return s(req, res, next);
      }),
    ),
    (_req, res) => void res.send("fell through"),
  );
  const onError: ErrorRequestHandler = (err, _req, res, _next) => void res.status(500).send((err as Error).message);
  app.use(onError);
  const server = app.listen(0, "127.0.0.1");
  await new Promise((r) => server.once("listening", r));
  try {
    const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
    return { status: res.status, body: await res.text(), trail };
  } finally {
    server.close();
  }
}

const pass: RequestHandler = (_req, _res, next) => next();

describe("series", () => {
  it("runs every step in order, then what follows it", async () => {
    expect(await run([pass, pass, pass])).toEqual({ status: 200, body: "fell through", trail: ["step0", "step1", "step2"] });
  });

  it("a step that answers ends the chain", async () => {
    const answer: RequestHandler = (_req, res) => void res.status(201).send("answered");
    expect(await run([pass, answer, pass])).toEqual({ status: 201, body: "answered", trail: ["step0", "step1"] });
  });

  it.each([
    [
      "throws",
      (() => {
        throw new Error("boom");
      }) as RequestHandler,
    ],
    [
      "rejects",
      (async () => {
        throw new Error("boom");
      }) as RequestHandler,
    ],
    ["calls next(err)", ((_req, _res, next) => next(new Error("boom"))) as RequestHandler],
    [
      "fails after an await",
      (async (_req, _res, next) => {
        await new Promise((r) => setTimeout(r, 5));
        next(new Error("boom"));
      }) as RequestHandler,
    ],
  ])("a step that %s goes to the error handler and stops the chain", async (_name, failing) => {
    expect(await run([pass, failing, pass])).toEqual({ status: 500, body: "boom", trail: ["step0", "step1"] });
  });

  it("continues after an asynchronous step", async () => {
    const later: RequestHandler = async (_req, _res, next) => {
      await new Promise((r) => setTimeout(r, 5));
      next();
    };
    expect((await run([later, pass])).trail).toEqual(["step0", "step1"]);
  });
});
