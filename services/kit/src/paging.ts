import type { Validator } from "./errors.ts";

/**
 * The paging rules of every list, in one place: the gateway publishes and
 * checks them (`page`, `per_page` in /v1/openapi.json and the `meta` of a
 * list) and the services that page in SQL apply them again, because internal
 * callers do not pass through the gateway.
 */
export const PAGE = { minimum: 1, maximum: 999_999_999, default: 1 } as const;
export const PER_PAGE = { minimum: 1, maximum: 100, default: 20 } as const;

export interface Page {
  page: number;
  perPage: number;
}

/**
 * The page a request asks for, proto3's 0 meaning "not given" (the defaults);
 * a violation per field outside the bounds.
 */
export function checkPaging(v: Validator, page: number, perPage: number): Page {
  const p = page === 0 ? PAGE.default : page;
  const pp = perPage === 0 ? PER_PAGE.default : perPage;
  if (p < PAGE.minimum) v.add("page", `must be at least ${PAGE.minimum}`);
  else if (p > PAGE.maximum) v.add("page", `must be at most ${PAGE.maximum}`);
  if (pp < PER_PAGE.minimum || pp > PER_PAGE.maximum) v.add("per_page", `must be between ${PER_PAGE.minimum} and ${PER_PAGE.maximum}`);
  return { page: p, perPage: pp };
}
