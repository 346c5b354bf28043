import { useMemo, useState } from "preact/hooks";
import { usageBars } from "../chart-data.ts";
import { BarChart } from "../components/chart.tsx";
import { ConfirmByName, described, Empty, Field, ProblemBanner, Time, TextField, SubmitForm } from "../components/ui.tsx";
import { problemOf } from "../errors.ts";
import { money } from "../format.ts";
import { done, useSubmit } from "../form.ts";
import { usePoll } from "../poll.ts";
import { client } from "../session.ts";

const ONCE = { intervalMs: 0, idleMs: 0, active: () => false };

export function Billing() {
  const usage = usePoll(() => client.billing.getUsage(), { intervalMs: 60_000, idleMs: 60_000, active: () => false }, []);
  const bars = useMemo(() => (usage.value ? usageBars(usage.value) : []), [usage.value]);
  const currency = usage.value?.currency ?? "USD";
  return (
    <main id="main">
      <h1>Billing</h1>
      <section aria-labelledby="usage-title">
        <h2 id="usage-title">This month's usage</h2>
        {usage.error !== undefined && <ProblemBanner problem={problemOf(usage.error)} />}
        {usage.value && (
          <>
            <p>
              <Time iso={usage.value.period.start} /> to <Time iso={usage.value.period.end} />:{" "}
              <strong data-testid="usage-total">{money(usage.value.total, currency)}</strong>
            </p>
            <BarChart title="Usage by kind" bars={bars} format={(n) => money(n, currency)} />
            <div class="table-wrap">
              <table>
                <caption class="visually-hidden">Usage by kind</caption>
                <thead>
                  <tr>
                    <th scope="col">Kind</th>
                    <th scope="col">Quantity</th>
                    <th scope="col">Amount</th>
                  </tr>
                </thead>
                <tbody>
                  {bars.map((b) => (
                    <tr key={b.label}>
                      <td>{b.label}</td>
                      <td>{b.quantity}</td>
                      <td>{money(b.amount, currency)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          </>
        )}
      </section>
      <Invoices />
      <PaymentMethods />
      <Alerts currency={currency} />
    </main>
  );
}

function Invoices() {
  const list = usePoll(async () => (await client.billing.listInvoices({ per_page: 24 })).items, ONCE, []);
  const pdf = useSubmit();
  return (
    <section aria-labelledby="invoices-title">
      <h2 id="invoices-title">Invoices</h2>
      <ProblemBanner problem={pdf.problem} />
      {list.value?.length === 0 ? (
        <Empty>
          <p>No invoices yet: the first is issued after the first month with usage.</p>
        </Empty>
      ) : (
        <ul class="rows">
          {list.value?.map((i) => (
            <li key={i.id}>
              {i.period} · {money(i.amount, i.currency)} · {i.status} · issued <Time iso={i.issued_at} />
              <button
                type="button"
                class="secondary small"
                disabled={pdf.busy}
                onClick={async () => {
                  const bytes = await pdf.submit(() => client.billing.getInvoicePdf(i.id));
                  if (!bytes) return;
                  // The PDF is fetched with the token (never put in a URL) and opened from memory.
                  const url = URL.createObjectURL(new Blob([bytes as BlobPart], { type: "application/pdf" }));
                  const a = document.createElement("a");
                  a.href = url;
                  a.download = `invoice-${i.period}.pdf`;
                  a.click();
                  setTimeout(() => URL.revokeObjectURL(url), 60_000);
                }}
              >
                PDF of {i.period}
              </button>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

function PaymentMethods() {
  const list = usePoll(async () => (await client.billing.listPaymentMethods()).items, ONCE, []);
  const [token, setToken] = useState("");
  const [removing, setRemoving] = useState<string | undefined>(undefined);
  const form = useSubmit();
  const act = useSubmit();
  return (
    <section id="payment-methods" aria-labelledby="cards-title">
      <h2 id="cards-title">Payment methods</h2>
      <ProblemBanner problem={act.problem} />
      {list.value?.length === 0 ? (
        <Empty>
          <p>No card yet. The free plan's allowance needs none; larger tiers and replicas need one: add it below.</p>
        </Empty>
      ) : (
        <ul class="rows">
          {list.value?.map((m) => (
            <li key={m.id}>
              {m.brand} ending {m.last4}, expires {m.exp_month}/{m.exp_year} {m.default && <strong>(default)</strong>}
              {!m.default && (
                <button
                  type="button"
                  class="secondary small"
                  onClick={async () => {
                    if (await act.submit(() => client.billing.updatePaymentMethod(m.id, { default: true }))) list.refresh();
                  }}
                >
                  Make {m.brand} {m.last4} the default
                </button>
              )}
              {removing === m.id ? (
                <ConfirmByName
                  name={m.last4}
                  action={`Remove ${m.brand} ${m.last4}`}
                  busy={act.busy}
                  onCancel={() => setRemoving(undefined)}
                  cancelLabel="Keep the card"
                  onConfirm={async () => {
                    if (await act.submit(() => done(client.billing.deletePaymentMethod(m.id)))) {
                      setRemoving(undefined);
                      list.refresh();
                    }
                  }}
                >
                  <p>Type the card's last four digits to remove it.</p>
                </ConfirmByName>
              ) : (
                <button type="button" class="danger small" onClick={() => setRemoving(m.id)}>
                  Remove {m.brand} {m.last4}
                </button>
              )}
            </li>
          ))}
        </ul>
      )}
      <SubmitForm
        submission={form}
        label="Add card"
        class="card"
        onSubmit={async () => {
          if (await form.submit(() => client.billing.addPaymentMethod({ type: "card", token }))) {
            setToken("");
            list.refresh();
          }
        }}
      >
        <Field
          id="card-token"
          label="Card token"
          error={form.fieldError("token")}
          hint="The payment processor's token for the card (tok_visa on a local stack); the card number never reaches us."
        >
          <input
            id="card-token"
            autoComplete="off"
            value={token}
            onInput={(e) => setToken(e.currentTarget.value)}
            {...described("card-token", form.fieldError("token"))}
          />
        </Field>
      </SubmitForm>
    </section>
  );
}

function Alerts({ currency }: { currency: string }) {
  const list = usePoll(async () => (await client.billing.listAlerts()).items, ONCE, []);
  const [threshold, setThreshold] = useState("");
  const [deleting, setDeleting] = useState<string | undefined>(undefined);
  const form = useSubmit();
  const act = useSubmit();
  return (
    <section aria-labelledby="alerts-title">
      <h2 id="alerts-title">Spending alerts</h2>
      <ProblemBanner problem={act.problem} />
      {list.value?.length === 0 ? (
        <Empty>
          <p>No alerts. Add a threshold below to be mailed when the month's total reaches it.</p>
        </Empty>
      ) : (
        <ul class="rows">
          {list.value?.map((a) => (
            <li key={a.id}>
              At {money(a.threshold, a.currency)} by {a.channels.join(", ")}
              {deleting === a.id ? (
                <ConfirmByName
                  name={money(a.threshold, a.currency)}
                  action={`Delete alert at ${money(a.threshold, a.currency)}`}
                  busy={act.busy}
                  onCancel={() => setDeleting(undefined)}
                  cancelLabel="Keep the alert"
                  onConfirm={async () => {
                    if (await act.submit(() => done(client.billing.deleteAlert(a.id)))) {
                      setDeleting(undefined);
                      list.refresh();
                    }
                  }}
                >
                  <p>No mail is sent any more when the month's total reaches it.</p>
                </ConfirmByName>
              ) : (
                <button type="button" class="danger small" onClick={() => setDeleting(a.id)}>
                  Delete alert at {money(a.threshold, a.currency)}
                </button>
              )}
            </li>
          ))}
        </ul>
      )}
      <SubmitForm
        submission={form}
        label="Add alert"
        class="card"
        onSubmit={async () => {
          if (await form.submit(() => client.billing.createAlert({ threshold: Number(threshold), currency, channels: ["email"] }))) {
            setThreshold("");
            list.refresh();
          }
        }}
      >
        <TextField
          id="alert-threshold"
          label={`Threshold (${currency})`}
          error={form.fieldError("threshold")}
          inputMode="decimal"
          autoComplete="off"
          value={threshold}
          onValue={setThreshold}
        />
      </SubmitForm>
    </section>
  );
}
