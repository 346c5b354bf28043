import { DbaasError, type Schemas } from "@dbaas/client";
import { useEffect, useRef, useState } from "preact/hooks";
import { Link } from "wouter-preact";
import { useReadOnly } from "../access.ts";
import { Empty, Field, ProblemBanner, Time } from "../components/ui.tsx";
import { problemOf } from "../errors.ts";
import { done, useSubmit } from "../form.ts";
import {
  duration,
  FOLLOW_MS,
  followed,
  MAX_SHOWN,
  type LogEntry,
  type LogFilters,
  logQuery,
  newestFirst,
  type QueryOrder,
  ratio,
  SEVERITIES,
  type Severity,
  severityClass,
} from "../logs.ts";
import { startPolling, usePoll } from "../poll.ts";
import { client, signOut } from "../session.ts";
import { IDLE_MS } from "../status.ts";

type Db = Schemas["Database"];

interface Shown {
  entries: LogEntry[];
  /** Null at the beginning of the log (nothing older to load), or once following dropped the oldest from view. */
  prev: string | null;
  /** Following dropped the oldest entries from view (MAX_SHOWN). */
  trimmed?: boolean;
}

/**
 * The server's log (docs/product.md, Logs), newest first: filtered by severity (that one and worse)
 * and text as the API filters; older entries a page at a time ("Load older", from `prev_cursor`);
 * following reads what was written after the newest (`next_cursor`) every few seconds, only while the
 * browser tab is visible and this tab is open. Reading is `metrics:read`: a viewer sees it all.
 */
export function Logs({ db }: { db: Pick<Db, "id"> }) {
  const [filters, setFilters] = useState<LogFilters>({ severity: "", q: "" });
  const [text, setText] = useState("");
  const [follow, setFollow] = useState(false);
  const [shown, setShown] = useState<Shown | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  /** Bumped by "Try again" after a first read that failed. */
  const [attempt, setAttempt] = useState(0);
  const older = useSubmit();
  const next = useRef("");
  const failed = (err: unknown) => {
    if (problemOf(err).unauthenticated) signOut();
    setError(err);
  };

  useEffect(() => {
    let live = true;
    setShown(undefined);
    setError(undefined);
    client.logs.list(db.id, logQuery(filters)).then(
      (page) => {
        if (!live) return;
        next.current = page.next_cursor;
        setShown({ entries: newestFirst([], page.entries, "newer"), prev: page.prev_cursor });
      },
      (err) => live && failed(err),
    );
    return () => {
      live = false;
    };
  }, [db.id, filters, attempt]);

  const loaded = shown !== undefined;
  useEffect(() => {
    if (!follow || !loaded) return;
    // startPolling reads nothing while the browser tab is hidden; stop() (unmount, unfollow, new filters) ends it.
    const poller = startPolling(
      () => client.logs.list(db.id, logQuery(filters, next.current)),
      { intervalMs: FOLLOW_MS, idleMs: FOLLOW_MS, active: () => true },
      (page) => {
        next.current = page.next_cursor;
        setError(undefined);
        if (page.entries.length === 0) return;
        setShown((s) => {
          if (!s) return s;
          const { entries, trimmed } = followed(s.entries, page.entries);
          return trimmed ? { entries, prev: null, trimmed } : { ...s, entries };
        });
      },
      failed,
    );
    return poller.stop;
  }, [db.id, filters, follow, loaded]);

  const filtered = filters.severity !== "" || filters.q !== "";
  return (
    <section aria-labelledby="logs-title">
      <h2 id="logs-title">Logs</h2>
      <p class="hint">
        The server's own log: starts, checkpoints, failed statements with their error, connections refused. Kept 7 days (or the tier's log
        quota); statements that succeed are not logged (see Queries).
      </p>
      <div class="log-filters">
        <Field id="log-severity" label="Severity (this and worse)">
          <select
            id="log-severity"
            value={filters.severity}
            onChange={(e) => setFilters({ ...filters, severity: e.currentTarget.value as Severity | "" })}
          >
            <option value="">All</option>
            {SEVERITIES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </Field>
        <form
          aria-label="Search the log"
          class="log-search"
          onSubmit={(e) => {
            e.preventDefault();
            setFilters({ ...filters, q: text.trim() });
          }}
        >
          <Field id="log-q" label="Text in the message or statement">
            <input
              id="log-q"
              type="search"
              autoComplete="off"
              maxLength={200}
              value={text}
              onInput={(e) => setText(e.currentTarget.value)}
            />
          </Field>
          <button type="submit" class="secondary">
            Search
          </button>
        </form>
        <label class="inline follow">
          <input type="checkbox" checked={follow} onChange={(e) => setFollow(e.currentTarget.checked)} /> Follow new entries
        </label>
      </div>
      <p role="status" class="hint" data-testid="log-follow-status">
        {follow ? `Following: new entries appear at the top (read every ${FOLLOW_MS / 1000} s while this tab is open).` : ""}
      </p>
      {error !== undefined && <ProblemBanner problem={problemOf(error)} />}
      {shown === undefined ? (
        error === undefined ? (
          <p aria-busy="true">Loading…</p>
        ) : (
          <button type="button" class="secondary" onClick={() => setAttempt((n) => n + 1)}>
            Try again
          </button>
        )
      ) : shown.entries.length === 0 ? (
        <Empty>
          <p data-testid="logs-empty">
            {filtered
              ? "No entry matches these filters: choose a lower severity or clear the text to see more."
              : "No log entries yet. The server writes here when it starts, at checkpoints and when a statement fails: turn on Follow new entries to see them as they come."}
          </p>
        </Empty>
      ) : (
        <>
          <ol class="rows log" aria-label="Log entries, newest first" data-testid="log-entries">
            {shown.entries.map((e, i) => (
              <LogLine key={`${shown.entries.length - i}`} entry={e} />
            ))}
          </ol>
          <ProblemBanner problem={older.problem} />
          {shown.prev !== null ? (
            <button
              type="button"
              class="secondary"
              disabled={older.busy}
              onClick={async () => {
                const page = await older.submit(() => client.logs.list(db.id, logQuery(filters, shown.prev)));
                if (page) {
                  // An empty page is the beginning of the log, whatever cursor it came with.
                  setShown(
                    (s) =>
                      s && { entries: newestFirst(s.entries, page.entries, "older"), prev: page.entries.length ? page.prev_cursor : null },
                  );
                }
              }}
            >
              Load older
            </button>
          ) : shown.trimmed ? (
            <p class="hint" data-testid="log-trimmed">
              The newest {MAX_SHOWN.toLocaleString()} entries are shown; older ones left the view while following. Change a filter or reopen
              the tab to page through older entries again.
            </p>
          ) : (
            <p class="hint" data-testid="log-beginning">
              The beginning of the kept log.
            </p>
          )}
        </>
      )}
    </section>
  );
}

