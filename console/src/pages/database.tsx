import type { Schemas } from "@dbaas/client";
import { useMemo, useState } from "preact/hooks";
import { Link, Route, Switch, useLocation } from "wouter-preact";
import { canChangeDatabases, ReadOnly, useMemberRole, useReadOnly } from "../access.ts";
import { tierLabel, useCatalogue } from "../catalogue.ts";
import { metricChart, RANGES, type RangeId, rangeQuery } from "../chart-data.ts";
import { TimeChart } from "../components/chart.tsx";
import {
  ConfirmByName,
  CopyButton,
  described,
  Empty,
  Field,
  OnceSecret,
  ProblemBanner,
  ReadOnlyNote,
  StatusBadge,
  Time,
  TextField,
  SubmitForm,
} from "../components/ui.tsx";
import { problemOf } from "../errors.ts";
import { bytes, restoreInstant, toLocalInput } from "../format.ts";
import { done, useSubmit } from "../form.ts";
import { usePoll } from "../poll.ts";
import { Configuration } from "./configuration.tsx";
import { HighAvailabilityTab } from "./high-availability.tsx";
import { Extensions, RolesAndDatabases } from "./inside.tsx";
import { Logs, Queries } from "./insights.tsx";
import { Network } from "./network.tsx";
import { client } from "../session.ts";
import { FAST_MS, IDLE_MS, isTransitional } from "../status.ts";

type Db = Schemas["Database"];

const TABS = [
  ["", "Overview"],
  ["/metrics", "Metrics"],
  ["/backups", "Backups"],
  ["/replicas", "Replicas"],
  ["/high-availability", "High availability"],
  ["/network", "Network"],
  ["/roles", "Roles & databases"],
  ["/configuration", "Configuration"],
  ["/extensions", "Extensions"],
  ["/logs", "Logs"],
  ["/queries", "Queries"],
  ["/operations", "Operations"],
  ["/settings", "Settings"],
] as const;

export function DatabasePage({ id }: { id: string }) {
  const [location] = useLocation();
  const db = usePoll(() => client.databases.get(id), { intervalMs: FAST_MS, idleMs: IDLE_MS, active: (d) => isTransitional(d.status) }, [
    id,
  ]);
  const base = `/databases/${id}`;
  const readOnly = !canChangeDatabases(useMemberRole());
  if (db.value === undefined) {
    return (
      <main id="main">
        {db.error !== undefined ? <ProblemBanner problem={problemOf(db.error)} /> : <p aria-busy="true">Loading…</p>}
        <Link href="/databases">All databases</Link>
      </main>
    );
  }
  const d = db.value;
  return (
    <ReadOnly.Provider value={readOnly}>
      <main id="main">
        <p class="crumbs">
          <Link href="/databases">Databases</Link> /
        </p>
        <div class="title-row">
          <h1>{d.name}</h1>
          <StatusBadge status={d.status} />
        </div>
        {d.status_reason && <p class="hint">{d.status_reason}</p>}
        <ReadOnlyNote />
        <nav class="tabs" aria-label="Database sections">
          {TABS.map(([path, label]) => (
            <Link key={path} href={base + path} aria-current={location === base + path ? "page" : undefined}>
              {label}
            </Link>
          ))}
        </nav>
        <Switch>
          <Route path={`${base}/metrics`}>
            <Metrics id={id} />
          </Route>
          <Route path={`${base}/backups`}>
            <Backups db={d} />
          </Route>
          <Route path={`${base}/replicas`}>
            <Replicas db={d} />
          </Route>
          <Route path={`${base}/high-availability`}>
            <HighAvailabilityTab db={d} />
          </Route>
          <Route path={`${base}/network`}>
            <Network db={d} />
          </Route>
          <Route path={`${base}/roles`}>
            <RolesAndDatabases db={d} />
          </Route>
          <Route path={`${base}/configuration`}>
            <Configuration db={d} onChange={db.refresh} />
          </Route>
          <Route path={`${base}/extensions`}>
            <Extensions db={d} />
          </Route>
          <Route path={`${base}/logs`}>
            <Logs db={d} />
          </Route>
          <Route path={`${base}/queries`}>
            <Queries db={d} />
          </Route>
          <Route path={`${base}/operations`}>
            <Operations id={id} />
          </Route>
          <Route path={`${base}/settings`}>
            <Settings db={d} onChange={db.refresh} />
          </Route>
          <Route>
            <Overview db={d} onChange={db.refresh} />
          </Route>
        </Switch>
      </main>
    </ReadOnly.Provider>
  );
}

