import net from "node:net";

/**
 * AGENT_PRIVATE_ADDRESS and AGENT_PRIVATE_NETWORK, checked: where servers
 * listen privately (private-address.ts) and whom pg_hba admits replication
 * from. A module of its own so that host.ts and config.ts can take it
 * without importing what depends on the Host.
 */
export const DEFAULT_PRIVATE_ADDRESS = "127.0.0.1";

/** The agent's private address and the network its region's agents reach it from (pg_hba's replication line). */
export interface PrivateAddressing {
  address: string;
  network: string;
}

/**
 * Checks AGENT_PRIVATE_ADDRESS and AGENT_PRIVATE_NETWORK. The address must be
 * an IP literal (listen_addresses, nftables DNAT, a replica's hostaddr). A
 * loopback address defaults the network to itself alone (every agent on one
 * host); any other address needs the network named, because this host cannot
 * tell which network its region's agents connect from (a pod's interface
 * shows its node's range, not the cluster's).
 */
export function privateAddressing(address: string = DEFAULT_PRIVATE_ADDRESS, network?: string): PrivateAddressing {
  const family = net.isIP(address);
  if (family === 0) throw new Error(`AGENT_PRIVATE_ADDRESS must be an IP address, got "${address}"`);
  const loopback = family === 4 ? address.startsWith("127.") : address === "::1";
  if (network === undefined || network === "") {
    if (!loopback)
      throw new Error(
        `AGENT_PRIVATE_NETWORK must be set (the CIDR the region's agents connect from) when AGENT_PRIVATE_ADDRESS is ${address}`,
      );
    return { address, network: `${address}/${family === 4 ? 32 : 128}` };
  }
  const m = /^([^/]+)\/(\d{1,3})$/.exec(network);
  const netFamily = m ? net.isIP(m[1]!) : 0;
  if (!m || netFamily === 0 || Number(m[2]) > (netFamily === 4 ? 32 : 128))
    throw new Error(`AGENT_PRIVATE_NETWORK must be a CIDR such as 10.0.0.0/8, got "${network}"`);
  if (netFamily !== family)
    throw new Error(`AGENT_PRIVATE_NETWORK ${network} is not of the address family of AGENT_PRIVATE_ADDRESS ${address}`);
  return { address, network };
}
