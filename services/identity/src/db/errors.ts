/** True when `err` is PostgreSQL's unique violation of `constraint` (index names count). */
export function isUniqueViolation(err: unknown, constraint: string): boolean {
  const e = err as { code?: string; constraint?: string };
  return e.code === "23505" && e.constraint === constraint;
}
