/**
 * A one-node topology with two pods on a bridge, the upstream in-pod ruleset in pod-a, and the
 * node proxy's listeners — the ground for the end-to-end in-pod ruleset tests.
 *
 *   pod-a (10.244.1.5, enrolled)  --eth0/veth-a--\
 *                                                 cni0 (10.244.1.1) in node
 *   pod-b (10.244.1.6, plain)     --eth0/veth-b--/
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { SimKernel } from '../../../sim/kernel/kernel.js';
import { credentials } from '../../../sim/kernel/process.js';
import type { SimSocket } from '../../../sim/kernel/socket.js';

export const repo = path.resolve(import.meta.dirname, '..', '..', '..');
const INPOD_V4 = fs.readFileSync(path.join(repo, 'fixtures/rules/upstream-inpod-v4.rules'), 'utf8');
export const HOSTPROBE_V4 = fs.readFileSync(path.join(repo, 'fixtures/rules/upstream-hostprobe-v4.rules'), 'utf8');

export const APP = credentials(1000, 1000);
export const PROXY = credentials(1337, 1337, ['NET_ADMIN', 'NET_RAW']);
export const HOST = credentials(0, 0, ['NET_ADMIN', 'NET_RAW']);

interface InpodLab {
  k: SimKernel;
  proxy: { outbound: SimSocket; inbound: SimSocket; hbone: SimSocket };
  appA: SimSocket;
  appB: SimSocket;
}

function addPod(k: SimKernel, name: string, ip: string, hostDev: string): void {
  k.addNetns(name);
  k.setLink(name, 'lo', true);
  k.addVeth(name, 'eth0', 'node', hostDev);
  k.setMaster('node', hostDev, 'cni0');
  k.addAddress(name, 'eth0', `${ip}/24`);
  k.setLink(name, 'eth0', true);
  k.setLink('node', hostDev, true);
  k.addRoute(name, { dst: 'default', family: 4, via: '10.244.1.1' });
}

export function listen(
  k: SimKernel,
  ns: string,
  port: number,
  who = APP,
  label = 'app',
  opts: { mark?: number; transparent?: boolean; addr?: string } = {},
): SimSocket {
  const s = k.socket(ns, 'tcp', 4, who, label);
  if (opts.mark !== undefined) k.setsockopt(s, 'SO_MARK', opts.mark);
  if (opts.transparent) k.setsockopt(s, 'IP_TRANSPARENT', true);
  k.bind(s, opts.addr ?? '0.0.0.0', port);
  k.listen(s);
  return s;
}

export function buildInpodLab(opts: { rules?: string; ipRule?: boolean; kernelVersion?: string } = {}): InpodLab {
  const k = new SimKernel({ kernelVersion: opts.kernelVersion ?? '6.1' });
  k.addNetns('node');
  k.setLink('node', 'lo', true);
  k.addBridge('node', 'cni0');
  k.addAddress('node', 'cni0', '10.244.1.1/24');
  k.setLink('node', 'cni0', true);
  k.setForwarding('node', 4, true);
  addPod(k, 'pod-a', '10.244.1.5', 'veth-a');
  addPod(k, 'pod-b', '10.244.1.6', 'veth-b');

  k.iptablesRestore('pod-a', 4, opts.rules ?? INPOD_V4);
  if (opts.ipRule ?? true) {
    k.addRule('pod-a', { family: 4, priority: 32764, fwmark: 0x111, mask: 0xfff, table: 100 });
    k.addRoute('pod-a', { dst: '0.0.0.0/0', type: 'local', dev: 'lo', table: 100 });
  }
  const mark = 0x539;
  const proxy = {
    outbound: listen(k, 'pod-a', 15001, PROXY, 'proxy outbound', { mark }),
    inbound: listen(k, 'pod-a', 15006, PROXY, 'proxy inbound', { mark }),
    hbone: listen(k, 'pod-a', 15008, PROXY, 'proxy hbone', { mark }),
  };
  const appA = listen(k, 'pod-a', 8080, APP, 'app-a');
  const appB = listen(k, 'pod-b', 8080, APP, 'app-b');
  return { k, proxy, appA, appB };
}
