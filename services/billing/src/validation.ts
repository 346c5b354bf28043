import { ID_MAX_LENGTH, codePointLength, type Validator } from "@dbaas/kit";

/** Organization ids are minted by identity and checked by the gateway; billing only bounds them. */
export function checkOrganizationId(v: Validator, value: string): void {
  if (value === "") v.add("organization_id", "is required");
  else if (codePointLength(value) > ID_MAX_LENGTH) v.add("organization_id", `must be at most ${ID_MAX_LENGTH} characters`);
}
