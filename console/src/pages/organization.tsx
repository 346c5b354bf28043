import type { Schemas } from "@dbaas/client";
import { useEffect, useState } from "preact/hooks";
import { Link } from "wouter-preact";
import { ReadOnly, useMemberRole } from "../access.ts";
import { ConfirmByName, described, Empty, Field, OnceSecret, ProblemBanner, Time, TextField, SubmitForm } from "../components/ui.tsx";
import { problemOf } from "../errors.ts";
import { done, useSubmit } from "../form.ts";
import { apiKeyRequest, canChangeSettings, canManageMembers, isOwner, keyExpired, nextExpiry, PLANS, scopesFor } from "../organization.ts";
import { usePoll } from "../poll.ts";
import { client, signOut } from "../session.ts";

const ROLES = ["admin", "developer", "viewer"] as const;
const NO_POLL = { intervalMs: 0, idleMs: 0, active: () => false };

export function Members() {
  const members = usePoll(async () => (await client.organization.listMembers({ per_page: 100 })).items, NO_POLL, []);
  const invitations = usePoll(async () => (await client.organization.listInvitations({ per_page: 100 })).items, NO_POLL, []);
  const [invite, setInvite] = useState<{ email: string; role: (typeof ROLES)[number] }>({ email: "", role: "developer" });
  const [removing, setRemoving] = useState<string | undefined>(undefined);
  const [cancelling, setCancelling] = useState<string | undefined>(undefined);
  const inviting = useSubmit();
  const act = useSubmit();
  const role = useMemberRole();
  const manage = canManageMembers(role);
  return (
    <main id="main">
      <h1>Members</h1>
      {!manage && (
        <p class="banner note" data-testid="read-only">
          Your role ({role}) can see who is a member but not invite, change or remove anyone: an owner or admin can.
        </p>
      )}
      <ProblemBanner problem={act.problem} />
      {members.error !== undefined && <ProblemBanner problem={problemOf(members.error)} />}
      {members.value === undefined ? (
        <p aria-busy="true">Loading…</p>
      ) : (
        <ul class="rows">
          {members.value.map((m) => (
            <li key={m.id} data-email={m.user.email}>
              <strong>{m.user.name}</strong> &lt;{m.user.email}&gt; · joined <Time iso={m.joined_at} />
              {m.role === "owner" ? (
                <span class="status">owner</span>
              ) : (
                <div class="actions">
                  <label class="inline" for={`role-${m.id}`}>
                    Role of {m.user.email}
                  </label>
                  <select
                    id={`role-${m.id}`}
                    value={m.role}
                    disabled={!manage || act.busy}
                    onChange={async (e) => {
                      const role = e.currentTarget.value as (typeof ROLES)[number];
                      if (await act.submit(() => client.organization.updateMember(m.id, { role }))) members.refresh();
                    }}
                  >
                    {ROLES.map((r) => (
                      <option key={r} value={r}>
                        {r}
                      </option>
                    ))}
                  </select>
                  {removing === m.id ? (
                    <ConfirmByName
                      name={m.user.email}
                      action="Remove member"
                      busy={act.busy}
                      onCancel={() => setRemoving(undefined)}
                      onConfirm={async () => {
                        const removed = await act.submit(() => done(client.organization.removeMember(m.id)));
                        if (removed) {
                          setRemoving(undefined);
                          members.refresh();
                        }
                      }}
                    />
                  ) : (
                    <button type="button" class="danger small" disabled={!manage} onClick={() => setRemoving(m.id)}>
                      Remove {m.user.email}
                    </button>
                  )}
                </div>
              )}
            </li>
          ))}
        </ul>
      )}
      <ReadOnly.Provider value={!manage}>
        <SubmitForm
          submission={inviting}
          label="Send invitation"
          class="card"
          aria-labelledby="invite-title"
          intro={<h2 id="invite-title">Invite someone</h2>}
          onSubmit={async () => {
            if (await inviting.submit(() => client.organization.inviteMember(invite))) {
              setInvite({ ...invite, email: "" });
              invitations.refresh();
            }
          }}
        >
          <Field id="invite-email" label="E-mail" error={inviting.fieldError("email")}>
            <input
              id="invite-email"
              type="email"
              autoComplete="off"
              value={invite.email}
              onInput={(e) => setInvite({ ...invite, email: e.currentTarget.value })}
              {...described("invite-email", inviting.fieldError("email"))}
            />
          </Field>
          <Field id="invite-role" label="Role" error={inviting.fieldError("role")}>
            <select id="invite-role" value={invite.role} onChange={(e) => setInvite({ ...invite, role: e.currentTarget.value as never })}>
              {ROLES.map((r) => (
                <option key={r} value={r}>
                  {r}
                </option>
              ))}
            </select>
          </Field>
        </SubmitForm>
      </ReadOnly.Provider>
      <h2>Pending invitations</h2>
      {invitations.value?.length === 0 ? (
        <Empty>
          <p>No pending invitations. Invite someone above: they get a mail with a link to join.</p>
        </Empty>
      ) : (
        <ul class="rows">
          {invitations.value?.map((i) => (
            <li key={i.id} data-invitation={i.email}>
              {i.email} · {i.role} · {i.status}, expires <Time iso={i.expires_at} />
              {cancelling === i.id ? (
                <ConfirmByName
                  name={i.email}
                  action={`Cancel invitation to ${i.email}`}
                  busy={act.busy}
                  onCancel={() => setCancelling(undefined)}
                  cancelLabel="Keep the invitation"
                  onConfirm={async () => {
                    if (await act.submit(() => done(client.organization.cancelInvitation(i.id)))) {
                      setCancelling(undefined);
                      invitations.refresh();
                    }
                  }}
                >
                  <p>The link mailed to {i.email} stops working.</p>
                </ConfirmByName>
              ) : (
                <button type="button" class="secondary small" disabled={!manage} onClick={() => setCancelling(i.id)}>
                  Cancel invitation to {i.email}
                </button>
              )}
            </li>
          ))}
        </ul>
      )}
      {members.value && members.value.length > 1 && isOwner(role) && <Transfer members={members.value} onDone={members.refresh} />}
    </main>
  );
}

