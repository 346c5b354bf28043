import { DATABASE_NAME_MAX_LENGTH, DATABASE_NAME_MIN_LENGTH, FORBIDDEN_NAME_CHARACTERS, codePointLength, type Validator } from "@dbaas/kit";

/**
 * A database name after trimming (docs/product.md, Databases): 3–63 characters, none
 * of them control or format characters (bidi overrides, zero-width ones),
 * line breaks or lone surrogates — nothing that shows a name as another.
 */
export function validateName(v: Validator, raw: string): string {
  const name = raw.trim();
  const length = codePointLength(name);
  if (name === "") v.add("name", "is required");
  else if (length < DATABASE_NAME_MIN_LENGTH || length > DATABASE_NAME_MAX_LENGTH) {
    v.add("name", `must be ${DATABASE_NAME_MIN_LENGTH}-${DATABASE_NAME_MAX_LENGTH} characters long`);
  } else if (FORBIDDEN_NAME_CHARACTERS.test(name)) v.add("name", "must not contain control characters");
  return name;
}
