/**
 * The sim `bridge` plugin (after containernetworking/plugins' bridge): a bridge in the node's
 * host netns (default cni0), a veth pair with CNI_IFNAME in the pod netns and a host end
 * enslaved to the bridge, addresses from the delegated IPAM plugin, the gateway address on the
 * bridge (isGateway), a default route in the pod (isDefaultGateway), IPAM routes.
 *
 * Deterministic: the host veth name and MACs are hashes of (container id, ifname), where the
 * real plugin picks random ones. Not modelled: ipMasq (no masquerade rule is written), hairpin,
 * MTU, VLANs, promiscuous mode.
 */
import {
  CNI_ERR_INTERNAL,
  CniError,
  cidrAddress,
  cniEnv,
  parseErrorJson,
  parseResult,
  type CniEnv,
  type CniExecOutput,
  type CniInterface,
  type CniNetConf,
  type CniPlugin,
  type CniResult,
  type CniRoute,
} from '../../impl/api/cni.js';
import type { SimKernel } from '../kernel/kernel.js';
import { parseIp } from '../../impl/api/ip/address.js';
import { parsePrefix, type IpPrefix } from '../../impl/api/ip/prefix.js';
import type { CniPluginExec } from './chain.js';
import { skelPlugin, type CniInvocationMode } from './skel.js';

/** Where sim pod namespaces appear as paths (CNI_NETNS). */
const SIM_NETNS_DIR = '/var/run/netns/';

export function simNetnsPath(name: string): string {
  return SIM_NETNS_DIR + name;
}

/** The sim netns name behind a CNI_NETNS path, or undefined when the path is not one. */
function simNetnsName(path: string): string | undefined {
  for (const dir of [SIM_NETNS_DIR, '/run/netns/'])
    if (path.startsWith(dir) && path.length > dir.length) return path.slice(dir.length);
  return undefined;
}

/** FNV-1a, 32 bits: a stable short hash for names and MACs. */
export function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

export function simMac(seed: string): string {
  const a = fnv1a(seed);
  const b = fnv1a(`${seed}#`);
  // One flat string from char codes: no byte array or per-byte strings (three MACs per pod ADD),
  // and not a tree of concatenations, which the cached result would keep alive.
  return String.fromCharCode(
    48,
    97,
    58, // "0a:"
    hexDigit(a >>> 28),
    hexDigit(a >>> 24),
    58,
    hexDigit(a >>> 20),
    hexDigit(a >>> 16),
    58,
    hexDigit(a >>> 12),
    hexDigit(a >>> 8),
    58,
    hexDigit(a >>> 4),
    hexDigit(a),
    58,
    hexDigit(b >>> 4),
    hexDigit(b),
  );
}

/** The char code of the low nibble of `x` as a lowercase hex digit. */
function hexDigit(x: number): number {
  const n = x & 0xf;
  return n < 10 ? 48 + n : 87 + n;
}

interface SimPluginContext {
  readonly kernel: SimKernel;
  /** The netns the runtime runs plugins in (the node's host netns). */
  readonly hostNetns: string;
  /** Delegation to other plugins (IPAM), by type, the way the delegating plugin was invoked. */
  readonly delegate: CniPluginExec;
}

interface BridgeConf extends CniNetConf {
  bridge?: string;
  isGateway?: boolean;
  isDefaultGateway?: boolean;
}

function requireNetns(kernel: SimKernel, env: CniEnv): string {
  const path = env.netns!;
  const name = simNetnsName(path);
  if (name === undefined || !kernel.hasNetns(name)) {
    throw new CniError(
      CNI_ERR_INTERNAL,
      `failed to open netns ${JSON.stringify(path)}: failed to Statfs ${JSON.stringify(path)}: no such file or directory`,
    );
  }
  return name;
}

/** Run the IPAM plugin the way this plugin was run (in process only when invoked in process). */
async function delegate(
  ctx: SimPluginContext,
  mode: CniInvocationMode,
  type: string,
  command: 'ADD' | 'DEL' | 'CHECK',
  env: CniEnv,
  conf: CniNetConf,
): Promise<CniResult | undefined> {
  const denv = cniEnv(
    env.netns
      ? {
          command,
          containerId: env.containerId!,
          netns: env.netns,
          ifname: env.ifname!,
          args: env.args,
          path: env.path,
        }
      : { command, containerId: env.containerId!, ifname: env.ifname!, args: env.args, path: env.path },
  );
  if (mode === 'in-process' && ctx.delegate.call) {
    const o = await ctx.delegate.call(type, { env: denv, conf });
    if (o.kind === 'value')
      return command === 'ADD' ? parseResult(o.value, `result of delegated plugin ${type}`) : undefined;
    if (o.kind === 'empty')
      return command === 'ADD' ? parseResult('', `result of delegated plugin ${type}`) : undefined;
    return decodeDelegated(type, command, o.output);
  }
  return decodeDelegated(type, command, await ctx.delegate.exec(type, { env: denv, stdin: JSON.stringify(conf) }));
}

