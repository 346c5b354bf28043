import type { Schemas } from "@dbaas/client";
import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { useReadOnly } from "../access.ts";
import { ProblemBanner, SubmitForm } from "../components/ui.tsx";
import { boundsText, changesOf, type Edit, type Parameter, parameterError, pendingRestart, shown, textOf } from "../config.ts";
import { problemOf } from "../errors.ts";
import { useSubmit } from "../form.ts";
import { usePoll } from "../poll.ts";
import { client } from "../session.ts";
import { FAST_MS } from "../status.ts";

type Db = Schemas["Database"];

/**
 * The database's configuration (docs/product.md, Inside the database): the allowlisted parameters with
 * their value, default, unit and bounds on its tier; several edited and saved at once (all or nothing:
 * the API's 422 names each refused one, shown beside it); those waiting for a restart flagged, with the
 * restart at hand. Read once; while a restart asked for here runs, every 3 s until it has applied them.
 */
export function Configuration({ db, onChange }: { db: Pick<Db, "id" | "status">; onChange: () => void }) {
  const readOnly = useReadOnly();
  const restartAsked = useRef(false);
  const config = usePoll(
    async () => (await client.config.get(db.id)).parameters,
    { intervalMs: FAST_MS, idleMs: 0, active: (ps) => restartAsked.current && pendingRestart(ps).length > 0 },
    [db.id],
  );
  const [saved, setSaved] = useState<Parameter[] | undefined>(undefined);
  const [edits, setEdits] = useState<Record<string, Edit>>({});
  const save = useSubmit();
  const restart = useSubmit();
  // What a save answered is newer than the last read, until the next read arrives (not before: the read from
  // before the save would show its pending restart gone while the restart has not even begun).
  useEffect(() => setSaved(undefined), [config.value]);
  const parameters = saved ?? config.value;
  if (parameters === undefined) {
    return config.error !== undefined ? <ProblemBanner problem={problemOf(config.error)} /> : <p aria-busy="true">Loading…</p>;
  }
  const changes = changesOf(parameters, edits);
  const count = Object.keys(changes).length;
  const pending = pendingRestart(parameters);
  const edit = (name: string, e: Edit | undefined) =>
    setEdits((all) => {
      const next = { ...all };
      if (e === undefined) delete next[name];
      else next[name] = e;
      return next;
    });
  return (
    <section aria-labelledby="config-title">
      <h2 id="config-title">Configuration</h2>
      <p class="hint">
        PostgreSQL parameters you can change, with their defaults for this tier. Numbers take PostgreSQL's units (64MB, 30s). Saved changes
        apply to new sessions at once, except those marked as needing a restart.
      </p>
      {pending.length > 0 && (
        <div class="banner note" data-testid="pending-restart">
          <p>
            Restart to apply: <strong>{pending.join(", ")}</strong> {pending.length === 1 ? "is" : "are"} saved and take
            {pending.length === 1 ? "s" : ""} effect at the next restart.
          </p>
          <ProblemBanner problem={restart.problem} />
          <button
            type="button"
            disabled={readOnly || restart.busy || db.status !== "running"}
            onClick={async () => {
              if (await restart.submit(() => client.databases.restart(db.id))) {
                restartAsked.current = true;
                onChange();
                config.refresh();
              }
            }}
          >
            Restart the database now
          </button>
          {db.status === "restarting" && <p aria-busy="true">Restarting…</p>}
        </div>
      )}
      <SubmitForm
        submission={save}
        class="config"
        label={count === 0 ? "Save changes" : `Save ${count} change${count === 1 ? "" : "s"}`}
        disabled={count === 0}
        onSubmit={async () => {
          const got = await save.submit(() => client.config.update(db.id, { parameters: changes as never }));
          if (got) {
            setSaved(got.parameters);
            setEdits({});
          }
        }}
      >
        <div class="params">
          {parameters.map((p) => (
            <ParameterField
              key={p.name}
              p={p}
              edit={edits[p.name]}
              error={parameterError(save.problem?.fields ?? {}, p.name)}
              onEdit={(e) => edit(p.name, e)}
            />
          ))}
        </div>
      </SubmitForm>
    </section>
  );
}

/** A parameter's id in the page (`pg_stat_statements.track` has a dot). */
const fieldId = (name: string) => `param-${name.replace(/[^a-z0-9_]/gi, "-")}`;

function ParameterField({
  p,
  edit,
  error,
  onEdit,
}: {
  p: Parameter;
  edit: Edit | undefined;
  error: string | undefined;
  onEdit: (e: Edit | undefined) => void;
}) {
  const id = fieldId(p.name);
  const text = edit === undefined || edit === "default" ? textOf(edit === "default" ? p.default : p.value) : edit.text;
  const setText = (t: string) => onEdit(t === textOf(p.value) ? undefined : { text: t });
  const bounds = boundsText(p);
  const name = (
    <>
      <code>{p.name}</code>
      {p.unit && <span class="hint"> ({p.unit})</span>}
      {p.pending_restart && (
        <>
          {" "}
          <span class="status status-pending">restart to apply</span>
        </>
      )}
    </>
  );
  const describedBy = error ? `${id}-error` : `${id}-hint`;
  const common = { id, "aria-describedby": describedBy, ...(error && { "aria-invalid": true as const }) };
  let control: ComponentChildren;
  if (p.type === "bool") {
    control = (
      <select {...common} value={text} onChange={(e) => setText(e.currentTarget.value)}>
        <option value="on">on</option>
        <option value="off">off</option>
      </select>
    );
  } else if (p.type === "enum") {
    control = (
      <select {...common} value={text} onChange={(e) => setText(e.currentTarget.value)}>
        {(p.allowed ?? []).map((v) => (
          <option key={v} value={v}>
            {v}
          </option>
        ))}
      </select>
    );
  } else if (p.type === "list") {
    const members = text === "" ? [] : text.split(",");
    control = (
      <fieldset {...common}>
        <legend class="visually-hidden">{p.name}</legend>
        {(p.allowed ?? []).map((v) => (
          <label key={v} class="inline">
            <input
              type="checkbox"
              checked={members.includes(v)}
              onChange={(e) => {
                const next = e.currentTarget.checked ? [...members, v] : members.filter((m) => m !== v);
                setText((p.allowed ?? []).filter((a) => next.includes(a)).join(","));
              }}
            />{" "}
            {v}
          </label>
        ))}
      </fieldset>
    );
  } else {
    control = (
      <input
        {...common}
        type="text"
        inputMode={p.type === "string" ? "text" : "decimal"}
        autoComplete="off"
        spellcheck={false}
        value={text}
        onInput={(e) => setText(e.currentTarget.value)}
      />
    );
  }
  return (
    <div class={`field param${edit !== undefined ? " edited" : ""}`} data-parameter={p.name}>
      {p.type === "list" ? <span class="label">{name}</span> : <label for={id}>{name}</label>}
      {control}
      {error ? (
        <small class="field-error" id={`${id}-error`} role="alert">
          {error}
        </small>
      ) : (
        <small class="hint" id={`${id}-hint`}>
          {p.description} Default {shown(p, p.default)}
          {bounds && `; ${bounds}`}
          {p.requires_restart && "; needs a restart"}.{edit === "default" && " Back to the default when saved."}
        </small>
      )}
      {p.overridden && edit !== "default" && (
        <button type="button" class="secondary small" onClick={() => onEdit("default")}>
          Use the default for {p.name}
        </button>
      )}
    </div>
  );
}