function LogLine({ entry: e }: { entry: LogEntry }) {
  const more: Array<[string, string | null]> = [
    ["Detail", e.detail],
    ["Hint", e.hint],
    ["Context", e.context],
    ["Statement", e.statement],
  ];
  const who = [e.user && e.database ? `${e.user}@${e.database}` : e.user, e.application_name, e.backend_type, `pid ${e.pid}`];
  return (
    <li data-severity={e.severity}>
      <div class="log-head">
        <Time iso={e.time} /> <span class={severityClass(e.severity)}>{e.severity}</span>
        {e.sql_state && <code class="hint"> {e.sql_state}</code>}
        <span class="hint"> · {who.filter(Boolean).join(" · ")}</span>
      </div>
      <p class="log-message">{e.message}</p>
      {more.some(([, v]) => v) && (
        <dl class="log-more">
          {more.map(([label, value]) =>
            value ? (
              <div key={label}>
                <dt>{label}</dt>
                <dd>
                  <code>{value}</code>
                </dd>
              </div>
            ) : null,
          )}
        </dl>
      )}
    </li>
  );
}

const ORDERS: Array<[QueryOrder, string]> = [
  ["calls", "Calls"],
  ["mean_time", "Mean time"],
  ["total_time", "Total time"],
];

/**
 * Query insights (docs/product.md, Query insights): the statements pg_stat_statements counted for the
 * customer's roles, normalized, ordered as the API orders them (total time, mean time or calls, descending).
 * Read from the running server; read again every 30 s and on Refresh. Resetting them is a change
 * (databases:write): confirmed first, disabled for a viewer.
 */
export function Queries({ db }: { db: Pick<Db, "id" | "status"> }) {
  if (db.status !== "running") {
    return (
      <section aria-labelledby="queries-title">
        <h2 id="queries-title">Queries</h2>
        <Empty>
          <p>The database is {db.status}: query statistics are read from its server, which must be running.</p>
        </Empty>
      </section>
    );
  }
  return <QueryTable id={db.id} />;
}

