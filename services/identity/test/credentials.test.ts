import { crc32 } from "node:zlib";
import { describe, expect, it } from "vitest";
import { classifyBearer, hashSecret, newApiKeySecret, newSessionToken } from "../src/credentials.ts";
import { createPasswordHasher, DEFAULT_SCRYPT_N } from "../src/passwords.ts";

describe("bearer secrets", () => {
  it("formats login tokens as dbs_ and 43 base62 characters", () => {
    const token = newSessionToken();
    expect(token).toMatch(/^dbs_[0-9A-Za-z]{43}$/);
    expect(newSessionToken()).not.toBe(token);
    expect(classifyBearer(token)).toBe("session");
  });

  it("formats API keys as dbk_, 30 random base62 characters and a base62 CRC32 of them", () => {
    const key = newApiKeySecret();
    expect(key).toMatch(/^dbk_[0-9A-Za-z]{36}$/);
    const random = key.slice(4, 34);
    const checksum = key.slice(34);
    const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    const decoded = [...checksum].reduce((n, c) => n * 62 + alphabet.indexOf(c), 0);
    expect(decoded).toBe(crc32(random));
    expect(classifyBearer(key)).toBe("api_key");
  });

  it("refuses API keys whose checksum does not match", () => {
    const key = newApiKeySecret();
    const flipped = key.slice(0, 10) + (key[10] === "a" ? "b" : "a") + key.slice(11);
    expect(classifyBearer(flipped)).toBeUndefined();
  });

  it("refuses anything else", () => {
    for (const bearer of ["", "dbs_short", "Bearer " + newSessionToken(), newSessionToken() + "x", "dbx_" + "a".repeat(43)]) {
      expect(classifyBearer(bearer), bearer).toBeUndefined();
    }
  });

  it("stores SHA-256 digests", () => {
    expect(hashSecret("abc").toString("hex")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  });
});

describe("password hashing", () => {
  it("hashes with scrypt at the real default cost N=2^17, r=8, p=1", async () => {
    expect(DEFAULT_SCRYPT_N).toBe(2 ** 17);
    const hasher = createPasswordHasher();
    const stored = await hasher.hash("a long enough password");
    const [alg, n, r, p, salt, key] = stored.split("$");
    expect([alg, n, r, p]).toEqual(["scrypt", "131072", "8", "1"]);
    expect(Buffer.from(salt!, "base64")).toHaveLength(16);
    expect(Buffer.from(key!, "base64")).toHaveLength(32);
    expect(await hasher.verify("a long enough password", stored)).toEqual({ ok: true, needsRehash: false });
    expect((await hasher.verify("a long enough passwore", stored)).ok).toBe(false);
  });

  it("salts every hash", async () => {
    const hasher = createPasswordHasher(2 ** 14);
    expect(await hasher.hash("same password")).not.toBe(await hasher.hash("same password"));
  });

  it("verifies hashes made at another cost and asks for a rehash", async () => {
    const stored = await createPasswordHasher(2 ** 14).hash("password one");
    const verdict = await createPasswordHasher(2 ** 15).verify("password one", stored);
    expect(verdict).toEqual({ ok: true, needsRehash: true });
  });

  it("refuses a malformed stored hash instead of throwing", async () => {
    expect((await createPasswordHasher(2 ** 14).verify("x", "md5$abc")).ok).toBe(false);
  });

  it("fails the decoy verification used for unknown e-mails", async () => {
    expect((await createPasswordHasher(2 ** 14).verifyNobody("anything")).ok).toBe(false);
  });
});
