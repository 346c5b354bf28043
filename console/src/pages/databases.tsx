import type { Schemas } from "@dbaas/client";
import { useState } from "preact/hooks";
import { Link } from "wouter-preact";
import { type Catalogue, tierLabel, useCatalogue } from "../catalogue.ts";
import { CopyButton, described, Empty, Field, OnceSecret, ProblemBanner, StatusBadge, Time } from "../components/ui.tsx";
import { problemOf } from "../errors.ts";
import { useSubmit } from "../form.ts";
import { usePoll } from "../poll.ts";
import { client } from "../session.ts";
import { FAST_MS, IDLE_MS, isTransitional } from "../status.ts";

type Created = Schemas["CreatedDatabase"];

export function Databases() {
  const list = usePoll(
    async () => (await client.databases.list({ per_page: 100 })).items,
    { intervalMs: FAST_MS, idleMs: IDLE_MS, active: (dbs) => dbs.some((d) => isTransitional(d.status)) },
    [],
  );
  const catalogue = useCatalogue();
  const [created, setCreated] = useState<Created | undefined>(undefined);
  const [creating, setCreating] = useState(false);
  return (
    <main id="main">
      <div class="title-row">
        <h1>Databases</h1>
        {!creating && (
          <button type="button" onClick={() => setCreating(true)}>
            New database
          </button>
        )}
      </div>
      {created && (
        <OnceSecret
          title={`Password of ${created.name}`}
          secret={created.password}
          label="password"
          onDismiss={() => setCreated(undefined)}
        >
          <p>Connection string with the password:</p>
          <div class="copyable">
            <code data-testid="connection-string">{created.connection_string.replace("********", created.password)}</code>
            <CopyButton text={created.connection_string.replace("********", created.password)} label="connection string" />
          </div>
        </OnceSecret>
      )}
      {creating && catalogue && (
        <CreateDatabase
          catalogue={catalogue}
          onCancel={() => setCreating(false)}
          onCreated={(db) => {
            setCreated(db);
            setCreating(false);
            list.refresh();
          }}
        />
      )}
      {list.error !== undefined && <ProblemBanner problem={problemOf(list.error)} />}
      {list.value === undefined ? (
        <p aria-busy="true">Loading…</p>
      ) : list.value.length === 0 ? (
        <Empty>
          <p>
            No databases yet. Create one with <strong>New database</strong>: the micro tier is free on the free plan.
          </p>
        </Empty>
      ) : (
        <div class="table-wrap">
          <table>
            <caption class="visually-hidden">Your databases</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Status</th>
                <th scope="col">Tier</th>
                <th scope="col">Region</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {list.value.map((db) => (
                <tr key={db.id} data-id={db.id}>
                  <td>
                    <Link href={`/databases/${db.id}`}>{db.name}</Link>
                  </td>
                  <td>
                    <StatusBadge status={db.status} />
                  </td>
                  <td>{db.tier}</td>
                  <td>{db.region}</td>
                  <td>
                    <Time iso={db.created_at} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </main>
  );
}

export function CreateDatabase(props: { catalogue: Catalogue; onCreated: (db: Created) => void; onCancel: () => void }) {
  const { regions, tiers, versions } = props.catalogue;
  const [v, setV] = useState({
    name: "",
    region: regions[0]?.code ?? "fsn1",
    tier: tiers[0]?.name ?? "micro",
    version: versions.find((x) => x.default)?.version ?? versions[0]?.version ?? "17",
  });
  const form = useSubmit();
  return (
    <form
      class="card"
      aria-labelledby="create-title"
      noValidate
      onSubmit={async (e) => {
        e.preventDefault();
        const db = await form.submit(() => client.databases.create(v as never));
        if (db) props.onCreated(db);
      }}
    >
      <h2 id="create-title">New database</h2>
      <ProblemBanner problem={form.problem} />
      <Field id="db-name" label="Name" error={form.fieldError("name")} hint="3–63 characters">
        <input
          id="db-name"
          autoComplete="off"
          value={v.name}
          onInput={(e) => setV({ ...v, name: e.currentTarget.value })}
          {...described("db-name", form.fieldError("name"))}
        />
      </Field>
      <Field id="db-region" label="Region" error={form.fieldError("region")}>
        <select id="db-region" value={v.region} onChange={(e) => setV({ ...v, region: e.currentTarget.value as never })}>
          {regions.map((r) => (
            <option key={r.code} value={r.code}>
              {r.name} ({r.code})
            </option>
          ))}
        </select>
      </Field>
      <fieldset>
        <legend>Tier</legend>
        {tiers.map((t) => (
          <label key={t.name} class="radio">
            <input type="radio" name="tier" value={t.name} checked={v.tier === t.name} onChange={() => setV({ ...v, tier: t.name })} />
            {tierLabel(t)}
          </label>
        ))}
        {form.fieldError("tier") && (
          <small class="field-error" role="alert">
            {form.fieldError("tier")}
          </small>
        )}
      </fieldset>
      <Field id="db-version" label="PostgreSQL version" error={form.fieldError("version")}>
        <select id="db-version" value={v.version} onChange={(e) => setV({ ...v, version: e.currentTarget.value })}>
          {versions.map((x) => (
            <option key={x.version} value={x.version}>
              {x.version}
            </option>
          ))}
        </select>
      </Field>
      <div class="actions">
        <button type="submit" disabled={form.busy}>
          Create database
        </button>
        <button type="button" class="secondary" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}
