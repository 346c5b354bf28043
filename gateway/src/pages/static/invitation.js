// The invitation page: reads the one-time token from the link, sends the invitee's
// name and password to POST /v1/invitations/accept and shows the result or the API's error.
(() => {
  "use strict";
  const $ = (id) => document.getElementById(id);
  const form = $("accept");
  const error = $("error");
  const token = new URLSearchParams(location.search).get("token");

  function showError(text) {
    error.textContent = text;
    error.hidden = false;
  }

  // The API's error envelope: its message, then one line per field it names.
  function describe(body, status) {
    const e = body?.error;
    if (!e || typeof e.message !== "string") return "The request failed (HTTP " + status + "). Try again later.";
    const details = Array.isArray(e.details) ? e.details.map((d) => d.field + ": " + d.message) : [];
    return [e.message].concat(details).join("\n");
  }

  // One Idempotency-Key per distinct answer: a resend after a lost response replays it instead of
  // failing on a token already used. (crypto.randomUUID exists only in secure contexts.)
  let lastBody;
  let lastKey;
  function keyFor(body) {
    if (body !== lastBody) {
      const bytes = crypto.getRandomValues(new Uint8Array(16));
      lastKey = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
      lastBody = body;
    }
    return lastKey;
  }

  if (!token) {
    form.hidden = true;
    showError("This link carries no invitation token. Open the link from your invitation e-mail as it is.");
    return;
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.hidden = true;
    const answer = { token: token, password: $("password").value };
    const name = $("name").value.trim();
    if (name !== "") answer.name = name;
    const body = JSON.stringify(answer);
    $("join").disabled = true;
    try {
      const res = await fetch("/v1/invitations/accept", {
        method: "POST",
        headers: { "content-type": "application/json", "idempotency-key": keyFor(body) },
        body: body,
      });
      const json = await res.json().catch(() => undefined);
      if (!res.ok || !json?.data) {
        showError(describe(json, res.status));
        return;
      }
      const data = json.data;
      $("organization").textContent = data.organization.name;
      $("role").textContent = data.member.role;
      $("expires").textContent = new Date(data.expires_at).toLocaleString();
      $("token").textContent = data.access_token;
      form.hidden = true;
      $("intro").hidden = true;
      $("done").hidden = false;
      // The token in the address bar is spent: keep it out of the history.
      history.replaceState(null, "", location.pathname);
    } catch {
      showError("The service could not be reached. Check your connection and try again.");
    } finally {
      $("join").disabled = false;
    }
  });
})();
