import type { Schemas } from "@dbaas/client";
import { useRef, useState } from "preact/hooks";
import { useReadOnly } from "../access.ts";
import { described, Field, ProblemBanner, StatusBadge, SubmitForm, Time } from "../components/ui.tsx";
import { problemOf } from "../errors.ts";
import { useSubmit } from "../form.ts";
import { bytes } from "../format.ts";
import { failoverBlocked, failoverProgress, haSettling } from "../ha.ts";
import { usePoll } from "../poll.ts";
import { client } from "../session.ts";
import { FAST_MS, IDLE_MS } from "../status.ts";

type Db = Schemas["Database"];
type HighAvailability = Schemas["HighAvailability"];
type Operation = Schemas["Operation"];

/**
 * High availability (docs/product.md, High availability): the standbys and their mode, the members
 * (the primary first) with their status and lag, the last failover, and a planned switchover whose
 * operation is followed until it settles. Read every 30 s, every 3 s while members come up.
 */
export function HighAvailabilityTab({ db }: { db: Pick<Db, "id" | "status"> }) {
  const ha = usePoll(() => client.databases.getHighAvailability(db.id), { intervalMs: FAST_MS, idleMs: IDLE_MS, active: haSettling }, [
    db.id,
  ]);
  return (
    <section aria-labelledby="ha-title">
      <h2 id="ha-title">High availability</h2>
      <p class="hint">
        Standbys are copies on other hosts of the region, streaming from the primary and promoted automatically when it is lost, behind the
        same connection string. Each is billed as compute at the database's tier.
      </p>
      {ha.error !== undefined && <ProblemBanner problem={problemOf(ha.error)} />}
      {ha.value === undefined ? (
        <p aria-busy="true">Loading…</p>
      ) : (
        <>
          <Members ha={ha.value} />
          <LastFailover ha={ha.value} />
          <Switchover db={db} ha={ha.value} onChange={ha.refresh} />
          <Standbys id={db.id} ha={ha.value} onSaved={ha.refresh} />
        </>
      )}
    </section>
  );
}