function Transfer({ members, onDone }: { members: Schemas["Member"][]; onDone: () => void }) {
  const others = members.filter((m) => m.role !== "owner");
  const [to, setTo] = useState(others[0]?.user.id ?? "");
  const [password, setPassword] = useState("");
  const form = useSubmit();
  return (
    <SubmitForm
      submission={form}
      label="Transfer ownership"
      class="card"
      aria-labelledby="transfer-title"
      intro={
        <>
          <h2 id="transfer-title">Transfer ownership</h2>
          <p class="hint">The owner only. You become an admin.</p>
        </>
      }
      onSubmit={async () => {
        if (await form.submit(() => client.organization.transferOwnership({ new_owner_id: to, password }))) {
          setPassword("");
          onDone();
        }
      }}
    >
      <Field id="transfer-to" label="New owner" error={form.fieldError("new_owner_id")}>
        <select id="transfer-to" value={to} onChange={(e) => setTo(e.currentTarget.value)}>
          {others.map((m) => (
            <option key={m.id} value={m.user.id}>
              {m.user.name} &lt;{m.user.email}&gt;
            </option>
          ))}
        </select>
      </Field>
      <TextField
        id="transfer-password"
        label="Your password"
        error={form.fieldError("password")}
        type="password"
        autoComplete="current-password"
        value={password}
        onValue={setPassword}
      />
    </SubmitForm>
  );
}

/** Largest delay setTimeout takes (about 24.8 days); a later expiry is looked at again then. */
const MAX_TIMEOUT_MS = 2_147_483_647;

/**
 * The current time, moved on when the soonest of `keys`' expiries passes: a key expiring while its page is open
 * is marked expired then, without a request (the list is read once).
 */
function useExpiryClock(keys: readonly Schemas["ApiKey"][] | undefined): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const next = nextExpiry(keys ?? [], now);
    if (next === undefined) return;
    const timer = setTimeout(() => setNow(Date.now()), Math.min(next - Date.now() + 50, MAX_TIMEOUT_MS));
    return () => clearTimeout(timer);
  }, [keys, now]);
  // Read afresh at each render: a list read again (after an action) is judged at its own time.
  return Math.max(now, Date.now());
}

