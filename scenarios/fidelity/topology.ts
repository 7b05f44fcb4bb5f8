/**
 * The fixed topology every differential case runs on: built once per kernel worker, so a case
 * only replaces rules, policy routing, listeners and attempts.
 *
 *   client (eth0) ──veth── (eth-c) router (eth-s) ──veth── (eth0) server
 *   10.244.1.2/24            10.244.1.1 | 10.244.2.1          10.244.2.2/24 (+10.244.2.3)
 *   fd00:1::2/64             fd00:1::1  | fd00:2::1           fd00:2::2/64
 *
 * 10.96.0.10 / fd00:96::10 is a "service VIP" nobody owns: the router has no route for it, so
 * it is reachable only through DNAT.
 */
import type { Family } from '../../impl/api/ip/address.js';
import type { Lab, LabNetns, LabRoute } from '../../sim/lab/lab-file.js';

export type Node = 'client' | 'router' | 'server';
export const NODES: readonly Node[] = ['client', 'router', 'server'];

export interface FamilyAddresses {
  readonly client: string;
  readonly routerC: string;
  readonly routerS: string;
  readonly server: string;
  readonly server2: string;
  readonly vip: string;
  readonly loopback: string;
  readonly any: string;
  readonly plen: number;
}

export const ADDR: Readonly<Record<Family, FamilyAddresses>> = {
  4: {
    client: '10.244.1.2',
    routerC: '10.244.1.1',
    routerS: '10.244.2.1',
    server: '10.244.2.2',
    server2: '10.244.2.3',
    vip: '10.96.0.10',
    loopback: '127.0.0.1',
    any: '0.0.0.0',
    plen: 32,
  },
  6: {
    client: 'fd00:1::2',
    routerC: 'fd00:1::1',
    routerS: 'fd00:2::1',
    server: 'fd00:2::2',
    server2: 'fd00:2::3',
    vip: 'fd00:96::10',
    loopback: '::1',
    any: '::',
    plen: 128,
  },
};

const route = (dst: string, via: string | undefined, family: Family): LabRoute => ({
  dst,
  family,
  via,
  dev: undefined,
  table: undefined,
  type: 'unicast',
  src: undefined,
  metric: undefined,
});

function netns(name: Node, routes: LabRoute[], forwarding: boolean): LabNetns {
  return {
    name,
    forwarding: { 4: forwarding, 6: forwarding },
    links: [],
    routes,
    rules: [],
    ipsets: undefined,
    iptables: undefined,
    ip6tables: undefined,
    iptablesLine: 0,
    ip6tablesLine: 0,
  };
}

/** The topology as a lab with no rules, sockets or attempts. */
export function fixedTopology(): Lab {
  return {
    kernel: '6.1',
    namespaces: [
      netns('client', [route('default', ADDR[4].routerC, 4), route('default', ADDR[6].routerC, 6)], false),
      netns('router', [], true),
      netns('server', [route('default', ADDR[4].routerS, 4), route('default', ADDR[6].routerS, 6)], false),
    ],
    veths: [
      {
        a: {
          netns: 'client',
          name: 'eth0',
          addresses: [`${ADDR[4].client}/24`, `${ADDR[6].client}/64`],
          master: undefined,
        },
        b: {
          netns: 'router',
          name: 'eth-c',
          addresses: [`${ADDR[4].routerC}/24`, `${ADDR[6].routerC}/64`],
          master: undefined,
        },
      },
      {
        a: {
          netns: 'server',
          name: 'eth0',
          addresses: [`${ADDR[4].server}/24`, `${ADDR[4].server2}/24`, `${ADDR[6].server}/64`, `${ADDR[6].server2}/64`],
          master: undefined,
        },
        b: {
          netns: 'router',
          name: 'eth-s',
          addresses: [`${ADDR[4].routerS}/24`, `${ADDR[6].routerS}/64`],
          master: undefined,
        },
      },
    ],
    sockets: [],
    attempts: [],
  };
}