function decodeDelegated(type: string, command: 'ADD' | 'DEL' | 'CHECK', out: CniExecOutput): CniResult | undefined {
  if (out.exitCode !== 0) {
    const ej = parseErrorJson(out.stdout);
    throw new CniError(ej?.code ?? CNI_ERR_INTERNAL, ej?.msg ?? `delegated plugin ${type} failed`, ej?.details);
  }
  return command === 'ADD' ? parseResult(out.stdout, `result of delegated plugin ${type}`) : undefined;
}

function samePrefix(a: IpPrefix, b: IpPrefix): boolean {
  return a.len === b.len && a.addr.family === b.addr.family && a.addr.value === b.addr.value;
}

function hostVethName(ctx: SimPluginContext, containerId: string, ifname: string): string {
  const host = ctx.kernel.netns(ctx.hostNetns);
  for (let salt = 0; ; salt++) {
    const name = `veth${fnv1a(`${containerId}/${ifname}/${salt}`).toString(16).padStart(8, '0')}`;
    if (!host.links.has(name)) return name;
  }
}

export function bridgePlugin(ctx: SimPluginContext): CniPlugin {
  return skelPlugin({
    async add(env, raw, mode): Promise<CniResult> {
      const conf = raw as BridgeConf;
      const br = conf.bridge ?? 'cni0';
      const isDefaultGw = conf.isDefaultGateway === true;
      const isGw = conf.isGateway === true || isDefaultGw;
      if (!conf.ipam) throw new CniError(CNI_ERR_INTERNAL, `network ${conf.name}: bridge needs an ipam section`);
      const podNs = requireNetns(ctx.kernel, env);
      const ifname = env.ifname!;
      const k = ctx.kernel;
      const host = k.netns(ctx.hostNetns);
      if (k.netns(podNs).links.has(ifname))
        throw new CniError(CNI_ERR_INTERNAL, `container veth name provided (${ifname}) already exists`);
      if (!host.links.has(br)) k.addBridge(ctx.hostNetns, br);
      else if (host.link(br).kind !== 'bridge')
        throw new CniError(CNI_ERR_INTERNAL, `${br} already exists in the host netns but is not a bridge`);
      // LinkSetUp of a bridge already up changes nothing (no route is re-added): skipped.
      if (!host.link(br).up) k.setLink(ctx.hostNetns, br, true);

      const ipamResult = (await delegate(ctx, mode, conf.ipam.type, 'ADD', env, conf))!;
      const hostVeth = hostVethName(ctx, env.containerId!, ifname);
      try {
        if (!ipamResult.ips || ipamResult.ips.length === 0)
          throw new CniError(CNI_ERR_INTERNAL, 'IPAM plugin returned missing IP config');
        k.addVeth(podNs, ifname, ctx.hostNetns, hostVeth);
        k.setMaster(ctx.hostNetns, hostVeth, br);
        k.setLink(ctx.hostNetns, hostVeth, true);
        k.setLink(podNs, ifname, true);
        const routes: CniRoute[] = [...(ipamResult.routes ?? [])];
        for (const ip of ipamResult.ips) {
          k.addAddress(podNs, ifname, ip.address);
          const fam = parseIp(cidrAddress(ip.address)).family;
          if (isGw && ip.gateway) {
            const len = ip.address.slice(ip.address.lastIndexOf('/') + 1);
            const gw = parseIp(ip.gateway);
            const has = host.link(br).addresses.some((a) => a.addr.family === gw.family && a.addr.value === gw.value);
            if (!has) k.addAddress(ctx.hostNetns, br, `${ip.gateway}/${len}`);
            k.setForwarding(ctx.hostNetns, fam, true);
          }
          if (isDefaultGw && ip.gateway) routes.push({ dst: fam === 4 ? '0.0.0.0/0' : '::/0', gw: ip.gateway });
        }
        // One route per destination prefix (by value: texts may differ in host bits).
        // Each prefix is parsed once (the first of equal prefixes is kept, in order).
        const unique: CniRoute[] = [];
        const seen: IpPrefix[] = [];
        for (const r of routes) {
          const p = parsePrefix(r.dst);
          if (seen.some((x) => samePrefix(x, p))) continue;
          seen.push(p);
          unique.push(r);
        }
        for (let i = 0; i < unique.length; i++) {
          const r = unique[i]!;
          const fam = seen[i]!.addr.family;
          const gw = r.gw ?? ipamResult.ips.find((ip) => parseIp(cidrAddress(ip.address)).family === fam)?.gateway;
          k.addRoute(podNs, gw ? { dst: r.dst, dev: ifname, via: gw } : { dst: r.dst, dev: ifname });
        }
        const interfaces: CniInterface[] = [
          { name: br, mac: simMac(`${ctx.hostNetns}/${br}`) },
          { name: hostVeth, mac: simMac(`${env.containerId}/${ifname}/host`) },
          { name: ifname, mac: simMac(`${env.containerId}/${ifname}`), sandbox: env.netns! },
        ];
        return {
          cniVersion: conf.cniVersion,
          interfaces,
          ips: ipamResult.ips.map((ip) => ({ ...ip, interface: 2 })),
          routes: unique,
          dns: ipamResult.dns ?? {},
        };
      } catch (e) {
        // Undo: release the addresses (spec: a parent whose delegated ADD succeeded runs DEL on
        // failure) and remove the veth if it was made.
        await delegate(ctx, mode, conf.ipam.type, 'DEL', env, conf).catch(() => undefined);
        if (host.links.has(hostVeth)) k.removeLink(host, hostVeth);
        throw e;
      }
    },

    async del(env, raw, mode): Promise<void> {
      const conf = raw as BridgeConf;
      // IPAM first: addresses are released even when the netns is already gone.
      if (conf.ipam) await delegate(ctx, mode, conf.ipam.type, 'DEL', env, conf);
      const name = env.netns ? simNetnsName(env.netns) : undefined;
      if (name === undefined || !ctx.kernel.hasNetns(name)) return;
      const ns = ctx.kernel.netns(name);
      if (ns.links.has(env.ifname!)) ctx.kernel.removeLink(ns, env.ifname!);
    },

    async check(env, raw, mode): Promise<void> {
      const conf = raw as BridgeConf;
      const br = conf.bridge ?? 'cni0';
      const podNs = ctx.kernel.netns(requireNetns(ctx.kernel, env));
      const host = ctx.kernel.netns(ctx.hostNetns);
      if (!host.links.has(br)) throw new CniError(CNI_ERR_INTERNAL, `bridge ${br} is missing in the host netns`);
      const dev = podNs.links.get(env.ifname!);
      if (!dev || dev.kind !== 'veth' || !dev.peer)
        throw new CniError(CNI_ERR_INTERNAL, `container interface ${env.ifname} is missing or not a veth`);
      if (dev.peer.master?.name !== br)
        throw new CniError(CNI_ERR_INTERNAL, `host end ${dev.peer.name} of ${env.ifname} is not attached to ${br}`);
      const prev = conf.prevResult;
      if (!prev) throw new CniError(CNI_ERR_INTERNAL, 'CHECK needs prevResult');
      for (const ip of prev.ips ?? []) {
        const iface = ip.interface !== undefined ? prev.interfaces?.[ip.interface] : undefined;
        if (iface && iface.sandbox === undefined) continue; // a host-side address
        const a = parseIp(cidrAddress(ip.address));
        if (!dev.addresses.some((x) => x.addr.family === a.family && x.addr.value === a.value)) {
          throw new CniError(
            CNI_ERR_INTERNAL,
            `address ${ip.address} from the result is not on ${env.ifname} in ${env.netns}`,
          );
        }
      }
      if (conf.ipam) await delegate(ctx, mode, conf.ipam.type, 'CHECK', env, conf);
    },
  });
}