export function ApiKeys() {
  const keys = usePoll(async () => (await client.apiKeys.list({ per_page: 100 })).items, NO_POLL, []);
  const now = useExpiryClock(keys.value);
  const offered = scopesFor(useMemberRole());
  const [name, setName] = useState("");
  const [scopes, setScopes] = useState<readonly string[]>([]);
  const [expires, setExpires] = useState("");
  const [created, setCreated] = useState<Schemas["CreatedApiKey"] | undefined>(undefined);
  const [revoking, setRevoking] = useState<string | undefined>(undefined);
  const form = useSubmit();
  const act = useSubmit();
  const scopesError = form.fieldError("scopes");
  return (
    <main id="main">
      <h1>API keys</h1>
      {created && (
        <OnceSecret title={`Secret of ${created.name}`} secret={created.secret} label="secret" onDismiss={() => setCreated(undefined)} />
      )}
      <SubmitForm
        submission={form}
        label="Create API key"
        class="card"
        onSubmit={async () => {
          const key = await form.submit(() => client.apiKeys.create(apiKeyRequest(name, scopes, expires)));
          if (key) {
            setCreated(key);
            setName("");
            setScopes([]);
            setExpires("");
            keys.refresh();
          }
        }}
      >
        <TextField
          id="key-name"
          label="What the key is for"
          error={form.fieldError("name")}
          autoComplete="off"
          value={name}
          onValue={setName}
        />
        <fieldset id="key-scopes" class="scopes" aria-describedby={scopesError ? "key-scopes-error" : "key-scopes-hint"}>
          <legend>Scopes</legend>
          {offered.map((s) => (
            <label key={s} class="inline">
              <input
                type="checkbox"
                name="scope"
                value={s}
                checked={scopes.includes(s)}
                onChange={(e) => setScopes(e.currentTarget.checked ? [...scopes, s] : scopes.filter((x) => x !== s))}
              />{" "}
              {s}
            </label>
          ))}
          {scopesError ? (
            <small class="field-error" id="key-scopes-error" role="alert">
              {scopesError}
            </small>
          ) : (
            <small class="hint" id="key-scopes-hint">
              None ticked: every scope your role allows.
            </small>
          )}
        </fieldset>
        <Field
          id="key-expires"
          label="Expires (your time zone, optional)"
          hint="Leave empty for a key that never expires"
          error={form.fieldError("expires_at")}
        >
          <input
            id="key-expires"
            type="datetime-local"
            step={1}
            value={expires}
            onInput={(e) => setExpires(e.currentTarget.value)}
            {...described("key-expires", form.fieldError("expires_at"))}
          />
        </Field>
      </SubmitForm>
      <ProblemBanner problem={act.problem} />
      {keys.value?.length === 0 ? (
        <Empty>
          <p>No API keys. Create one above for scripts, CI or the `dbaas` CLI: its secret is shown once.</p>
        </Empty>
      ) : (
        <ul class="rows">
          {keys.value?.map((k) => {
            const expired = keyExpired(k.expires_at, now);
            return (
              <li key={k.id} data-key={k.name} data-expired={expired ? "" : undefined}>
                <strong>{k.name}</strong>{" "}
                {expired && (
                  <>
                    <span class="status status-expired">expired</span>{" "}
                  </>
                )}
                <code>{k.prefix}…</code> · {k.role} · scopes: <span data-testid="key-scopes">{k.scopes.join(", ")}</span> · created{" "}
                <Time iso={k.created_at} />
                {k.expires_at &&
                  (expired ? (
                    <>
                      {" "}
                      ·{" "}
                      <span data-testid="key-expired">
                        Expired on <Time iso={k.expires_at} />
                      </span>
                    </>
                  ) : (
                    <>
                      {" "}
                      · expires <Time iso={k.expires_at} />
                    </>
                  ))}
                {revoking === k.id ? (
                  <ConfirmByName
                    name={k.name}
                    action={`Revoke ${k.name}`}
                    busy={act.busy}
                    onCancel={() => setRevoking(undefined)}
                    onConfirm={async () => {
                      if (await act.submit(() => done(client.apiKeys.revoke(k.id)))) {
                        setRevoking(undefined);
                        keys.refresh();
                      }
                    }}
                  >
                    <p>
                      {expired
                        ? "It has expired: the API refuses it already. Revoking it removes it from this list."
                        : "Scripts and tools using this key are refused from then on."}
                    </p>
                  </ConfirmByName>
                ) : (
                  <button type="button" class="danger small" onClick={() => setRevoking(k.id)}>
                    Revoke {k.name}
                  </button>
                )}
              </li>
            );
          })}
        </ul>
      )}
    </main>
  );
}

/**
 * The organization itself: its name (owner and admin: settings:write), its plan (the owner: billing:write; a
 * paid one without a card is the API's 402, leading to adding one) and its deletion (the owner, once its name
 * is typed; the API's 409 while a database lives). Deleted, the session ends: back to the login page.
 * Whoever may not change a part sees it with its controls disabled.
 */
