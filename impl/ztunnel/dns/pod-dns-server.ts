/**
 * The DNS listener of one pod (port 15053, as upstream ztunnel's in-pod DNS proxy): UDP and TCP sockets on the pod's
 * loopback address (where the capture rule's REDIRECT in OUTPUT delivers), marked like every
 * proxy socket. Each query is answered from the proxy's own names when it is an A/AAAA
 * question it knows, else forwarded to the upstream resolver over a marked socket and the
 * reply relayed. A frame that does not decode gets FORMERR (or is dropped, with a log line,
 * when it has no header); nothing a client sends can throw out of here.
 */
import { DNS_PORT } from '../../api/ports.js';
import type { IpFamily, SocketAddress, TcpConnection, TcpListener, UdpSocket } from '../../host/sockets.js';
import type { PodContext } from '../pod-context.js';
import { fmt } from '../pod-context.js';
import { OPCODE_QUERY, RCODE, RR_CLASS_IN, RR_TYPE, rrTypeName, type Rcode } from './constants.js';
import type { DnsProxyConfig } from './dns-config.js';
import type { DnsRequestRecord } from './dns-log.js';
import { forwardTcp, forwardUdp, type ForwardResult } from './forwarder.js';
import { addressBytes } from './ip-bytes.js';
import { decodeMessage, encodeMessage, peekId, type DnsMessage } from './message.js';
import { errorReply, localAnswer } from './response.js';
import { FrameReader, frame } from './tcp-framing.js';
import { DnsWireError } from './wire-error.js';

type DnsProto = 'udp' | 'tcp';

/** Loopback per family: the address a locally generated packet is REDIRECTed to. */
function loopback(f: IpFamily): string {
  return f === 4 ? '127.0.0.1' : '::1';
}

export class PodDnsServer {
  private readonly udp: UdpSocket[] = [];
  private readonly tcp: TcpListener[] = [];
  private readonly conns = new Set<TcpConnection>();

  constructor(
    private readonly ctx: PodContext,
    private readonly cfg: DnsProxyConfig,
  ) {}

  /** Open the listeners; on failure close what was opened and throw (the pod's Add is nacked). */
  async start(): Promise<void> {
    const { deps } = this.ctx;
    const bindUdp = deps.sockets.bindUdp?.bind(deps.sockets);
    try {
      if (!bindUdp)
        throw new Error(
          'the Sockets adapter has no UDP (bindUdp); run without the DNS option or use an adapter that has it',
        );
      for (const family of deps.families) {
        const base = {
          netns: this.ctx.netns,
          family,
          address: loopback(family),
          port: DNS_PORT,
          mark: deps.mark,
          reusePort: deps.reusePort,
        };
        const bound: { sock?: UdpSocket } = {}; // set once bound; a datagram cannot arrive before bind returns
        const u = await bindUdp(base, (d) => {
          if (bound.sock) void this.onDatagram(bound.sock, d.from, d.bytes);
        });
        // A pod whose loopback has IPv6 turned off (net.ipv6.conf.lo.disable_ipv6) has no ::1:
        // upstream ztunnel checks that per pod and serves DNS on IPv4 only there (nothing can be
        // redirected to ::1 in such a pod), rather than refusing the pod.
        if (!u.ok && family === 6 && u.kind === 'addr-not-available') {
          this.ctx.log.info('IPv6 is off on the pod loopback; DNS is served on IPv4 only', {
            pod: `${this.ctx.info.namespace}/${this.ctx.info.name}`,
          });
          continue;
        }
        if (!u.ok) throw new Error(`UDP ${loopback(family)}:${DNS_PORT}: ${u.kind} ${u.errno} (${u.message})`);
        bound.sock = u.value;
        this.udp.push(u.value);
        const t = await deps.sockets.listenTcp({ ...base, ...(family === 6 ? { v6Only: true } : {}) }, (c) =>
          this.onConnection(c),
        );
        if (!t.ok) throw new Error(`TCP ${loopback(family)}:${DNS_PORT}: ${t.kind} ${t.errno} (${t.message})`);
        this.tcp.push(t.value);
      }
    } catch (e) {
      await this.stop();
      throw new Error(
        `pod ${this.ctx.info.namespace}/${this.ctx.info.name}: cannot open the DNS listener in ${this.ctx.netns}: ${(e as Error).message}`,
        { cause: e },
      );
    }
  }

  async stop(): Promise<void> {
    const udp = this.udp.splice(0);
    const tcp = this.tcp.splice(0);
    for (const c of this.conns) c.close();
    this.conns.clear();
    await Promise.all([...udp.map((s) => s.close()), ...tcp.map((l) => l.close())]);
  }

  private async onDatagram(sock: UdpSocket, from: SocketAddress, bytes: Uint8Array): Promise<void> {
    try {
      const reply = await this.handle('udp', from, bytes);
      if (reply) {
        const sent = await sock.send(from, reply);
        if (!sent.ok) this.ctx.log.warn('DNS reply not sent', { client: fmt(from), error: sent.message });
      }
    } catch (e) {
      this.ctx.log.error('DNS request handler failed', { client: fmt(from), error: (e as Error).message });
    }
  }

