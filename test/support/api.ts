/** A tiny JSON client for the public API, returning status, headers and parsed body. */
export interface ApiResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
}

export function createApi(baseUrl: string) {
  let token: string | undefined;
  const call = async <T = any>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<ApiResponse<T>> => {
    const res = await fetch(baseUrl + path, {
      method,
      headers: {
        ...(body !== undefined ? { "content-type": "application/json" } : {}),
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...headers,
      },
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });
    const text = await res.text();
    let parsed: any = text;
    try {
      parsed = text === "" ? undefined : JSON.parse(text);
    } catch {
      // Not JSON (a PEM, say): hand back the text.
    }
    return { status: res.status, headers: res.headers, body: parsed as T };
  };
  return {
    call,
    get: <T = any>(path: string, headers?: Record<string, string>) => call<T>("GET", path, undefined, headers),
    post: <T = any>(path: string, body?: unknown, headers?: Record<string, string>) => call<T>("POST", path, body ?? {}, headers),
    patch: <T = any>(path: string, body: unknown) => call<T>("PATCH", path, body),
    delete: <T = any>(path: string) => call<T>("DELETE", path),
    setToken(t: string | undefined) {
      token = t;
    },
    /** Signs up a fresh organization and uses its token from then on. */
    async signup(prefix = "user") {
      const email = `${prefix}-${Date.now()}-${Math.random().toString(36).slice(2, 8)}@example.com`;
      const password = "correct horse battery staple";
      const res = await call("POST", "/v1/auth/signup", { email, password, name: "Test User", organization_name: "Test Org" });
      if (res.status !== 201) throw new Error(`signup failed: ${res.status} ${JSON.stringify(res.body)}`);
      token = res.body.data.access_token;
      return { email, password, ...res.body.data };
    },
  };
}

/** Polls `fn` until it returns a truthy value or `timeoutMs` passes. */
export async function waitFor<T>(fn: () => Promise<T | undefined | false>, timeoutMs = 30_000, what = "condition"): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ""}`);
}
