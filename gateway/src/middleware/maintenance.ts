import type { RequestHandler } from "express";
import { maintenance } from "../errors.ts";
import type { MaintenanceSwitch } from "../maintenance.ts";

/** While maintenance is on, every /v1 request is refused before anything else runs. */
export function refuseDuringMaintenance(sw: MaintenanceSwitch): RequestHandler {
  return (req, _res, next) => {
    const state = sw.state();
    if (state.on && (req.path === "/v1" || req.path.startsWith("/v1/"))) throw maintenance(state.retryAfter);
    next();
  };
}
