import path from "node:path";
import { createConnectionProxy } from "./connection-proxy.ts";
import type { ConnectionProxy } from "./counters.ts";
import { createNftMeter } from "./nft-meter.ts";

/** CONNECTION_METER: who forwards and counts the published ports' traffic. */
export type ConnectionMeterMode = "nftables" | "proxy" | "auto";

export interface ConnectionMeterOptions {
  mode: ConnectionMeterMode;
  /** The agent's data directory (the proxy keeps its counters under `proxy/`). */
  dataDir: string;
  agentId: string;
  listenAddress: string;
  /** AGENT_PRIVATE_ADDRESS, where the servers listen (default 127.0.0.1): the nftables meter needs route_localnet only for a loopback one. */
  privateAddress?: string;
  /** NFT_PATH: the nft binary (default `nft` in PATH). */
  nftPath?: string;
  log?: (msg: string) => void;
}

/**
 * The agent's meter: the kernel (nftables) where it can be used, as it costs
 * next to nothing per connection; the in-process proxy otherwise (no nft, no
 * CAP_NET_ADMIN, IPv6 listen addresses) or when asked for. `nftables` fails
 * the start instead of falling back.
 */
export function createConnectionMeter(o: ConnectionMeterOptions): ConnectionProxy {
  const log = o.log ?? (() => {});
  const proxy = () => createConnectionProxy({ dir: path.join(o.dataDir, "proxy"), listenAddress: o.listenAddress, log });
  if (o.mode === "proxy") return proxy();
  try {
    const meter = createNftMeter({
      dataDir: o.dataDir,
      agentId: o.agentId,
      listenAddress: o.listenAddress,
      privateAddress: o.privateAddress,
      ...(o.nftPath && { nftPath: o.nftPath }),
      log,
    });
    log("connections are forwarded and counted by the kernel (nftables)");
    return meter;
  } catch (e) {
    if (o.mode === "nftables") throw new Error(`CONNECTION_METER=nftables, but nftables cannot be used: ${(e as Error).message}`);
    const msg = (e as Error).message;
    // Not root: nft gets CAP_NET_ADMIN from its own file only (the image's nft has it; nft.ts).
    const hint =
      process.getuid?.() !== 0 && /not permitted|EPERM/i.test(msg)
        ? "; not root: NFT_PATH must name an nft with the file capability cap_net_admin"
        : "";
    log(`nftables cannot be used (${msg}${hint}); the agent's own proxy forwards and counts connections`);
    return proxy();
  }
}
