import type { Schemas } from "@dbaas/client";
import { useState } from "preact/hooks";
import { useReadOnly } from "../access.ts";
import { CopyButton, described, Empty, Field, ProblemBanner, StatusBadge, SubmitForm, TextField, Time } from "../components/ui.tsx";
import { problemOf } from "../errors.ts";
import { done, useSubmit } from "../form.ts";
import { describeCidr, expiresAtFromInput, poolerState, poolSizeFromInput, removalNote } from "../network.ts";
import { usePoll } from "../poll.ts";
import { client } from "../session.ts";
import { IDLE_MS } from "../status.ts";

type Db = Schemas["Database"];
type TrustedSource = Schemas["TrustedSource"];
type Pooler = Schemas["Pooler"];

/** The database's edge: who may connect (trusted sources) and its connection pooler (PgBouncer). */
export function Network({ db }: { db: Pick<Db, "id" | "name"> }) {
  return (
    <>
      <TrustedSources id={db.id} />
      <PoolerSection id={db.id} />
    </>
  );
}

/** The list (50 at most: one page), read again every 30 s: temporary entries leave it when they expire. */
export function TrustedSources({ id }: { id: string }) {
  const list = usePoll(
    async () => (await client.trustedSources.list(id, { per_page: 50 })).items,
    { intervalMs: IDLE_MS, idleMs: IDLE_MS, active: () => false },
    [id],
  );
  const [cidr, setCidr] = useState("");
  const [description, setDescription] = useState("");
  const [expires, setExpires] = useState("");
  const [removing, setRemoving] = useState<string | undefined>(undefined);
  const add = useSubmit();
  const remove = useSubmit();
  const readOnly = useReadOnly();
  const entries = list.value;
  return (
    <section aria-labelledby="trusted-title">
      <h2 id="trusted-title">Trusted sources</h2>
      <p class="hint">
        Addresses allowed to connect to this database, its pooler and its replicas. Others are refused before PostgreSQL sees a byte, within
        5 seconds of a change.
      </p>
      {list.error !== undefined && <ProblemBanner problem={problemOf(list.error)} />}
      <ProblemBanner problem={remove.problem} />
      {entries === undefined ? (
        <p aria-busy="true">Loading…</p>
      ) : entries.length === 0 ? (
        <Empty>
          <p data-testid="trusted-empty">
            No trusted sources: <strong>every address can connect</strong> (the password still guards it). Add your application's address or
            network below to admit only those.
          </p>
        </Empty>
      ) : (
        <div class="table-wrap">
          <table>
            <caption class="visually-hidden">Trusted sources, oldest first</caption>
            <thead>
              <tr>
                <th scope="col">Address or network</th>
                <th scope="col">Description</th>
                <th scope="col">Expires</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {entries.map((t) => (
                <tr key={t.id} data-id={t.id}>
                  <td>
                    <code>{t.cidr}</code>
                    <br />
                    <small class="hint">{describeCidr(t.cidr)}</small>
                  </td>
                  <td>{t.description || <span class="hint">—</span>}</td>
                  <td>{t.expires_at ? <Time iso={t.expires_at} /> : "Never"}</td>
                  <td>
                    {removing === t.id ? (
                      <RemoveConfirm
                        entries={entries}
                        entry={t}
                        busy={remove.busy}
                        onCancel={() => setRemoving(undefined)}
                        onConfirm={async () => {
                          if (await remove.submit(() => done(client.trustedSources.remove(id, t.id)))) {
                            setRemoving(undefined);
                            list.refresh();
                          }
                        }}
                      />
                    ) : (
                      <button type="button" class="danger small" disabled={readOnly} onClick={() => setRemoving(t.id)}>
                        Remove {t.cidr}
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <SubmitForm
        submission={add}
        label="Add trusted source"
        class="card"
        aria-labelledby="trusted-add-title"
        intro={
          <>
            <h3 id="trusted-add-title">Add a trusted source</h3>
            {entries?.length === 0 && (
              <p class="hint">Once the first entry is added, only listed addresses can connect: include the ones you connect from.</p>
            )}
          </>
        }
        onSubmit={async () => {
          const expiresAt = expiresAtFromInput(expires);
          const added = await add.submit(() =>
            client.trustedSources.add(id, {
              cidr: cidr.trim(),
              ...(description.trim() !== "" && { description }),
              ...(expiresAt !== undefined && { expires_at: expiresAt }),
            }),
          );
          if (added) {
            setCidr("");
            setDescription("");
            setExpires("");
            list.refresh();
          }
        }}
      >
        <TextField
          id="ts-cidr"
          label="Address or network (CIDR)"
          hint="e.g. 203.0.113.7, 203.0.113.0/24 or 2001:db8::/32"
          error={add.fieldError("cidr")}
          autoComplete="off"
          value={cidr}
          onValue={setCidr}
        />
        <TextField
          id="ts-description"
          label="Description (optional)"
          error={add.fieldError("description")}
          autoComplete="off"
          value={description}
          onValue={setDescription}
        />
        <Field
          id="ts-expires"
          label="Expires (your time zone, optional)"
          hint="Leave empty to keep it until removed"
          error={add.fieldError("expires_at")}
        >
          <input
            id="ts-expires"
            type="datetime-local"
            step={1}
            value={expires}
            onInput={(e) => setExpires(e.currentTarget.value)}
            {...described("ts-expires", add.fieldError("expires_at"))}
          />
        </Field>
      </SubmitForm>
    </section>
  );
}

function RemoveConfirm(props: {
  entries: readonly TrustedSource[];
  entry: TrustedSource;
  busy: boolean;
  onCancel: () => void;
  onConfirm: () => void;
}) {
  return (
    <fieldset class="confirm">
      <legend class="visually-hidden">Remove {props.entry.cidr}?</legend>
      <p>{removalNote(props.entries, props.entry.id)}</p>
      <div class="actions">
        <button type="button" class="danger small" disabled={props.busy} onClick={props.onConfirm}>
          Confirm removing {props.entry.cidr}
        </button>
        <button type="button" class="secondary small" onClick={props.onCancel}>
          Keep it
        </button>
      </div>
    </fieldset>
  );
}

/** The pooler: read once (it changes only when changed here), answered by each change. */
export function PoolerSection({ id }: { id: string }) {
  const got = usePoll(() => client.pooler.get(id), { intervalMs: IDLE_MS, idleMs: 0, active: () => false }, [id]);
  const [changed, setChanged] = useState<Pooler | undefined>(undefined);
  const pooler = changed ?? got.value;
  return (
    <section aria-labelledby="pooler-title">
      <h2 id="pooler-title">Connection pooler</h2>
      {got.error !== undefined && <ProblemBanner problem={problemOf(got.error)} />}
      {pooler === undefined ? <p aria-busy="true">Loading…</p> : <PoolerView id={id} pooler={pooler} onChange={setChanged} />}
    </section>
  );
}

function PoolerView({ id, pooler, onChange }: { id: string; pooler: Pooler; onChange: (p: Pooler) => void }) {
  const [mode, setMode] = useState<Pooler["mode"]>(pooler.mode);
  const [size, setSize] = useState(String(pooler.pool_size));
  const toggle = useSubmit();
  const save = useSubmit();
  const readOnly = useReadOnly();
  const state = poolerState(pooler);
  if (state === "unavailable") {
    return (
      <>
        <p>
          <StatusBadge status="unavailable" />{" "}
          <span data-testid="pooler-reason">{pooler.reason ?? "No pooler on this database's host."}</span>
        </p>
        <p class="hint">The database works without one: connect to it directly.</p>
      </>
    );
  }
  const rows: Array<[string, string]> = [
    ["Pooler host", pooler.host ?? ""],
    ["Pooler port", String(pooler.port ?? "")],
    ["Pooler connection string", pooler.connection_string ?? ""],
  ];
  return (
    <>
      <p>
        PgBouncer in front of the database, for many short or concurrent client connections (serverless functions, CI): up to{" "}
        {pooler.max_client_connections.toLocaleString("en-US")} clients share {pooler.pool_size} server connections. Log in with the
        database's username and password.
      </p>
      <div class="actions">
        <span>
          Pooler: <StatusBadge status={state} />
        </span>
        <button
          type="button"
          class="secondary"
          disabled={toggle.busy || readOnly}
          onClick={async () => {
            const next = await toggle.submit(() => client.pooler.update(id, { enabled: !pooler.enabled }));
            if (next) onChange(next);
          }}
        >
          {pooler.enabled ? "Disable the pooler" : "Enable the pooler"}
        </button>
      </div>
      <ProblemBanner problem={toggle.problem} />
      <dl class="details">
        {rows.map(([label, value]) => (
          <div key={label}>
            <dt>{label}</dt>
            <dd class="copyable">
              <code>{value}</code>
              <CopyButton text={value} label={label.toLowerCase()} />
            </dd>
          </div>
        ))}
      </dl>
      <SubmitForm
        submission={save}
        label="Save pooler settings"
        class="card"
        aria-labelledby="pooler-settings-title"
        intro={<h3 id="pooler-settings-title">Pooler settings</h3>}
        onSubmit={async () => {
          const poolSize = poolSizeFromInput(size);
          const next = await save.submit(() => client.pooler.update(id, { mode, ...(poolSize !== undefined && { pool_size: poolSize }) }));
          if (next) {
            setSize(String(next.pool_size));
            onChange(next);
          }
        }}
      >
        <Field
          id="pooler-mode"
          label="Pool mode"
          hint="Transaction: a server connection per transaction, so SET, LISTEN, advisory locks across transactions and protocol-level prepared statements do not carry over. Session: one per client connection."
          error={save.fieldError("mode")}
        >
          <select
            id="pooler-mode"
            value={mode}
            onChange={(e) => setMode(e.currentTarget.value as Pooler["mode"])}
            {...described("pooler-mode", save.fieldError("mode"))}
          >
            <option value="transaction">transaction</option>
            <option value="session">session</option>
          </select>
        </Field>
        <TextField
          id="pooler-size"
          label="Pool size (server connections)"
          hint="1 … the tier's max_connections less 5"
          type="number"
          inputMode="decimal"
          error={save.fieldError("pool_size")}
          autoComplete="off"
          value={size}
          onValue={setSize}
        />
      </SubmitForm>
      <p class="hint" data-testid="pooler-applied">
        In effect: {pooler.mode} mode, pool size {pooler.pool_size}.
      </p>
    </>
  );
}
