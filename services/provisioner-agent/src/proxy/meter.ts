import path from "node:path";
import { createConnectionProxy, proxySourceAddress } from "./connection-proxy.ts";
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
  /** AGENT_PRIVATE_NETWORK and the uids whose own connections may reach private ports (nft-meter.ts's guard). */
  privateNetwork?: string;
  localUids?: readonly (number | readonly [number, number])[];
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
  const sourceAddress = proxySourceAddress(o.dataDir, o.agentId, o.privateAddress ?? "127.0.0.1");
  // Without nftables the servers guard their private ports themselves: pg_hba admits customers from the proxy's address only.
  const guard = `the servers admit customers only from the proxy's address ${sourceAddress} (pg_hba), a weaker guard of their private ports than nftables': any local process, another tenant's server included, may bind that address and reach a server's SCRAM prompt past the meter and its trusted sources (only the kernel tells who connects; /healthz says private_ports_guard: source-address)`;
  const proxy = () => createConnectionProxy({ dir: path.join(o.dataDir, "proxy"), listenAddress: o.listenAddress, sourceAddress, log });
  if (o.mode === "proxy") {
    log(`CONNECTION_METER=proxy: ${guard}`);
    return proxy();
  }
  try {
    const meter = createNftMeter({
      dataDir: o.dataDir,
      agentId: o.agentId,
      listenAddress: o.listenAddress,
      privateAddress: o.privateAddress,
      ...(o.nftPath && { nftPath: o.nftPath }),
      ...(o.privateNetwork && { privateNetwork: o.privateNetwork }),
      ...(o.localUids && { localUids: o.localUids }),
      log,
    });
    log("connections are forwarded and counted by the kernel (nftables)");
    log("private ports take on this host, besides those, only the agent's uid and, per port, its server's and its replicas' (nftables)");
    return meter;
  } catch (e) {
    if (o.mode === "nftables") throw new Error(`CONNECTION_METER=nftables, but nftables cannot be used: ${(e as Error).message}`);
    const msg = (e as Error).message;
    // Not root: nft gets CAP_NET_ADMIN from its own file only (the image's nft has it; nft.ts).
    const hint =
      process.getuid?.() !== 0 && /not permitted|EPERM/i.test(msg)
        ? "; not root: NFT_PATH must name an nft with the file capability cap_net_admin"
        : "";
    log(`nftables cannot be used (${msg}${hint}); the agent's own proxy forwards and counts connections, and ${guard}`);
    return proxy();
  }
}