function Members({ ha }: { ha: HighAvailability }) {
  return (
    <div class="table-wrap">
      <table>
        <caption>Members: the primary first</caption>
        <thead>
          <tr>
            <th scope="col">Member</th>
            <th scope="col">Role</th>
            <th scope="col">Status</th>
            <th scope="col">Lag</th>
          </tr>
        </thead>
        <tbody>
          {ha.members.map((m) => (
            <tr key={m.id} data-role={m.role}>
              <td>
                <code>{m.id}</code>
              </td>
              <td>{m.role}</td>
              <td>
                <StatusBadge status={m.status} />
              </td>
              <td>{m.role === "primary" ? "—" : bytes(m.lag_bytes)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function LastFailover({ ha }: { ha: HighAvailability }) {
  const f = ha.last_failover;
  return (
    <div data-testid="last-failover">
      <h3>Last failover</h3>
      {f ? (
        <p>
          <Time iso={f.at} />: <code>{f.from}</code> → <code>{f.to}</code>. {f.reason}
        </p>
      ) : (
        <p class="hint">None yet.</p>
      )}
    </div>
  );
}

/** A planned switchover: confirmed, then its operation read every 3 s until it is no longer running. */
function Switchover({ db, ha, onChange }: { db: Pick<Db, "id" | "status">; ha: HighAvailability; onChange: () => void }) {
  const readOnly = useReadOnly();
  const [confirming, setConfirming] = useState(false);
  const [opId, setOpId] = useState<string | undefined>(undefined);
  const [underWay, setUnderWay] = useState(false);
  const ask = useSubmit();
  const blocked = failoverBlocked(ha, db.status);
  return (
    <div class="card">
      <h3>Planned switchover</h3>
      <p class="hint">
        For maintenance: the primary stops taking writes, the healthiest standby receives all of its WAL and becomes the primary. Clients
        reconnect to the same host name.
      </p>
      <ProblemBanner problem={ask.problem} />
      {blocked && <p class="hint">{blocked}</p>}
      {confirming ? (
        <fieldset class="confirm">
          <legend>Fail over now?</legend>
          <p>Open connections are ended and writes pause for a few seconds.</p>
          <div class="actions">
            <button
              type="button"
              class="danger"
              disabled={ask.busy}
              onClick={async () => {
                const op = await ask.submit(() => client.databases.failover(db.id));
                setConfirming(false);
                if (op) {
                  setOpId(op.id);
                  setUnderWay(true);
                  onChange();
                }
              }}
            >
              Confirm the switchover
            </button>
            <button type="button" class="secondary" onClick={() => setConfirming(false)}>
              Cancel
            </button>
          </div>
        </fieldset>
      ) : (
        <button type="button" disabled={readOnly || blocked !== undefined || ask.busy || underWay} onClick={() => setConfirming(true)}>
          Fail over
        </button>
      )}
      {opId && (
        <FailoverProgress
          id={db.id}
          opId={opId}
          onSettled={() => {
            setUnderWay(false);
            onChange();
          }}
        />
      )}
    </div>
  );
}

function FailoverProgress({ id, opId, onSettled }: { id: string; opId: string; onSettled: () => void }) {
  const settled = useRef(false);
  const op = usePoll(
    async () => {
      const found = await findOperation(id, opId);
      if (found && found.status !== "running" && !settled.current) {
        settled.current = true;
        onSettled();
      }
      return found;
    },
    { intervalMs: FAST_MS, idleMs: 0, active: (o) => o === undefined || o.status === "running" },
    [id, opId],
  );
  if (op.value === undefined) return <p aria-busy="true">Switchover requested…</p>;
  const progress = failoverProgress(op.value);
  return (
    <p class={progress.state === "failed" ? "banner error" : "banner note"} role="status" data-testid="failover-progress">
      <StatusBadge status={progress.state} /> {progress.text}
    </p>
  );
}

/** There is no GET of one operation: it is among the newest of the database's (newest first). */
async function findOperation(id: string, opId: string): Promise<Operation | undefined> {
  const page = await client.databases.listOperations(id, { per_page: 20 });
  return page.items.find((o) => o.id === opId);
}

function Standbys({ id, ha, onSaved }: { id: string; ha: HighAvailability; onSaved: () => void }) {
  const [standbys, setStandbys] = useState(ha.standbys);
  const [synchronous, setSynchronous] = useState(ha.synchronous);
  const form = useSubmit();
  const standbysError = form.fieldError("standbys");
  const syncError = form.fieldError("synchronous");
  return (
    <SubmitForm
      submission={form}
      label="Save high availability"
      class="card"
      aria-labelledby="standbys-title"
      intro={<h3 id="standbys-title">Standbys and their mode</h3>}
      onSubmit={async () => {
        if (await form.submit(() => client.databases.setHighAvailability(id, { standbys, synchronous }))) onSaved();
      }}
    >
      <Field
        id="ha-standbys"
        label="Standbys"
        hint="Each on another host of the region, at the database's port"
        {...(standbysError && { error: standbysError })}
      >
        <select
          id="ha-standbys"
          value={String(standbys)}
          onChange={(e) => setStandbys(Number(e.currentTarget.value))}
          {...described("ha-standbys", standbysError)}
        >
          <option value="0">0: none</option>
          <option value="1">1 standby</option>
          <option value="2">2 standbys</option>
        </select>
      </Field>
      <div class="field check">
        <span>
          <input
            id="ha-synchronous"
            type="checkbox"
            checked={synchronous}
            onChange={(e) => setSynchronous(e.currentTarget.checked)}
            {...described("ha-synchronous", syncError)}
          />{" "}
          <label class="inline" for="ha-synchronous">
            Synchronous: a commit returns once a standby has it (no acknowledged commit lost on failover; commits wait for the network)
          </label>
        </span>
        {syncError && (
          <small class="field-error" id="ha-synchronous-error" role="alert">
            {syncError}
          </small>
        )}
      </div>
      <p class="hint">
        In effect: {ha.standbys} standby{ha.standbys === 1 ? "" : "s"}, {ha.synchronous ? "synchronous" : "asynchronous"}.
      </p>
    </SubmitForm>
  );
}
