/**
 * Containers in the sim: a process identity (uid, gid, effective capabilities) placed in a
 * network namespace, which opens sockets there through the sim kernel. The identity comes from
 * the pod's securityContext the way containerd applies it.
 */
import type { Wire } from '../../impl/host/kube.js';
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import type { SimKernel, ConnectResult, UdpResult } from '../kernel/kernel.js';
import { credentials, type Capability, type Credentials } from '../kernel/process.js';
import type { SimSocket } from '../kernel/socket.js';
import { parseIp, type Family } from '../../impl/api/ip/address.js';

type Pod = Wire<V1Pod>;
type Container = Wire<V1Container>;

/** Capabilities the sim models, all of them (privileged containers get these). */
const MODELLED_CAPS: readonly Capability[] = ['NET_ADMIN', 'NET_RAW', 'NET_BIND_SERVICE'];
/** containerd's default set, narrowed to the modelled capabilities. */
const RUNTIME_DEFAULT_CAPS: readonly Capability[] = ['NET_RAW', 'NET_BIND_SERVICE'];

function capName(raw: string): Capability | undefined {
  const n = raw.toUpperCase().replace(/^CAP_/, '');
  return (MODELLED_CAPS as readonly string[]).includes(n) ? (n as Capability) : undefined;
}

/**
 * The USER of a sim image: its tag says `user-<uid>` (e.g. `sim/app:user-1337`), as an image built
 * with `USER <uid>` (group 0, as Docker gives a numeric USER without one); any other image runs as
 * root, as most images do.
 */
export function imageUser(image: string | undefined): { uid: number; gid: number } {
  const m = /:user-(\d+)$/.exec(image ?? '');
  return { uid: m ? Number(m[1]) : 0, gid: 0 };
}

/**
 * The effective identity of a container's process: runAsUser/runAsGroup (container over pod,
 * else the image's USER, imageUser), capabilities = runtime default, minus drop (ALL clears), plus add; privileged
 * gives all. A non-root uid ends up with no effective capabilities: Kubernetes sets no ambient
 * capabilities, so exec as a non-root user drops them (kubernetes/kubernetes#56374).
 */
export function containerCredentials(pod: Pod, c: Container): Credentials {
  const psc = pod.spec?.securityContext ?? {};
  const csc = c.securityContext ?? {};
  const uid = csc.runAsUser ?? psc.runAsUser ?? imageUser(c.image).uid;
  const gid = csc.runAsGroup ?? psc.runAsGroup ?? imageUser(c.image).gid;
  let caps = new Set<Capability>(RUNTIME_DEFAULT_CAPS);
  if (csc.privileged) caps = new Set(MODELLED_CAPS);
  else {
    for (const d of csc.capabilities?.drop ?? []) {
      if (d.toUpperCase() === 'ALL') caps.clear();
      else {
        const n = capName(d);
        if (n) caps.delete(n);
      }
    }
    for (const a of csc.capabilities?.add ?? []) {
      const n = capName(a);
      if (n) caps.add(n);
    }
  }
  if (uid !== 0) caps.clear();
  return credentials(uid, gid, caps);
}

interface ContainerRef {
  readonly namespace: string;
  readonly pod: string;
  readonly uid: string;
  readonly container: string;
}

/** A running container: sockets it opens live in its netns and carry its credentials. */
export class SimContainer {
  private readonly sockets: SimSocket[] = [];
  private stopped = false;

  constructor(
    private readonly kernel: SimKernel,
    readonly ref: ContainerRef,
    readonly netns: string,
    readonly creds: Credentials,
    /** Declared TCP containerPorts, listened on at start. */
    readonly ports: readonly number[],
  ) {}

  get running(): boolean {
    return !this.stopped && this.kernel.hasNetns(this.netns);
  }

  socket(proto: 'tcp' | 'udp', family: Family): SimSocket {
    if (this.stopped) throw new Error(`container ${this.describe()} is stopped`);
    const s = this.kernel.socket(
      this.netns,
      proto,
      family,
      this.creds,
      `${this.ref.namespace}/${this.ref.pod}/${this.ref.container}`,
    );
    this.sockets.push(s);
    return s;
  }

  /** socket, bind(address or any, port), listen. */
  listenTcp(port: number, family: Family = 4, address?: string): SimSocket {
    const s = this.socket('tcp', family);
    if (family === 6) this.kernel.setsockopt(s, 'IPV6_V6ONLY', true);
    this.kernel.bind(s, address ?? (family === 4 ? '0.0.0.0' : '::'), port);
    this.kernel.listen(s);
    return s;
  }

  connectTcp(dst: string, port: number): ConnectResult {
    return this.kernel.connect(this.socket('tcp', parseIp(dst).family), dst, port);
  }

  sendUdp(dst: string, port: number, payload: string): UdpResult {
    return this.kernel.sendUdp(this.socket('udp', parseIp(dst).family), dst, port, payload);
  }

  /** Start the app: listen on every declared TCP port (IPv6 too when the pod has an IPv6 address). */
  start(families: readonly Family[]): void {
    for (const p of this.ports) for (const f of families) this.listenTcp(p, f);
  }

  /** The process exits: its sockets close. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    for (const s of this.sockets) if (s.state !== 'closed' && this.kernel.hasNetns(s.netns)) this.kernel.close(s);
    this.sockets.length = 0;
  }

  openSockets(): readonly SimSocket[] {
    return this.sockets.filter((s) => s.state !== 'closed');
  }

  describe(): string {
    return `${this.ref.namespace}/${this.ref.pod}/${this.ref.container} (uid ${this.creds.uid}, caps ${[...this.creds.caps].join(',') || 'none'}) in ${this.netns}`;
  }
}

/** Declared TCP container ports of a container spec. */
export function declaredTcpPorts(c: Container): number[] {
  return (c.ports ?? []).filter((p) => (p.protocol ?? 'TCP') === 'TCP').map((p) => p.containerPort);
}