/** The database's tier as the catalogue offers it (size and price), or its bare name until the catalogue is read. */
function TierText({ tier }: { tier: Db["tier"] }) {
  const offered = useCatalogue()?.tiers.find((t) => t.name === tier);
  return <span data-testid="tier">{offered ? tierLabel(offered) : tier}</span>;
}

function Overview({ db, onChange }: { db: Db; onChange: () => void }) {
  const readOnly = useReadOnly();
  const form = useSubmit();
  const act = (action: "start" | "stop" | "restart") => async () => {
    if (await form.submit(() => client.databases[action](db.id))) onChange();
  };
  const rows: Array<[string, string]> = [
    ["Host", db.host],
    ["Port", String(db.port)],
    ["Database", db.database],
    ["User", db.username],
    ["Connection string", db.connection_string],
  ];
  return (
    <section aria-labelledby="conn-title">
      <h2 id="conn-title">Connection</h2>
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
        <div>
          <dt>Version, tier, region</dt>
          <dd>
            PostgreSQL {db.version} · <TierText tier={db.tier} /> · {db.region}
          </dd>
        </div>
        <div>
          <dt>Created</dt>
          <dd>
            <Time iso={db.created_at} />
          </dd>
        </div>
      </dl>
      <p class="hint">The password was shown once when the database was created; a new one can be set under Settings.</p>
      <CaCertificate id={db.id} />
      <h2>Power</h2>
      <ProblemBanner problem={form.problem} />
      <div class="actions">
        <button type="button" disabled={form.busy || db.status !== "stopped" || readOnly} onClick={act("start")}>
          Start
        </button>
        <button type="button" class="secondary" disabled={form.busy || db.status !== "running" || readOnly} onClick={act("stop")}>
          Stop
        </button>
        <button type="button" class="secondary" disabled={form.busy || db.status !== "running" || readOnly} onClick={act("restart")}>
          Restart
        </button>
      </div>
    </section>
  );
}

function CaCertificate({ id }: { id: string }) {
  const [pem, setPem] = useState<string | undefined>(undefined);
  const form = useSubmit();
  return (
    <div>
      {pem === undefined ? (
        <button
          type="button"
          class="secondary"
          disabled={form.busy}
          onClick={async () => {
            const got = await form.submit(() => client.databases.getCaCertificate(id));
            if (got !== undefined) setPem(got);
          }}
        >
          Show the CA certificate
        </button>
      ) : (
        <div class="copyable block">
          <pre data-testid="ca-certificate">{pem}</pre>
          <CopyButton text={pem} label="CA certificate" />
        </div>
      )}
      <ProblemBanner problem={form.problem} />
    </div>
  );
}

function Metrics({ id }: { id: string }) {
  const [range, setRange] = useState<RangeId>("1h");
  const metrics = usePoll(
    () => client.databases.getMetrics(id, rangeQuery(range, new Date())),
    { intervalMs: 60_000, idleMs: 60_000, active: () => false },
    [id, range],
  );
  const charts = useMemo(() => metrics.value?.metrics.map((m) => ({ metric: m, data: metricChart(m) })) ?? [], [metrics.value]);
  return (
    <section aria-labelledby="metrics-title">
      <div class="title-row">
        <h2 id="metrics-title">Metrics</h2>
        <Field id="range" label="Range">
          <select id="range" value={range} onChange={(e) => setRange(e.currentTarget.value as RangeId)}>
            {RANGES.map((r) => (
              <option key={r.id} value={r.id}>
                {r.label}
              </option>
            ))}
          </select>
        </Field>
      </div>
      {metrics.error !== undefined && <ProblemBanner problem={problemOf(metrics.error)} />}
      {metrics.value === undefined ? (
        <p aria-busy="true">Loading…</p>
      ) : (
        <div class="charts">
          {charts.map(({ metric, data }) => (
            <TimeChart key={metric.name} title={metric.name.replaceAll("_", " ")} unit={metric.unit} data={data} />
          ))}
        </div>
      )}
    </section>
  );
}

type BackupList = Awaited<ReturnType<typeof client.backups.list>>;