  private onConnection(c: TcpConnection): void {
    this.conns.add(c);
    void (async () => {
      const reader = new FrameReader();
      try {
        for (;;) {
          const r = await c.read();
          if (r.done) break;
          for (const m of reader.push(r.bytes)) {
            const reply = await this.handle('tcp', c.remoteAddress, m);
            if (reply && !(await c.write(frame(reply))).ok) return;
          }
        }
        if (reader.pending() > 0)
          this.ctx.log.info('DNS over TCP: connection ended inside a frame', {
            client: fmt(c.remoteAddress),
            bytes: reader.pending(),
          });
      } catch (e) {
        this.ctx.log.error('DNS over TCP handler failed', {
          client: fmt(c.remoteAddress),
          error: (e as Error).message,
        });
      } finally {
        this.conns.delete(c);
        c.close();
      }
    })();
  }

  /** One query in, the reply bytes out (undefined = send nothing). */
  async handle(proto: DnsProto, client: SocketAddress, bytes: Uint8Array): Promise<Uint8Array | undefined> {
    const base = { pod: `${this.ctx.info.namespace}/${this.ctx.info.name}`, proto, client: fmt(client) };
    const log = (r: Omit<DnsRequestRecord, 'pod' | 'proto' | 'client'>): void => this.cfg.log.record({ ...base, ...r });
    let query: DnsMessage;
    try {
      query = decodeMessage(bytes);
    } catch (e) {
      if (!(e instanceof DnsWireError)) throw e;
      const id = peekId(bytes);
      // A frame shorter than a header is not recognisably DNS: drop it rather than answer noise.
      if (id === undefined || bytes.length < 12) {
        log({ event: 'malformed', reason: `${e.message}; dropped` });
        this.ctx.log.info('DNS frame dropped', { client: base.client, error: e.message });
        return undefined;
      }
      log({ event: 'malformed', rcode: RCODE.FORMERR, reason: e.message });
      return encodeMessage(errorReply(id, RCODE.FORMERR));
    }
    if (query.header.response) {
      log({ event: 'malformed', reason: 'a response (QR=1) sent to the DNS listener; dropped' });
      return undefined;
    }
    const q = query.questions[0];
    const question = q ? { name: q.name, type: rrTypeName(q.type) } : undefined;
    const error = (rcode: Rcode, reason: string): Uint8Array => {
      log({ event: 'malformed', ...(question ? { question } : {}), rcode, reason });
      return encodeMessage(errorReply(query.header.id, rcode, query));
    };
    if (query.header.opcode !== OPCODE_QUERY) return error(RCODE.NOTIMP, `opcode ${query.header.opcode} is not QUERY`);
    if (!q || query.questions.length !== 1)
      return error(RCODE.FORMERR, `${query.questions.length} questions; exactly one is supported`);
    if (q.class === RR_CLASS_IN && (q.type === RR_TYPE.A || q.type === RR_TYPE.AAAA)) {
      const ips = this.cfg.names.lookup(q.name, q.type === RR_TYPE.A ? 4 : 6);
      if (ips) {
        const data = ips.map((ip) => addressBytes(ip)?.bytes).filter((b): b is Uint8Array => b !== undefined);
        log({ event: 'answered-locally', question: question!, rcode: RCODE.NOERROR, answers: ips });
        return encodeMessage(localAnswer(query, q, data));
      }
    }
    return this.forward(proto, bytes, query, question!, log);
  }

  private async forward(
    proto: DnsProto,
    bytes: Uint8Array,
    query: DnsMessage,
    question: { name: string; type: string },
    log: (r: Omit<DnsRequestRecord, 'pod' | 'proto' | 'client'>) => void,
  ): Promise<Uint8Array> {
    const { deps } = this.ctx;
    const fctx = {
      sockets: deps.sockets,
      clock: deps.clock,
      netns: this.ctx.netns,
      mark: deps.mark,
      timeoutMs: this.cfg.forwardTimeoutMs,
    };
    const reasons: string[] = [];
    for (const up of this.cfg.upstream) {
      const r: ForwardResult = proto === 'udp' ? await forwardUdp(fctx, up, bytes) : await forwardTcp(fctx, up, bytes);
      if (r.ok) {
        log({
          event: 'forwarded',
          question,
          upstream: fmt(up),
          ...(r.reply.length >= 4 ? { rcode: r.reply[3]! & 0xf } : {}),
        });
        return r.reply;
      }
      reasons.push(r.reason);
    }
    const reason = reasons.length > 0 ? reasons.join('; ') : 'no upstream resolver configured';
    log({
      event: 'failed',
      question,
      rcode: RCODE.SERVFAIL,
      ...(this.cfg.upstream[0] ? { upstream: fmt(this.cfg.upstream[0]) } : {}),
      reason,
    });
    this.ctx.log.warn('DNS forward failed', { question: question.name, reason });
    return encodeMessage(errorReply(query.header.id, RCODE.SERVFAIL, query));
  }
}