/** The sim `loopback` plugin: brings lo up in the pod netns (and down on DEL). */
export function loopbackPlugin(ctx: Pick<SimPluginContext, 'kernel'>): CniPlugin {
  return skelPlugin({
    async add(env, conf): Promise<CniResult> {
      const name = requireNetns(ctx.kernel, env);
      ctx.kernel.setLink(name, 'lo', true);
      if (conf.prevResult) return conf.prevResult;
      return {
        cniVersion: conf.cniVersion,
        interfaces: [{ name: 'lo', mac: '00:00:00:00:00:00', sandbox: env.netns! }],
        ips: [
          { address: '127.0.0.1/8', interface: 0 },
          { address: '::1/128', interface: 0 },
        ],
      };
    },
    async del(env): Promise<void> {
      const name = env.netns ? simNetnsName(env.netns) : undefined;
      if (name !== undefined && ctx.kernel.hasNetns(name)) ctx.kernel.setLink(name, 'lo', false);
    },
    async check(env): Promise<void> {
      const name = env.netns ? simNetnsName(env.netns) : undefined;
      if (name === undefined || !ctx.kernel.hasNetns(name) || !ctx.kernel.netns(name).link('lo').up) {
        throw new CniError(CNI_ERR_INTERNAL, `loopback interface is down or missing in ${env.netns ?? '(no netns)'}`);
      }
    },
  });
}
