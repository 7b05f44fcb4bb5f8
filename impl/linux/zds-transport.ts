/**
 * The ZDS transport on Linux: AF_UNIX SOCK_SEQPACKET (one datagram = one frame), the netns
 * passed as an fd with SCM_RIGHTS, the peer's credentials from SO_PEERCRED. Sockets are
 * non-blocking and watched on Node's loop by the addon's FdWatcher (libuv poll).
 *
 * Received datagrams are checked the way upstream ztunnel does: longer than the 1024-byte
 * buffer (MSG_TRUNC) or with a cut control message (MSG_CTRUNC) is a bad frame; more than one fd,
 * or a control message other than SCM_RIGHTS, is a bad frame (all fds closed). Stricter than
 * upstream, which only logs it: an attached fd that is not a network namespace is a bad frame.
 *
 * A received netns fd is exposed as `/proc/self/fd/N`, a path the Sockets port's netns option
 * (setns on a helper thread) accepts, and kept open until the handle is closed.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { netnsId, type NetnsId } from '../api/ids.js';
import { ZDS_MAX_FRAME_BYTES } from '../api/zds/messages.js';
import { ReceiveQueue } from '../api/zds/receive-queue.js';
import type {
  ZdsAddress,
  ZdsConnection,
  ZdsListener,
  ZdsNetnsHandle,
  ZdsPeerCredentials,
  ZdsReceived,
  ZdsTransport,
} from '../host/zds-transport.js';
import { ZdsNativeError, zdsNative, type FdWatcher } from './zds-native.js';

class LinuxNetnsHandle implements ZdsNetnsHandle {
  private closed = false;
  constructor(
    private readonly fd: number,
    readonly identity: string,
  ) {}
  get netns(): NetnsId {
    return netnsId(`/proc/self/fd/${this.fd}`);
  }
  close(): void {
    if (this.closed) return;
    this.closed = true;
    fs.closeSync(this.fd);
  }
}

function closeFds(fds: readonly number[]): void {
  for (const fd of fds) {
    try {
      fs.closeSync(fd);
    } catch {
      // already closed: nothing to release
    }
  }
}

let connSeq = 0;

class LinuxZdsConnection implements ZdsConnection {
  readonly id: string;
  private readonly watcher: FdWatcher;
  private readonly inbox = new ReceiveQueue<ZdsReceived, ZdsReceived>();
  private isClosed = false;
  private sendChain: Promise<void> = Promise.resolve();
  private writable: (() => void) | undefined;

  constructor(
    private readonly fd: number,
    address: string,
    readonly peer?: ZdsPeerCredentials,
  ) {
    this.id = `${address}#${++connSeq}${peer ? `(pid ${peer.pid} uid ${peer.uid})` : ''}`;
    this.watcher = zdsNative(
      this.id,
      (a) => new a.FdWatcher(fd, (status, readable, writable) => this.onEvent(status, readable, writable)),
    );
    this.watcher.start(true, false);
  }

  send(bytes: Uint8Array, netns?: NetnsId): Promise<void> {
    const next = this.sendChain.then(() => this.sendNow(bytes, netns));
    this.sendChain = next.catch(() => undefined);
    return next;
  }

  receive(): Promise<ZdsReceived> {
    if (this.inbox.waiting)
      return Promise.reject(new Error(`ZDS ${this.id}: receive() called while another receive() is pending`));
    return this.inbox.next();
  }

  close(): void {
    // Nobody will read what is queued: release the netns fds it carries.
    for (const r of this.inbox.takeAll()) if (r.kind === 'frame') r.frame.netns?.close();
    this.end('closed locally');
  }

  private async sendNow(bytes: Uint8Array, netns?: NetnsId): Promise<void> {
    if (this.isClosed) throw new Error(`ZDS ${this.id}: send on a closed connection`);
    let passFd: number | null = null;
    if (netns !== undefined) {
      try {
        passFd = fs.openSync(netns, fs.constants.O_RDONLY);
      } catch (e) {
        throw new Error(
          `ZDS ${this.id}: cannot open network namespace ${netns} to pass it: ${(e as Error).message}; is the pod sandbox gone?`,
          { cause: e },
        );
      }
    }
    try {
      for (;;) {
        if (this.isClosed) throw new Error(`ZDS ${this.id}: connection closed while sending`);
        const sent = zdsNative(this.id, (a) => a.seqpacketSend(this.fd, bytes, passFd));
        if (sent !== null) return;
        await new Promise<void>((resolve) => {
          this.writable = resolve;
          this.watcher.start(true, true);
        });
      }
    } finally {
      if (passFd !== null) fs.closeSync(passFd); // the peer has its own copy now
    }
  }

  private onEvent(status: number, readable: boolean, writable: boolean): void {
    try {
      if (status < 0) {
        this.end(`poll failed (status ${status})`);
        return;
      }
      if (writable && this.writable) {
        const w = this.writable;
        this.writable = undefined;
        if (!this.isClosed) this.watcher.start(true, false);
        w();
      }
      if (readable) this.drain();
    } catch (e) {
      this.end(`internal error: ${(e as Error).message}`);
    }
  }

  private drain(): void {
    while (!this.isClosed) {
      let r;
      try {
        r = zdsNative(this.id, (a) => a.seqpacketRecv(this.fd, ZDS_MAX_FRAME_BYTES));
      } catch (e) {
        this.end((e as Error).message);
        return;
      }
      if (r === null) return;
      if (r.eof) {
        this.end('peer closed the connection');
        return;
      }
      this.inbox.push(this.frameOf(r.data, r.fds, r.truncated, r.ctruncated, r.otherControl));
    }
  }

  private frameOf(
    data: Buffer,
    fds: number[],
    truncated: boolean,
    ctruncated: boolean,
    otherControl: boolean,
  ): ZdsReceived {
    const bad = (reason: string): ZdsReceived => {
      closeFds(fds);
      return { kind: 'bad-frame', reason };
    };
    if (truncated) return bad(`datagram longer than ${ZDS_MAX_FRAME_BYTES} bytes (MSG_TRUNC)`);
    if (ctruncated) return bad('control data cut by the kernel (MSG_CTRUNC)');
    if (otherControl) return bad('unexpected control message (only SCM_RIGHTS is used)');
    if (fds.length > 1) return bad(`${fds.length} fds attached; at most one netns fd is allowed`);
    const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    const fd = fds[0];
    if (fd === undefined) return { kind: 'frame', frame: { bytes } };
    let info;
    try {
      info = zdsNative(this.id, (a) => a.nsInfo(fd));
    } catch (e) {
      return bad(`cannot inspect the attached fd: ${(e as Error).message}`);
    }
    if (!info.isNetns) return bad('the attached fd is not a network namespace');
    return { kind: 'frame', frame: { bytes, netns: new LinuxNetnsHandle(fd, `${info.dev}:${info.ino}`) } };
  }

  private end(reason: string): void {
    if (this.isClosed) return;
    this.isClosed = true;
    this.watcher.close();
    zdsNative(this.id, (a) => a.close(this.fd));
    const w = this.writable;
    this.writable = undefined;
    w?.();
    // Frames already received stay readable (receive() returns them first, then the end).
    this.inbox.end({ kind: 'closed', reason });
  }
}

class LinuxZdsListener implements ZdsListener {
  private readonly watcher: FdWatcher;
  private readonly backlog = new ReceiveQueue<ZdsConnection, undefined>();
  private isClosed = false;

  constructor(
    private readonly fd: number,
    readonly address: ZdsAddress,
  ) {
    this.watcher = zdsNative(address, (a) => new a.FdWatcher(fd, (status) => this.onReadable(status)));
    this.watcher.start(true, false);
  }

  accept(): Promise<ZdsConnection | undefined> {
    return this.backlog.next();
  }

  close(): Promise<void> {
    if (!this.isClosed) {
      this.isClosed = true;
      this.watcher.close();
      zdsNative(this.address, (a) => a.close(this.fd));
      try {
        fs.unlinkSync(this.address);
      } catch {
        // already gone
      }
      for (const c of this.backlog.takeAll()) c.close();
      this.backlog.end(undefined);
    }
    return Promise.resolve();
  }

  private onReadable(status: number): void {
    if (this.isClosed || status < 0) return;
    for (;;) {
      let cfd: number | null;
      try {
        cfd = zdsNative(this.address, (a) => a.seqpacketAccept(this.fd));
      } catch {
        return; // e.g. EMFILE: try again on the next readable event
      }
      if (cfd === null) return;
      let peer: ZdsPeerCredentials;
      try {
        peer = zdsNative(this.address, (a) => a.peerCred(cfd));
      } catch {
        zdsNative(this.address, (a) => a.close(cfd));
        continue;
      }
      this.backlog.push(new LinuxZdsConnection(cfd, this.address, peer));
    }
  }
}

/** Is something accepting on `path`? (to tell a live agent from a stale socket file) */
function alive(path: string): boolean {
  const fd = zdsNative(path, (a) => a.seqpacketSocket());
  try {
    zdsNative(path, (a) => a.unixConnect(fd, path));
    return true;
  } catch {
    return false;
  } finally {
    zdsNative(path, (a) => a.close(fd));
  }
}