function QueryTable({ id }: { id: string }) {
  const readOnly = useReadOnly();
  const [order, setOrder] = useState<QueryOrder>("total_time");
  const [confirming, setConfirming] = useState(false);
  const list = usePoll(
    () => client.queries.list(id, { order_by: order, limit: 50 }),
    { intervalMs: IDLE_MS, idleMs: IDLE_MS, active: () => false },
    [id, order],
  );
  const reset = useSubmit();
  const page = list.value;
  // 409: the server cannot answer (pg_stat_statements not preloaded, or it stopped meanwhile): the API says why and what to do.
  const conflict = list.error instanceof DbaasError && list.error.status === 409;
  return (
    <section aria-labelledby="queries-title">
      <div class="title-row">
        <h2 id="queries-title">Queries</h2>
        <div class="actions">
          <button type="button" class="secondary" onClick={list.refresh}>
            Refresh
          </button>
          <button type="button" class="danger" disabled={readOnly || reset.busy || confirming} onClick={() => setConfirming(true)}>
            Reset statistics
          </button>
        </div>
      </div>
      <p class="hint">
        The statements your roles ran, with constants as $1, $2…: how often, how long and how many rows. The slowest and most time-consuming
        come first.
      </p>
      {confirming && (
        <section class="card" aria-labelledby="queries-reset-title">
          <h3 id="queries-reset-title">Reset the query statistics?</h3>
          <p>Every statement's calls, times and rows start again from nothing, for everyone who looks at this database.</p>
          <ProblemBanner problem={reset.problem} />
          <div class="actions">
            <button
              type="button"
              class="danger"
              disabled={reset.busy || readOnly}
              onClick={async () => {
                if (await reset.submit(() => done(client.queries.reset(id)))) {
                  setConfirming(false);
                  list.refresh();
                }
              }}
            >
              Reset query statistics
            </button>
            <button
              type="button"
              class="secondary"
              onClick={() => {
                reset.clear();
                setConfirming(false);
              }}
            >
              Keep them
            </button>
          </div>
        </section>
      )}
      {list.error !== undefined &&
        (conflict ? (
          <Empty>
            <p data-testid="queries-unavailable">{problemOf(list.error).message}</p>
            <p>
              <Link href={`/databases/${id}/configuration`}>Open the configuration</Link>
            </p>
          </Empty>
        ) : (
          <ProblemBanner problem={problemOf(list.error)} />
        ))}
      {page === undefined ? (
        list.error === undefined && <p aria-busy="true">Loading…</p>
      ) : (
        <>
          <p class="hint" data-testid="queries-since">
            Counting since {page.stats_reset ? <Time iso={page.stats_reset} /> : "the server started"}.
          </p>
          {page.queries.length === 0 ? (
            <Empty>
              <p data-testid="queries-empty">
                No statements counted yet. Run queries against the database (psql, your application), then Refresh: each statement shows
                with its calls, times and rows.
              </p>
            </Empty>
          ) : (
            <div class="table-wrap">
              <table class="queries">
                <caption class="visually-hidden">Statements, by {ORDERS.find(([o]) => o === order)![1].toLowerCase()}, descending</caption>
                <thead>
                  <tr>
                    <th scope="col">Statement</th>
                    {ORDERS.map(([key, label]) => (
                      <th key={key} scope="col" class="num" aria-sort={order === key ? "descending" : "none"}>
                        <button type="button" class="sort" onClick={() => setOrder(key)}>
                          {label}
                          <span aria-hidden="true">{order === key ? " ↓" : ""}</span>
                        </button>
                      </th>
                    ))}
                    <th scope="col" class="num">
                      Rows
                    </th>
                    <th scope="col" class="num">
                      Cache hits
                    </th>
                    <th scope="col">Role, database</th>
                  </tr>
                </thead>
                <tbody>
                  {page.queries.map((q) => (
                    <tr key={`${q.query_id}-${q.user}-${q.database}`} data-query-id={q.query_id}>
                      <td class="sql">
                        <code>{q.query}</code>
                      </td>
                      <td class="num" data-column="calls">
                        {q.calls}
                      </td>
                      <td class="num" data-column="mean_time" title={`min ${duration(q.min_time_ms)}, max ${duration(q.max_time_ms)}`}>
                        {duration(q.mean_time_ms)}
                      </td>
                      <td class="num" data-column="total_time">
                        {duration(q.total_time_ms)}
                      </td>
                      <td class="num">{q.rows}</td>
                      <td class="num">{ratio(q.cache_hit_ratio)}</td>
                      <td>
                        {q.user}
                        {q.database ? ` · ${q.database}` : ""}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
        </>
      )}
    </section>
  );
}
