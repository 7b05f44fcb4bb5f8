/**
 * The address plan of a netns cluster. Pure: every address is a function of a node index and a
 * pod slot, so a test (or a reader of a trace) can tell from an address where it lives.
 *
 * Only ranges docs/design.md allows ('Real-kernel safety'), and only inside the run's namespaces:
 *
 * | what                | IPv4                    | IPv6                      |
 * |---------------------|-------------------------|---------------------------|
 * | fabric router (br0) | 192.0.2.1/24            | fd00:192::1/64            |
 * | mesh CA Service pod | 192.0.2.2/24            | fd00:192::2/64            |
 * | node i (eth0)       | 192.0.2.(10+i)/24       | fd00:192::(10+i)/64       |
 * | fabric, outside leg | 203.0.113.1/24          | fd00:203::1/64            |
 * | outside (eth0)      | 203.0.113.10/24         | fd00:203::10/64           |
 * | pod CIDR of node i  | 10.244.i.0/24           | fd00:10:244:i::/64        |
 * | node i, pod gateway | 10.244.i.1/32 per veth  | fd00:10:244:i::1/128      |
 * | pod k on node i     | 10.244.i.k/32 (k >= 2)  | fd00:10:244:i::k/128      |
 *
 * IPv6 groups reuse the decimal digits of the IPv4 octet as hex text (node 12 is 192.0.2.22 and
 * fd00:192::22), which is unambiguous for every value used here and easy to read side by side.
 */

/** Largest node count: keeps node addresses inside 192.0.2.10..192.0.2.73. */
export const MAX_NODES = 64;
/** Pod slots 2..254 of a node's /24 (1 is the node-side gateway). */
export const FIRST_POD_SLOT = 2;
export const LAST_POD_SLOT = 254;

export const FABRIC_GATEWAY = { ipv4: '192.0.2.1', ipv6: 'fd00:192::1' } as const;
/** The mesh CA's pod when it runs as a container of its own on the fabric (the container world). */
export const CA_SERVICE_ADDRESS = { ipv4: '192.0.2.2', ipv6: 'fd00:192::2' } as const;
export const OUTSIDE_GATEWAY = { ipv4: '203.0.113.1', ipv6: 'fd00:203::1' } as const;
export const OUTSIDE_ADDRESS = { ipv4: '203.0.113.10', ipv6: 'fd00:203::10' } as const;
export const FABRIC_PREFIX_LEN = { ipv4: 24, ipv6: 64 } as const;

export interface DualStack {
  readonly ipv4: string;
  readonly ipv6: string;
}

/**
 * `fd00:10:244:<i>::` in canonical (RFC 5952) text, which is what the kernel and Node print:
 * node 0's prefix compresses to `fd00:10:244::`.
 */
function podV6Prefix(index: number): string {
  return index === 0 ? 'fd00:10:244::' : `fd00:10:244:${index}::`;
}

function checkNode(index: number): void {
  if (!Number.isInteger(index) || index < 0 || index >= MAX_NODES) {
    throw new Error(`node index ${index} is outside the address plan: expected an integer in 0..${MAX_NODES - 1}`);
  }
}

export function nodeAddress(index: number): DualStack {
  checkNode(index);
  const host = 10 + index;
  return { ipv4: `192.0.2.${host}`, ipv6: `fd00:192::${host}` };
}

export function podCidr(index: number): DualStack {
  checkNode(index);
  return { ipv4: `10.244.${index}.0/24`, ipv6: `${podV6Prefix(index)}/64` };
}

/** The node-side address every pod of node `index` uses as its default gateway. */
export function podGateway(index: number): DualStack {
  checkNode(index);
  return { ipv4: `10.244.${index}.1`, ipv6: `${podV6Prefix(index)}1` };
}

export function podAddress(index: number, slot: number): DualStack {
  checkNode(index);
  if (!Number.isInteger(slot) || slot < FIRST_POD_SLOT || slot > LAST_POD_SLOT) {
    throw new Error(
      `pod slot ${slot} on node ${index} is outside the address plan: expected ${FIRST_POD_SLOT}..${LAST_POD_SLOT}`,
    );
  }
  return { ipv4: `10.244.${index}.${slot}`, ipv6: `${podV6Prefix(index)}${slot}` };
}
