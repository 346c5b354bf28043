import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { Link } from "wouter-preact";
import { useReadOnly } from "../access.ts";
import type { Problem } from "../errors.ts";
import { localTime, utcTime } from "../format.ts";

/** An instant in the user's time zone, UTC on hover (and to assistive technology through the element's datetime). */
export function Time({ iso }: { iso: string | null | undefined }) {
  if (!iso) return <span>—</span>;
  return (
    <time dateTime={iso} title={utcTime(iso)}>
      {localTime(iso)}
    </time>
  );
}

/** A labelled control with the API's message about it right below (`details` naming this field). */
export function Field(props: { id: string; label: string; error?: string | undefined; hint?: string; children: ComponentChildren }) {
  return (
    <div class="field">
      <label for={props.id}>{props.label}</label>
      {props.children}
      {props.hint && !props.error && (
        <small class="hint" id={`${props.id}-hint`}>
          {props.hint}
        </small>
      )}
      {props.error && (
        <small class="field-error" id={`${props.id}-error`} role="alert">
          {props.error}
        </small>
      )}
    </div>
  );
}

/** The aria attributes an input needs to be tied to its error (from `Field`). */
export function described(id: string, error: string | undefined): { "aria-invalid"?: true; "aria-describedby"?: string } {
  return error ? { "aria-invalid": true, "aria-describedby": `${id}-error` } : {};
}

/** A form-level failure: the API's message; for a 402 the way to add a card. */
export function ProblemBanner({ problem }: { problem: Problem | undefined }) {
  if (!problem) return null;
  const unnamed = Object.keys(problem.fields).length === 0;
  return (
    <div class="banner error" role="alert">
      <p>{problem.message}</p>
      {problem.paymentRequired && (
        <p>
          <Link href="/billing#payment-methods">Add a card on the billing page</Link> and try again.
        </p>
      )}
      {!unnamed && <p class="hint">See the fields marked below.</p>}
    </div>
  );
}

export function CopyButton({ text, label }: { text: string; label: string }) {
  const [done, setDone] = useState(false);
  return (
    <button
      type="button"
      class="secondary small"
      onClick={async () => {
        await navigator.clipboard.writeText(text).catch(() => {});
        setDone(true);
        setTimeout(() => setDone(false), 2000);
      }}
    >
      {done ? "Copied" : `Copy ${label}`}
    </button>
  );
}

/** A secret the API returns once (a database password, an API key): shown with a copy button until dismissed, never again. */
export function OnceSecret(props: { title: string; secret: string; label: string; children?: ComponentChildren; onDismiss: () => void }) {
  return (
    <section class="banner secret" aria-labelledby="secret-title">
      <h2 id="secret-title">{props.title}</h2>
      <p>This is shown once: copy it now. It cannot be shown again.</p>
      <div class="copyable">
        <code data-testid="secret">{props.secret}</code>
        <CopyButton text={props.secret} label={props.label} />
      </div>
      {props.children}
      <button type="button" onClick={props.onDismiss}>
        I have saved it
      </button>
    </section>
  );
}

/**
 * A destructive action: enabled once the thing's name is typed. Opened from a row's button (`onCancel`
 * given), it says what the action does (`children`), takes the focus, and offers to keep the thing
 * (its button, or Escape).
 */
export function ConfirmByName(props: {
  name: string;
  action: string;
  busy?: boolean;
  onConfirm: () => void;
  onCancel?: () => void;
  /** The cancel button's words: "Keep orders-read". */
  cancelLabel?: string;
  children?: ComponentChildren;
}) {
  const [typed, setTyped] = useState("");
  const readOnly = useReadOnly();
  const input = useRef<HTMLInputElement>(null);
  const id = `confirm-${props.action.replace(/\W+/g, "-").toLowerCase()}`;
  const opened = props.onCancel !== undefined;
  useEffect(() => {
    if (opened) input.current?.focus();
  }, [opened]);
  return (
    <form
      class={opened ? "confirm card" : "confirm"}
      onSubmit={(e) => {
        e.preventDefault();
        if (typed === props.name) props.onConfirm();
      }}
      onKeyDown={(e) => {
        if (e.key === "Escape" && props.onCancel) props.onCancel();
      }}
    >
      {props.children}
      <Field id={id} label={`Type ${props.name} to ${props.action.toLowerCase()}`}>
        <input ref={input} id={id} autoComplete="off" disabled={readOnly} value={typed} onInput={(e) => setTyped(e.currentTarget.value)} />
      </Field>
      <div class="actions">
        <button type="submit" class="danger" disabled={typed !== props.name || props.busy || readOnly}>
          {props.action}
        </button>
        {props.onCancel && (
          <button type="button" class="secondary" onClick={props.onCancel}>
            {props.cancelLabel ?? `Keep ${props.name}`}
          </button>
        )}
      </div>
    </form>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <div class="empty">{children}</div>;
}

export function StatusBadge({ status }: { status: string }) {
  return <span class={`status status-${status}`}>{status}</span>;
}

/** A one-line text control in a `Field`: labelled, tied to the API's message about it. */
export function TextField(props: {
  id: string;
  label: string;
  error: string | undefined;
  hint?: string;
  type?: string;
  inputMode?: "decimal" | "text";
  autoComplete: string;
  value: string;
  onValue: (value: string) => void;
}) {
  return (
    <Field id={props.id} label={props.label} error={props.error} {...(props.hint ? { hint: props.hint } : {})}>
      <input
        id={props.id}
        type={props.type ?? "text"}
        inputMode={props.inputMode}
        autoComplete={props.autoComplete}
        value={props.value}
        onInput={(e) => props.onValue(e.currentTarget.value)}
        {...described(props.id, props.error)}
      />
    </Field>
  );
}

/**
 * A form whose submission is one API call: the API's problem above the
 * fields, the submit button below them (disabled while the call runs, or when
 * `disabled` says the action cannot be taken now). The browser's own
 * validation is off: the API's `details` are shown beside the fields they name.
 * Inside a page the member may only look at (`ReadOnly`), its fields and button are disabled.
 */
export function SubmitForm(props: {
  submission: { busy: boolean; problem: Problem | undefined };
  label: string;
  onSubmit: () => Promise<unknown>;
  disabled?: boolean;
  class?: string;
  "aria-labelledby"?: string;
  /** What comes before the problem: the form's heading, a hint. */
  intro?: ComponentChildren;
  children: ComponentChildren;
}) {
  const readOnly = useReadOnly();
  return (
    <form
      class={props.class}
      aria-labelledby={props["aria-labelledby"]}
      noValidate
      onSubmit={async (e) => {
        e.preventDefault();
        await props.onSubmit();
      }}
    >
      {props.intro}
      <ProblemBanner problem={props.submission.problem} />
      {readOnly ? (
        <fieldset class="plain" disabled>
          {props.children}
        </fieldset>
      ) : (
        props.children
      )}
      <button type="submit" disabled={props.submission.busy || props.disabled || readOnly}>
        {props.label}
      </button>
    </form>
  );
}

/** What a member who may only look is told, once per page, above the disabled controls. */
export function ReadOnlyNote() {
  if (!useReadOnly()) return null;
  return (
    <p class="banner note" data-testid="read-only">
      Your role (viewer) can look at this database but not change it: its controls are disabled. An owner or admin can give you the
      developer role on the Members page.
    </p>
  );
}
