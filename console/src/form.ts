import { useState } from "preact/hooks";
import { type Problem, problemOf } from "./errors.ts";
import { signOut } from "./session.ts";

/**
 * A form's submission state: busy while the call runs, the API's problem
 * (its `details` by field) when it failed. `submit` resolves with the call's
 * answer, or undefined when it failed (the problem is then shown).
 */
export function useSubmit(): {
  busy: boolean;
  problem: Problem | undefined;
  fieldError: (field: string) => string | undefined;
  submit: <T>(call: () => Promise<T>) => Promise<T | undefined>;
  clear: () => void;
} {
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState<Problem | undefined>(undefined);
  return {
    busy,
    problem,
    fieldError: (field) => problem?.fields[field],
    clear: () => setProblem(undefined),
    async submit(call) {
      setBusy(true);
      setProblem(undefined);
      try {
        return await call();
      } catch (err) {
        const problem = problemOf(err);
        // An expired or revoked token: back to the login page.
        if (problem.unauthenticated) signOut();
        setProblem(problem);
        return undefined;
      } finally {
        setBusy(false);
      }
    },
  };
}

/** A call that answers nothing (204) as a submission that succeeded: `submit(() => done(client.x.delete(id)))`. */
export async function done(call: Promise<unknown>): Promise<true> {
  await call;
  return true;
}