export function OrganizationSettings({ onChanged }: { onChanged: (org: Schemas["Organization"]) => void }) {
  const org = usePoll(() => client.organization.get(), NO_POLL, []);
  const role = useMemberRole();
  // What a change answered, until the page is read again.
  const [changed, setChanged] = useState<Schemas["Organization"] | undefined>(undefined);
  const current = changed ?? org.value;
  const show = (o: Schemas["Organization"]) => {
    setChanged(o);
    onChanged(o);
  };
  return (
    <main id="main">
      <h1>Organization</h1>
      {org.error !== undefined && <ProblemBanner problem={problemOf(org.error)} />}
      {!canChangeSettings(role) && (
        <p class="banner note" data-testid="read-only">
          Your role ({role}) can look at the organization's settings but not change them: an owner or admin can.
        </p>
      )}
      {current === undefined ? (
        org.error === undefined && <p aria-busy="true">Loading…</p>
      ) : (
        <>
          <dl class="org">
            <dt>Name</dt>
            <dd data-testid="org-name">{current.name}</dd>
            <dt>Plan</dt>
            <dd data-testid="org-plan">{current.plan}</dd>
            <dt>Identifier</dt>
            <dd>
              <code>{current.id}</code>
            </dd>
            <dt>Created</dt>
            <dd>
              <Time iso={current.created_at} />
            </dd>
          </dl>
          <ReadOnly.Provider value={!canChangeSettings(role)}>
            <Rename key={`name-${current.name}`} org={current} onDone={show} />
          </ReadOnly.Provider>
          <ReadOnly.Provider value={!isOwner(role)}>
            <ChangePlan key={`plan-${current.plan}`} org={current} onDone={show} />
          </ReadOnly.Provider>
          {isOwner(role) ? (
            <DeleteOrganization org={current} />
          ) : (
            <p class="hint">Only the owner can change the plan or delete the organization.</p>
          )}
        </>
      )}
    </main>
  );
}

function Rename({ org, onDone }: { org: Schemas["Organization"]; onDone: (o: Schemas["Organization"]) => void }) {
  const [name, setName] = useState(org.name);
  const form = useSubmit();
  return (
    <SubmitForm
      submission={form}
      label="Rename"
      class="card"
      aria-labelledby="rename-org-title"
      intro={<h2 id="rename-org-title">Name</h2>}
      onSubmit={async () => {
        const renamed = await form.submit(() => client.organization.update({ name }));
        if (renamed) onDone(renamed);
      }}
    >
      <TextField
        id="org-name"
        label="Organization name"
        error={form.fieldError("name")}
        autoComplete="organization"
        value={name}
        onValue={setName}
      />
    </SubmitForm>
  );
}

function ChangePlan({ org, onDone }: { org: Schemas["Organization"]; onDone: (o: Schemas["Organization"]) => void }) {
  const [plan, setPlan] = useState<Schemas["Organization"]["plan"]>(org.plan);
  const form = useSubmit();
  // A plan support set (internal) is shown as it is; it cannot be chosen.
  const plans: readonly Schemas["Organization"]["plan"][] = (PLANS as readonly string[]).includes(org.plan) ? PLANS : [...PLANS, org.plan];
  return (
    <SubmitForm
      submission={form}
      label="Change plan"
      class="card"
      aria-labelledby="plan-title"
      disabled={plan === org.plan}
      intro={
        <>
          <h2 id="plan-title">Plan</h2>
          <p class="hint">The plan sets the API's rate limits. A paid plan needs a card on the billing page.</p>
        </>
      }
      onSubmit={async () => {
        const changed = await form.submit(() => client.organization.update({ plan: plan as (typeof PLANS)[number] }));
        if (changed) onDone(changed);
      }}
    >
      <Field id="org-plan" label="Choose a plan" error={form.fieldError("plan")}>
        <select
          id="org-plan"
          value={plan}
          onChange={(e) => setPlan(e.currentTarget.value as Schemas["Organization"]["plan"])}
          {...described("org-plan", form.fieldError("plan"))}
        >
          {plans.map((p) => (
            <option key={p} value={p} disabled={!(PLANS as readonly string[]).includes(p)}>
              {p}
            </option>
          ))}
        </select>
      </Field>
    </SubmitForm>
  );
}

function DeleteOrganization({ org }: { org: Schemas["Organization"] }) {
  const act = useSubmit();
  return (
    <section class="card" aria-labelledby="delete-org-title">
      <h2 id="delete-org-title">Delete the organization</h2>
      <p>
        Its members, invitations and API keys go with it, and everyone is signed out of it. The API refuses while it has databases:{" "}
        <Link href="/databases">delete them</Link> first.
      </p>
      <ProblemBanner problem={act.problem} />
      <ConfirmByName
        name={org.name}
        action="Delete organization"
        busy={act.busy}
        onConfirm={async () => {
          if (await act.submit(() => done(client.organization.delete()))) signOut();
        }}
      />
    </section>
  );
}
