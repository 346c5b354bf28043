import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { ID_MAX_LENGTH, codePointLength, type Validator } from "@dbaas/kit";

/** Organization ids are minted by identity and checked by the gateway; billing only bounds them. */
export function checkOrganizationId(v: Validator, value: string): void {
  if (value === "") v.add("organization_id", "is required");
  else if (codePointLength(value) > ID_MAX_LENGTH) v.add("organization_id", `must be at most ${ID_MAX_LENGTH} characters`);
}

// Identifiers minted by other services: printable ASCII, no spaces.
const ID_PATTERN = /^[\x21-\x7e]{1,128}$/;
// Protobuf allows years 0001-9999, but no database existed before 1970.
const MAX_TIMESTAMP_SECONDS = 253_402_300_799n; // 9999-12-31T23:59:59Z

/** An identifier another service minted (event, database, sample, epoch): required, printable, bounded. */
export function checkId(v: Validator, field: string, value: string): void {
  if (value === "") v.add(field, "is required");
  else if (!ID_PATTERN.test(value)) v.add(field, "must be 1-128 printable characters without spaces");
}

/** A required timestamp between 1970 and the end of protobuf's range. */
export function checkTimestamp(v: Validator, field: string, ts: Timestamp | undefined): ts is Timestamp {
  if (!ts) {
    v.add(field, "is required");
    return false;
  }
  if (ts.seconds < 0n || ts.seconds > MAX_TIMESTAMP_SECONDS || ts.nanos < 0 || ts.nanos >= 1_000_000_000) {
    v.add(field, "must be a timestamp between 1970-01-01 and 9999-12-31");
    return false;
  }
  return true;
}