export interface LinuxZdsTransportOptions {
  /** listen(2) backlog (default 128). */
  readonly backlog?: number;
  /** File mode of the socket path after bind (default 0o660: only owner and group may connect). */
  readonly mode?: number;
  /**
   * Owner and/or group given to the socket path after bind, so a non-root proxy may connect
   * (connect(2) on a Unix socket needs write permission on its path). Changing the group to one
   * the agent is a member of needs no capability; any other change needs CAP_CHOWN. The peer-uid
   * check (ZdsServer allowedUids) still decides who is served.
   */
  readonly owner?: { readonly uid?: number; readonly gid?: number };
}

/** Validate LinuxZdsTransportOptions up front, so a bad flag fails at start-up, not at listen. */
function checkZdsSocketOptions(o: LinuxZdsTransportOptions): void {
  if (o.mode !== undefined && (!Number.isInteger(o.mode) || o.mode < 0 || o.mode > 0o777)) {
    throw new Error(`ZDS socket mode ${o.mode} is not a permission mode (0..0o777, e.g. 0o660)`);
  }
  for (const [what, v] of [
    ['uid', o.owner?.uid],
    ['gid', o.owner?.gid],
  ] as const) {
    if (v !== undefined && (!Number.isInteger(v) || v < 0 || v > 0xfffffffe))
      throw new Error(`ZDS socket owner ${what} ${v} is not a valid id (0..4294967294)`);
  }
}

