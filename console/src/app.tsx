import type { Schemas } from "@dbaas/client";
import { useEffect, useState } from "preact/hooks";
import { Link, Redirect, Route, Switch, useLocation } from "wouter-preact";
import { ApiKeys, Members, OrganizationSettings } from "./pages/organization.tsx";
import { Join, Login, Signup } from "./pages/auth.tsx";
import { Billing } from "./pages/billing.tsx";
import { DatabasePage } from "./pages/database.tsx";
import { Databases } from "./pages/databases.tsx";
import { client, signOut, useSession } from "./session.ts";

const NAV = [
  ["/databases", "Databases"],
  ["/members", "Members"],
  ["/api-keys", "API keys"],
  ["/billing", "Billing"],
  ["/organization", "Organization"],
] as const;

const TITLES: Record<string, string> = {
  databases: "Databases",
  members: "Members",
  "api-keys": "API keys",
  billing: "Billing",
  organization: "Organization",
  login: "Log in",
  signup: "Sign up",
  join: "Join",
};

/** Each page names itself in the tab's title, for history and screen readers. */
function useTitle(location: string) {
  useEffect(() => {
    const first = location.split("/")[1] ?? "";
    document.title = `${TITLES[first] ?? "Console"} · Managed PostgreSQL`;
  }, [location]);
}

function Shell() {
  const [location] = useLocation();
  const session = useSession()!;
  const [org, setOrg] = useState<Schemas["Organization"] | undefined>(undefined);
  useEffect(() => {
    client.organization.get().then(setOrg, () => {});
  }, []);
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <span class="brand">Managed PostgreSQL</span>
        <nav aria-label="Main">
          {NAV.map(([href, label]) => (
            <Link key={href} href={href} aria-current={location.startsWith(href) ? "page" : undefined}>
              {label}
            </Link>
          ))}
        </nav>
        <span class="who">
          {org && (
            <span class="hint" data-testid="header-org">
              {`${org.name} (${org.plan})`} ·{" "}
            </span>
          )}
          {session.email}{" "}
          <button type="button" class="secondary small" onClick={signOut}>
            Log out
          </button>
        </span>
      </header>
      <Switch>
        <Route path="/databases">
          <Databases />
        </Route>
        <Route path="/databases/:id/*?">{(params) => <DatabasePage id={params.id} />}</Route>
        <Route path="/members">
          <Members />
        </Route>
        <Route path="/api-keys">
          <ApiKeys />
        </Route>
        <Route path="/billing">
          <Billing />
        </Route>
        <Route path="/organization">
          <OrganizationSettings onChanged={setOrg} />
        </Route>
        <Route>
          <Redirect to="/databases" replace />
        </Route>
      </Switch>
    </>
  );
}

export function App() {
  const session = useSession();
  const [location] = useLocation();
  useTitle(location);
  return (
    <Switch>
      <Route path="/signup">{session ? <Redirect to="/databases" replace /> : <Signup />}</Route>
      <Route path="/join">
        <Join />
      </Route>
      <Route path="/login">{session ? <Redirect to="/databases" replace /> : <Login />}</Route>
      <Route>{session ? <Shell /> : <Redirect to="/login" replace />}</Route>
    </Switch>
  );
}
