import { useState } from "preact/hooks";
import { Link, useLocation, useSearch } from "wouter-preact";
import { described, Field, TextField, SubmitForm } from "../components/ui.tsx";
import { useSubmit } from "../form.ts";
import { client, signIn } from "../session.ts";

function AuthFrame({ title, children }: { title: string; children: preact.ComponentChildren }) {
  return (
    <main id="main" class="auth">
      <h1>{title}</h1>
      {children}
    </main>
  );
}

export function Login() {
  const [, navigate] = useLocation();
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const form = useSubmit();
  return (
    <AuthFrame title="Log in">
      <SubmitForm
        submission={form}
        label="Log in"
        onSubmit={async () => {
          const token = await form.submit(() => client.auth.login({ email, password }));
          if (token) {
            signIn({ token: token.access_token, email, expiresAt: token.expires_at });
            navigate("/databases");
          }
        }}
      >
        <TextField
          id="email"
          label="E-mail"
          error={form.fieldError("email")}
          type="email"
          autoComplete="username"
          value={email}
          onValue={setEmail}
        />
        <TextField
          id="password"
          label="Password"
          error={form.fieldError("password")}
          type="password"
          autoComplete="current-password"
          value={password}
          onValue={setPassword}
        />
      </SubmitForm>
      <p>
        New here? <Link href="/signup">Create an account</Link>
      </p>
    </AuthFrame>
  );
}

export function Signup() {
  const [, navigate] = useLocation();
  const [v, setV] = useState({ name: "", email: "", password: "", organization_name: "" });
  const form = useSubmit();
  const input = (field: keyof typeof v, label: string, type = "text", autoComplete = "off") => (
    <Field id={field} label={label} error={form.fieldError(field)}>
      <input
        id={field}
        type={type}
        autoComplete={autoComplete}
        value={v[field]}
        onInput={(e) => setV({ ...v, [field]: e.currentTarget.value })}
        {...described(field, form.fieldError(field))}
      />
    </Field>
  );
  return (
    <AuthFrame title="Create an account">
      <SubmitForm
        submission={form}
        label="Create account"
        onSubmit={async () => {
          const created = await form.submit(() => client.auth.signup(v));
          if (created) {
            signIn({ token: created.access_token, email: created.user.email, expiresAt: created.expires_at });
            navigate("/databases");
          }
        }}
      >
        {input("name", "Your name", "text", "name")}
        {input("email", "E-mail", "email", "username")}
        {input("password", "Password", "password", "new-password")}
        {input("organization_name", "Organization name", "text", "organization")}
      </SubmitForm>
      <p>
        Have an account? <Link href="/login">Log in</Link>
      </p>
    </AuthFrame>
  );
}

/**
 * Accepting an invitation, where the invitation mail's link lands (`/join?token=…`, identity's link; the
 * gateway redirects the older `/invitations/accept?token=…` here): the one-time token from the address,
 * a name and password for a new account (or the existing account's password). Joined, the member is signed
 * in and the token leaves the address bar.
 */
export function Join() {
  const [, navigate] = useLocation();
  const search = useSearch();
  const [v, setV] = useState({ token: new URLSearchParams(search).get("token") ?? "", name: "", password: "" });
  const form = useSubmit();
  return (
    <AuthFrame title="Join an organization">
      <p>
        You were invited to join an organization. New here: choose your name and a password. Already have an account under the invited
        e-mail address: enter its password.
      </p>
      <SubmitForm
        submission={form}
        label="Join"
        onSubmit={async () => {
          const joined = await form.submit(() =>
            client.auth.acceptInvitation({ token: v.token, password: v.password, ...(v.name ? { name: v.name } : {}) }),
          );
          if (joined) {
            signIn({ token: joined.access_token, email: joined.member.user.email, expiresAt: joined.expires_at });
            // The invitation token leaves the address bar with this navigation.
            navigate("/databases", { replace: true });
          }
        }}
      >
        <Field id="token" label="Invitation token" error={form.fieldError("token")} hint="From the invitation mail's link">
          <input
            id="token"
            autoComplete="off"
            value={v.token}
            onInput={(e) => setV({ ...v, token: e.currentTarget.value })}
            {...described("token", form.fieldError("token"))}
          />
        </Field>
        <Field id="name" label="Your name (new accounts)" error={form.fieldError("name")}>
          <input
            id="name"
            autoComplete="name"
            value={v.name}
            onInput={(e) => setV({ ...v, name: e.currentTarget.value })}
            {...described("name", form.fieldError("name"))}
          />
        </Field>
        <Field id="password" label="Password (new, or your account's)" error={form.fieldError("password")}>
          <input
            id="password"
            type="password"
            autoComplete="new-password"
            value={v.password}
            onInput={(e) => setV({ ...v, password: e.currentTarget.value })}
            {...described("password", form.fieldError("password"))}
          />
        </Field>
      </SubmitForm>
    </AuthFrame>
  );
}
