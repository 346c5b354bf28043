import type { Schemas } from "@dbaas/client";
import { useState } from "preact/hooks";
import { useReadOnly } from "../access.ts";
import { ConfirmByName, described, Empty, Field, OnceSecret, ProblemBanner, SubmitForm, TextField, Time } from "../components/ui.tsx";
import { problemOf } from "../errors.ts";
import { done, useSubmit } from "../form.ts";
import { bytes } from "../format.ts";
import { usePoll } from "../poll.ts";
import { client } from "../session.ts";

type Db = Schemas["Database"];
type Role = Schemas["Role"];
type CreatedRole = Schemas["CreatedRole"];
type LogicalDb = Schemas["LogicalDb"];
type Extension = Schemas["Extension"];

/** Read when the tab opens and after each change here (roles and databases made in SQL show at the next visit). */
const ONCE = { intervalMs: 0, idleMs: 0, active: () => false };

/** What is read from the server itself answers only while it runs (409 otherwise): say so instead of a list. */
function NotRunning({ db }: { db: Pick<Db, "status"> }) {
  return (
    <Empty>
      <p>The database is {db.status}: roles, databases and extensions are read from its server, which must be running.</p>
    </Empty>
  );
}

/**
 * Roles and logical databases (docs/product.md, Inside the database): LOGIN roles with a generated
 * password shown once (at creation and at each reset), and the server's databases with their owner.
 */
export function RolesAndDatabases({ db }: { db: Pick<Db, "id" | "status" | "name"> }) {
  const roles = usePoll(async () => await client.roles.list(db.id, { per_page: 100 }).all(), ONCE, [db.id, db.status === "running"]);
  const [secret, setSecret] = useState<CreatedRole | undefined>(undefined);
  if (db.status !== "running") return <NotRunning db={db} />;
  return (
    <>
      {secret && (
        <OnceSecret title={`Password of ${secret.name}`} secret={secret.password} label="password" onDismiss={() => setSecret(undefined)}>
          <p>Connection string to defaultdb as {secret.name}, with the password:</p>
          <div class="copyable">
            <code data-testid="role-connection-string">{secret.connection_string}</code>
          </div>
        </OnceSecret>
      )}
      <Roles
        id={db.id}
        roles={roles.value}
        error={roles.error}
        onSecret={(r) => {
          setSecret(r);
          roles.refresh();
        }}
        onChange={roles.refresh}
      />
      <LogicalDatabases id={db.id} roles={roles.value} />
    </>
  );
}