export class LinuxZdsTransport implements ZdsTransport {
  constructor(private readonly opts: LinuxZdsTransportOptions = {}) {
    checkZdsSocketOptions(opts);
  }

  /** chown then chmod the bound path (before listen(2), so no one connects in between). */
  private setAccess(address: string): void {
    const { uid, gid } = this.opts.owner ?? {};
    if (uid !== undefined || gid !== undefined) {
      try {
        fs.chownSync(address, uid ?? -1, gid ?? -1);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code ?? 'error';
        throw new Error(
          `ZDS listen on ${address}: chown to ${uid ?? '(unchanged)'}:${gid ?? '(unchanged)'} failed (${code}); ` +
            'run the agent in that group (e.g. supplementalGroups) or give it CAP_CHOWN',
          { cause: e },
        );
      }
    }
    fs.chmodSync(address, this.opts.mode ?? 0o660);
  }

  listen(address: ZdsAddress): Promise<ZdsListener> {
    try {
      if (fs.existsSync(address)) {
        if (!fs.statSync(address).isSocket())
          throw new Error(
            `ZDS listen on ${address}: the path exists and is not a socket; remove it or pick another path`,
          );
        if (alive(address))
          throw new Error(`ZDS listen on ${address}: address already in use (another node agent is accepting there)`);
        fs.unlinkSync(address); // a stale socket from a previous run
      }
      // The directory may be new (a fresh node's hostPath); 0755 so a proxy of another uid can
      // reach the socket — the socket's own owner/mode decide who may connect.
      fs.mkdirSync(path.dirname(address), { recursive: true, mode: 0o755 });
      const fd = zdsNative(address, (a) => a.seqpacketSocket());
      try {
        zdsNative(address, (a) => a.unixBind(fd, address));
        this.setAccess(address);
        zdsNative(address, (a) => a.listen(fd, this.opts.backlog ?? 128));
      } catch (e) {
        zdsNative(address, (a) => a.close(fd));
        throw e;
      }
      return Promise.resolve(new LinuxZdsListener(fd, address));
    } catch (e) {
      return Promise.reject(e instanceof Error ? e : new Error(String(e)));
    }
  }

  connect(address: ZdsAddress): Promise<ZdsConnection> {
    try {
      const fd = zdsNative(address, (a) => a.seqpacketSocket());
      try {
        zdsNative(address, (a) => a.unixConnect(fd, address));
      } catch (e) {
        zdsNative(address, (a) => a.close(fd));
        const hint =
          e instanceof ZdsNativeError && (e.code === 'ENOENT' || e.code === 'ECONNREFUSED')
            ? '; is the node agent running?'
            : '';
        throw new Error(`ZDS connect to ${address}: ${(e as Error).message}${hint}`, { cause: e });
      }
      return Promise.resolve(new LinuxZdsConnection(fd, address));
    } catch (e) {
      return Promise.reject(e instanceof Error ? e : new Error(String(e)));
    }
  }
}
