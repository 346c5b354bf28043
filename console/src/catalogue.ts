import type { Schemas } from "@dbaas/client";
import { useEffect, useState } from "preact/hooks";
import { client } from "./session.ts";

export interface Catalogue {
  regions: Schemas["Regions"]["regions"];
  tiers: Schemas["Tiers"]["tiers"];
  versions: Schemas["Versions"]["versions"];
}

let loaded: Promise<Catalogue> | undefined;

/** Regions, tiers (with prices) and versions: read once per tab, they change only with a deploy. */
export function useCatalogue(): Catalogue | undefined {
  const [value, setValue] = useState<Catalogue | undefined>(undefined);
  useEffect(() => {
    loaded ??= Promise.all([client.catalogue.listRegions(), client.catalogue.listTiers(), client.catalogue.listVersions()]).then(
      ([r, t, v]) => ({ regions: r.regions, tiers: t.tiers, versions: v.versions }),
    );
    loaded.then(setValue, () => {
      loaded = undefined;
    });
  }, []);
  return value;
}

/** A tier as offered: its size and its price per hour and per month (730 h). */
export function tierLabel(t: Catalogue["tiers"][number]): string {
  const usd = (n: number, digits: number) => `$${n.toFixed(digits)}`;
  return `${t.name} — ${t.vcpu} vCPU, ${t.memory_gb} GB RAM, ${t.storage_gb} GB · ${usd(t.hourly_price, 3)}/h (≈ ${usd(t.hourly_price * 730, 2)}/month)`;
}