function Backups({ db }: { db: Db }) {
  const list = usePoll(
    async () => await client.backups.list(db.id, { per_page: 50 }),
    {
      intervalMs: FAST_MS,
      idleMs: IDLE_MS,
      active: (page: BackupList) => page.items.some((b) => b.status === "running"),
    },
    [db.id],
  );
  const take = useSubmit();
  const readOnly = useReadOnly();
  const page = list.value;
  return (
    <section aria-labelledby="backups-title">
      <div class="title-row">
        <h2 id="backups-title">Backups</h2>
        <button
          type="button"
          disabled={take.busy || db.status !== "running" || readOnly}
          onClick={async () => {
            if (await take.submit(() => client.backups.create(db.id))) list.refresh();
          }}
        >
          Back up now
        </button>
      </div>
      <ProblemBanner problem={take.problem} />
      {list.error !== undefined && <ProblemBanner problem={problemOf(list.error)} />}
      {page === undefined ? (
        <p aria-busy="true">Loading…</p>
      ) : (
        <>
          <p>
            WAL archiving: <StatusBadge status={page.wal_archiving.status} /> {page.wal_archiving.error}
          </p>
          {page.items.length === 0 ? (
            <Empty>
              <p>
                No backups yet. A base backup is taken every day; <strong>Back up now</strong> takes one at once.
              </p>
            </Empty>
          ) : (
            <div class="table-wrap">
              <table>
                <caption class="visually-hidden">Backups</caption>
                <thead>
                  <tr>
                    <th scope="col">Started</th>
                    <th scope="col">Type</th>
                    <th scope="col">Status</th>
                    <th scope="col">Size</th>
                  </tr>
                </thead>
                <tbody>
                  {page.items.map((b) => (
                    <tr key={b.id} data-id={b.id}>
                      <td>
                        <Time iso={b.started_at} />
                      </td>
                      <td>{b.type}</td>
                      <td>
                        <StatusBadge status={b.status} /> {b.failure_reason}
                      </td>
                      <td>{bytes(b.size_bytes)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
          {page.earliest_restore_time && page.latest_restore_time ? (
            <Restore db={db} earliest={page.earliest_restore_time} latest={page.latest_restore_time} />
          ) : (
            <p class="hint">Point-in-time restore becomes possible once a backup has completed.</p>
          )}
        </>
      )}
    </section>
  );
}

/** Restore to an instant of the window (local time in the picker, bounded by the window; sent in UTC). */
export function Restore({ db, earliest, latest }: { db: Db; earliest: string; latest: string }) {
  const [name, setName] = useState(`${db.name}-restored`);
  // Until the user picks an instant, the picker follows the window's end as it moves (WAL keeps arriving):
  // a default fixed at the first render would restore to an instant that is stale by the time they click.
  const [picked, setWhen] = useState<string | undefined>(undefined);
  const when = picked ?? toLocalInput(latest);
  const [restored, setRestored] = useState<Schemas["RestoredDatabase"] | undefined>(undefined);
  const form = useSubmit();
  return (
    <form
      class="card"
      aria-labelledby="restore-title"
      noValidate
      onSubmit={async (e) => {
        e.preventDefault();
        const got = await form.submit(() => client.backups.restore(db.id, { name, restore_time: restoreInstant(when, earliest, latest) }));
        if (got) setRestored(got);
      }}
    >
      <h3 id="restore-title">Restore to a point in time</h3>
      <p>
        Into a new database, from any instant between <Time iso={earliest} /> and <Time iso={latest} />.
      </p>
      <ProblemBanner problem={form.problem} />
      <TextField
        id="restore-name"
        label="Name of the new database"
        error={form.fieldError("name")}
        autoComplete="off"
        value={name}
        onValue={setName}
      />
      <Field id="restore-time" label="Restore to (your time zone)" error={form.fieldError("restore_time")}>
        <input
          id="restore-time"
          type="datetime-local"
          step={1}
          min={toLocalInput(earliest)}
          max={toLocalInput(latest)}
          value={when}
          onInput={(e) => setWhen(e.currentTarget.value)}
          {...described("restore-time", form.fieldError("restore_time"))}
        />
      </Field>
      <button type="submit" disabled={form.busy || !when}>
        Restore
      </button>
      {restored && (
        <OnceSecret
          title={`Password of ${restored.name}`}
          secret={restored.password}
          label="password"
          onDismiss={() => setRestored(undefined)}
        >
          <p>
            <Link href={`/databases/${restored.id}`}>Open {restored.name}</Link>
          </p>
        </OnceSecret>
      )}
    </form>
  );
}

function Replicas({ db }: { db: Db }) {
  const list = usePoll(
    async () => (await client.replicas.list(db.id)).items,
    {
      intervalMs: FAST_MS,
      idleMs: IDLE_MS,
      active: (rs) => rs.some((r) => isTransitional(r.status)),
    },
    [db.id],
  );
  const [name, setName] = useState("");
  /** The replica being promoted or deleted, once its button is clicked: confirmed by typing its name. */
  const [confirming, setConfirming] = useState<{ id: string; what: "promote" | "delete" } | undefined>(undefined);
  const [promoted, setPromoted] = useState<Db | undefined>(undefined);
  const form = useSubmit();
  const act = useSubmit();
  const readOnly = useReadOnly();
  return (
    <section aria-labelledby="replicas-title">
      <h2 id="replicas-title">Read replicas</h2>
      {list.error !== undefined && <ProblemBanner problem={problemOf(list.error)} />}
      <ProblemBanner problem={act.problem} />
      {promoted && (
        <p class="banner note" role="status" data-testid="promoted">
          {promoted.name} is now a database of its own. <Link href={`/databases/${promoted.id}`}>Open {promoted.name}</Link>
        </p>
      )}
      {list.value === undefined ? (
        <p aria-busy="true">Loading…</p>
      ) : list.value.length === 0 ? (
        <Empty>
          <p>No replicas. Add one below to spread reads; it is billed by the hour like a database (a card is needed).</p>
        </Empty>
      ) : (
        <ul class="rows">
          {list.value.map((r) => (
            <li key={r.id} data-replica={r.name}>
              <strong>{r.name}</strong> <StatusBadge status={r.status} /> · {r.region} · lag {bytes(r.lag_bytes)}
              <div class="copyable">
                <code>{r.connection_string}</code>
                <CopyButton text={r.connection_string} label={`connection string of ${r.name}`} />
              </div>
              {confirming?.id === r.id ? (
                <ConfirmByName
                  name={r.name}
                  action={confirming.what === "promote" ? `Promote ${r.name}` : `Delete replica ${r.name}`}
                  busy={act.busy}
                  onCancel={() => setConfirming(undefined)}
                  onConfirm={async () => {
                    if (confirming.what === "promote") {
                      const got = await act.submit(() => client.replicas.promote(db.id, r.id));
                      if (got) {
                        setPromoted(got);
                        setConfirming(undefined);
                      }
                    } else if (await act.submit(() => done(client.replicas.delete(db.id, r.id)))) {
                      setConfirming(undefined);
                    }
                    list.refresh();
                  }}
                >
                  <p>
                    {confirming.what === "promote"
                      ? `${r.name} stops following ${db.name} and becomes a database of its own, writable, with its data as of now. It cannot follow again.`
                      : `${r.name} and its connection string go; ${db.name} is not touched.`}
                  </p>
                </ConfirmByName>
              ) : (
                <div class="actions">
                  <button
                    type="button"
                    class="secondary small"
                    disabled={act.busy || r.status !== "running" || readOnly}
                    onClick={() => setConfirming({ id: r.id, what: "promote" })}
                  >
                    Promote {r.name}
                  </button>
                  <button
                    type="button"
                    class="danger small"
                    disabled={act.busy || readOnly}
                    onClick={() => setConfirming({ id: r.id, what: "delete" })}
                  >
                    Delete replica {r.name}
                  </button>
                </div>
              )}
            </li>
          ))}
        </ul>
      )}
      <SubmitForm
        submission={form}
        label="Add replica"
        class="card"
        disabled={db.status !== "running"}
        onSubmit={async () => {
          if (await form.submit(() => client.replicas.create(db.id, { name }))) {
            setName("");
            list.refresh();
          }
        }}
      >
        <TextField
          id="replica-name"
          label="Replica name"
          error={form.fieldError("name")}
          autoComplete="off"
          value={name}
          onValue={setName}
        />
      </SubmitForm>
    </section>
  );
}

/** The database's operations, newest first; a failover's or a standby replacement's members and reason under its type. */
export function Operations({ id }: { id: string }) {
  const list = usePoll(
    async () => (await client.databases.listOperations(id, { per_page: 50 })).items,
    {
      intervalMs: FAST_MS,
      idleMs: IDLE_MS,
      active: (ops) => ops.some((o) => o.status === "running"),
    },
    [id],
  );
  if (list.error !== undefined) return <ProblemBanner problem={problemOf(list.error)} />;
  if (list.value === undefined) return <p aria-busy="true">Loading…</p>;
  return (
    <section aria-labelledby="ops-title">
      <h2 id="ops-title">Operations</h2>
      <div class="table-wrap">
        <table>
          <caption class="visually-hidden">Operations, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Operation</th>
              <th scope="col">Status</th>
              <th scope="col">Started</th>
              <th scope="col">Finished</th>
            </tr>
          </thead>
          <tbody>
            {list.value.map((o) => (
              <tr key={o.id}>
                <td>
                  {o.type}
                  {o.from !== undefined ? (
                    <div class="hint">{o.to !== undefined ? `${o.from} → ${o.to}` : `${o.from} → (waiting for a host)`}</div>
                  ) : null}
                  {o.reason !== undefined ? <div class="hint">{o.reason}</div> : null}
                </td>
                <td>
                  <StatusBadge status={o.status} /> {o.error}
                </td>
                <td>
                  <Time iso={o.started_at} />
                </td>
                <td>
                  <Time iso={o.finished_at} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}

function Settings({ db, onChange }: { db: Db; onChange: () => void }) {
  const [, navigate] = useLocation();
  const catalogue = useCatalogue();
  const [name, setName] = useState(db.name);
  const [tier, setTier] = useState<Db["tier"]>(db.tier);
  const [password, setPassword] = useState<Schemas["Credentials"] | undefined>(undefined);
  const rename = useSubmit();
  const resize = useSubmit();
  const reset = useSubmit();
  const remove = useSubmit();
  const readOnly = useReadOnly();
  return (
    <section aria-labelledby="settings-title">
      <h2 id="settings-title">Settings</h2>
      <SubmitForm
        submission={rename}
        label="Rename"
        class="card"
        onSubmit={async () => {
          if (await rename.submit(() => client.databases.update(db.id, { name }))) onChange();
        }}
      >
        <TextField id="rename" label="Name" error={rename.fieldError("name")} autoComplete="off" value={name} onValue={setName} />
      </SubmitForm>
      {catalogue && (
        <SubmitForm
          submission={resize}
          label="Resize"
          class="card"
          disabled={(db.status !== "running" && db.status !== "stopped") || tier === db.tier}
          intro={
            <>
              <p>
                Current tier: <TierText tier={db.tier} />
              </p>
              <p class="hint">A resize restarts the server: connections drop for a few seconds.</p>
            </>
          }
          onSubmit={async () => {
            if (await resize.submit(() => client.databases.resize(db.id, { tier }))) onChange();
          }}
        >
          <Field id="resize" label="Tier" error={resize.fieldError("tier")}>
            <select
              id="resize"
              value={tier}
              onChange={(e) => setTier(e.currentTarget.value as Db["tier"])}
              {...described("resize", resize.fieldError("tier"))}
            >
              {catalogue.tiers.map((t) => (
                <option key={t.name} value={t.name}>
                  {tierLabel(t)}
                </option>
              ))}
            </select>
          </Field>
        </SubmitForm>
      )}
      <div class="card">
        <h3>Password</h3>
        <ProblemBanner problem={reset.problem} />
        {password ? (
          <OnceSecret title="New password" secret={password.password} label="password" onDismiss={() => setPassword(undefined)} />
        ) : (
          <button
            type="button"
            class="secondary"
            disabled={reset.busy || readOnly}
            onClick={async () => {
              const got = await reset.submit(() => client.databases.resetPassword(db.id));
              if (got) setPassword(got);
            }}
          >
            Reset the password
          </button>
        )}
        <p class="hint">The old password stops working at once.</p>
      </div>
      <div class="card danger-zone">
        <h3>Delete this database</h3>
        <p>Its data is kept 7 days, then removed.</p>
        <ProblemBanner problem={remove.problem} />
        <ConfirmByName
          name={db.name}
          action="Delete database"
          busy={remove.busy}
          onConfirm={async () => {
            const deleted = await remove.submit(() => done(client.databases.delete(db.id)));
            if (deleted) navigate("/databases");
          }}
        />
      </div>
    </section>
  );
}