function Roles(props: { id: string; roles: Role[] | undefined; error: unknown; onSecret: (r: CreatedRole) => void; onChange: () => void }) {
  const readOnly = useReadOnly();
  const [name, setName] = useState("");
  const [deleting, setDeleting] = useState<string | undefined>(undefined);
  const create = useSubmit();
  const act = useSubmit();
  return (
    <section aria-labelledby="roles-title">
      <h2 id="roles-title">Roles</h2>
      <p class="hint">
        Roles that log in to this database's server, each with a password of its own. dbadmin, the database's own role, may grant them
        privileges.
      </p>
      {props.error !== undefined && <ProblemBanner problem={problemOf(props.error)} />}
      <ProblemBanner problem={act.problem} />
      {props.roles === undefined ? (
        <p aria-busy="true">Loading…</p>
      ) : (
        <ul class="rows">
          {props.roles.map((r) => (
            <li key={r.name} data-role={r.name}>
              <strong>{r.name}</strong>
              {r.builtin && <span class="hint"> · the database's own role</span>}
              {r.create_db && <span class="hint"> · may create databases</span>}
              {r.created_at && (
                <span class="hint">
                  {" "}
                  · created <Time iso={r.created_at} />
                </span>
              )}
              <div class="actions">
                <button
                  type="button"
                  class="secondary small"
                  disabled={readOnly || act.busy}
                  onClick={async () => {
                    const got = await act.submit(() => client.roles.resetPassword(props.id, r.name));
                    if (got) props.onSecret(got);
                  }}
                >
                  Reset the password of {r.name}
                </button>
                {!r.builtin && deleting !== r.name && (
                  <button type="button" class="danger small" disabled={readOnly} onClick={() => setDeleting(r.name)}>
                    Delete role {r.name}
                  </button>
                )}
              </div>
              {deleting === r.name && (
                <ConfirmByName
                  name={r.name}
                  action={`Delete role ${r.name}`}
                  busy={act.busy}
                  onCancel={() => setDeleting(undefined)}
                  onConfirm={async () => {
                    if (await act.submit(() => done(client.roles.delete(props.id, r.name)))) {
                      setDeleting(undefined);
                      props.onChange();
                    }
                  }}
                >
                  <p>Its sessions end at once. A role that still owns objects is refused: reassign or drop them first.</p>
                </ConfirmByName>
              )}
            </li>
          ))}
        </ul>
      )}
      <SubmitForm
        submission={create}
        label="Create role"
        class="card"
        aria-labelledby="role-new-title"
        intro={<h3 id="role-new-title">New role</h3>}
        onSubmit={async () => {
          const got = await create.submit(() => client.roles.create(props.id, { name: name.trim() }));
          if (got) {
            setName("");
            props.onSecret(got);
          }
        }}
      >
        <TextField
          id="role-name"
          label="Role name"
          hint="Lower-case letters, digits and _; its password is generated and shown once"
          error={create.fieldError("name")}
          autoComplete="off"
          value={name}
          onValue={setName}
        />
      </SubmitForm>
    </section>
  );
}

function LogicalDatabases({ id, roles }: { id: string; roles: Role[] | undefined }) {
  const readOnly = useReadOnly();
  const dbs = usePoll(async () => await client.dbs.list(id, { per_page: 100 }).all(), ONCE, [id]);
  const [name, setName] = useState("");
  const [owner, setOwner] = useState("dbadmin");
  const [deleting, setDeleting] = useState<string | undefined>(undefined);
  const create = useSubmit();
  const remove = useSubmit();
  return (
    <section aria-labelledby="dbs-title">
      <h2 id="dbs-title">Databases on this server</h2>
      {dbs.error !== undefined && <ProblemBanner problem={problemOf(dbs.error)} />}
      <ProblemBanner problem={remove.problem} />
      {dbs.value === undefined ? (
        <p aria-busy="true">Loading…</p>
      ) : (
        <div class="table-wrap">
          <table>
            <caption class="visually-hidden">Logical databases</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Owner</th>
                <th scope="col">Size</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {dbs.value.map((d: LogicalDb) => (
                <tr key={d.name} data-db={d.name}>
                  <td>
                    <code>{d.name}</code>
                  </td>
                  <td>{d.owner}</td>
                  <td>{bytes(d.size_bytes)}</td>
                  <td>
                    {d.builtin ? (
                      <span class="hint">every server's</span>
                    ) : deleting === d.name ? (
                      <ConfirmByName
                        name={d.name}
                        action={`Drop database ${d.name}`}
                        busy={remove.busy}
                        onCancel={() => setDeleting(undefined)}
                        onConfirm={async () => {
                          if (await remove.submit(() => done(client.dbs.delete(id, d.name)))) {
                            setDeleting(undefined);
                            dbs.refresh();
                          }
                        }}
                      />
                    ) : (
                      <button type="button" class="danger small" disabled={readOnly} onClick={() => setDeleting(d.name)}>
                        Drop database {d.name}
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
        submission={create}
        label="Create database"
        class="card"
        aria-labelledby="db-new-title"
        intro={<h3 id="db-new-title">New database on this server</h3>}
        onSubmit={async () => {
          if (await create.submit(() => client.dbs.create(id, { name: name.trim(), owner }))) {
            setName("");
            dbs.refresh();
          }
        }}
      >
        <TextField id="db-name" label="Database name" error={create.fieldError("name")} autoComplete="off" value={name} onValue={setName} />
        <Field id="db-owner" label="Owner" error={create.fieldError("owner")}>
          <select
            id="db-owner"
            value={owner}
            onChange={(e) => setOwner(e.currentTarget.value)}
            {...described("db-owner", create.fieldError("owner"))}
          >
            {(roles ?? [{ name: "dbadmin" } as Role]).map((r) => (
              <option key={r.name} value={r.name}>
                {r.name}
              </option>
            ))}
          </select>
        </Field>
      </SubmitForm>
    </section>
  );
}

/** Extensions of one logical database: the installed ones, those of the allowlist that can be, and the rest (refused here). */
export function Extensions({ db }: { db: Pick<Db, "id" | "status"> }) {
  const readOnly = useReadOnly();
  const [target, setTarget] = useState("defaultdb");
  const dbs = usePoll(async () => await client.dbs.list(db.id, { per_page: 100 }).all(), ONCE, [db.id, db.status === "running"]);
  const list = usePoll(async () => await client.extensions.list(db.id, { db: target, per_page: 100 }).all(), ONCE, [
    db.id,
    target,
    db.status === "running",
  ]);
  const act = useSubmit();
  const [removing, setRemoving] = useState<string | undefined>(undefined);
  if (db.status !== "running") return <NotRunning db={db} />;
  const all = list.value ?? [];
  const installed = all.filter((e) => e.installed);
  const available = all.filter((e) => !e.installed && e.allowed);
  const others = all.filter((e) => !e.installed && !e.allowed);
  const row = (e: Extension, action: "Install" | "Remove") => (
    <li key={e.name} data-extension={e.name}>
      <strong>{e.name}</strong> {e.installed_version ?? e.default_version} <span class="hint">· {e.description}</span>
      {action === "Remove" && removing === e.name ? (
        <ConfirmByName
          name={e.name}
          action={`Remove ${e.name}`}
          busy={act.busy}
          onCancel={() => setRemoving(undefined)}
          onConfirm={async () => {
            if (await act.submit(() => done(client.extensions.delete(db.id, e.name, { db: target })))) {
              setRemoving(undefined);
              list.refresh();
            }
          }}
        >
          <p>
            Its functions, types and operators leave {target}. Refused while something of yours depends on them (a column, an index): drop
            that first.
          </p>
        </ConfirmByName>
      ) : (
        <div class="actions">
          <button
            type="button"
            class={action === "Remove" ? "danger small" : "small"}
            disabled={readOnly || act.busy}
            onClick={async () => {
              if (action === "Remove") setRemoving(e.name);
              else if (await act.submit(() => client.extensions.install(db.id, { name: e.name, db: target }))) list.refresh();
            }}
          >
            {action} {e.name}
          </button>
        </div>
      )}
    </li>
  );
  return (
    <section aria-labelledby="extensions-title">
      <div class="title-row">
        <h2 id="extensions-title">Extensions</h2>
        <Field id="ext-db" label="In database">
          <select id="ext-db" value={target} onChange={(e) => setTarget(e.currentTarget.value)}>
            {(dbs.value ?? [{ name: "defaultdb" } as LogicalDb]).map((d) => (
              <option key={d.name} value={d.name}>
                {d.name}
              </option>
            ))}
          </select>
        </Field>
      </div>
      {list.error !== undefined && <ProblemBanner problem={problemOf(list.error)} />}
      <ProblemBanner problem={act.problem} />
      {list.value === undefined ? (
        <p aria-busy="true">Loading…</p>
      ) : (
        <>
          <h3>Installed in {target}</h3>
          {installed.length === 0 ? (
            <Empty>
              <p data-testid="extensions-empty">None yet: install one of the available extensions below.</p>
            </Empty>
          ) : (
            <ul class="rows" data-testid="extensions-installed">
              {installed.map((e) => row(e, "Remove"))}
            </ul>
          )}
          <h3>Available</h3>
          <ul class="rows" data-testid="extensions-available">
            {available.map((e) => row(e, "Install"))}
          </ul>
          {others.length > 0 && (
            <details>
              <summary>
                {others.length} more the server has, not installable here (they reach outside the server or need a superuser)
              </summary>
              <p class="hint">{others.map((e) => e.name).join(", ")}</p>
            </details>
          )}
        </>
      )}
    </section>
  );
}
