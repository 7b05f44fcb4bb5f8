/**
 * Ethernet frames for the probe's AF_PACKET attempts: one TCP SYN or one UDP datagram, IPv4 or
 * IPv6, with correct checksums (the receiving kernel drops anything else before netfilter), and
 * the few fields of a received frame the probe needs to recognise the answer (SYN-ACK or RST).
 */

type Mac = string;

interface RawSegment {
  readonly proto: 'tcp' | 'udp';
  readonly srcMac: Mac;
  readonly dstMac: Mac;
  readonly src: string;
  readonly dst: string;
  readonly sport: number;
  readonly dport: number;
  /** UDP payload (TCP: a bare SYN, no payload). */
  readonly payload: Buffer;
  /** TCP initial sequence number. */
  readonly seq: number;
}

interface ParsedFrame {
  readonly family: 4 | 6;
  readonly proto: 'tcp' | 'udp' | 'other';
  readonly src: string;
  readonly dst: string;
  readonly sport: number;
  readonly dport: number;
  /** TCP flags byte (FIN 1, SYN 2, RST 4, PSH 8, ACK 16). */
  readonly flags: number;
}

export const TCP_SYN = 0x02;
export const TCP_RST = 0x04;
export const TCP_ACK = 0x10;

function macBytes(mac: Mac): Buffer {
  const parts = mac.split(':');
  if (parts.length !== 6 || parts.some((p) => !/^[0-9a-fA-F]{2}$/.test(p)))
    throw new Error(`raw frame: bad MAC address ${JSON.stringify(mac)}`);
  return Buffer.from(parts.map((p) => parseInt(p, 16)));
}

/** IPv4 dotted quad or IPv6 text (with `::`) to network-order bytes. */
export function ipBytes(ip: string): Buffer {
  if (!ip.includes(':')) {
    const o = ip.split('.').map(Number);
    if (o.length !== 4 || o.some((x) => !Number.isInteger(x) || x < 0 || x > 255))
      throw new Error(`raw frame: bad IPv4 address ${JSON.stringify(ip)}`);
    return Buffer.from(o);
  }
  const [head, tail, extra] = ip.split('::');
  if (extra !== undefined) throw new Error(`raw frame: bad IPv6 address ${JSON.stringify(ip)}`);
  const groups = (s: string | undefined): number[] => (s ? s.split(':').map((g) => parseInt(g, 16)) : []);
  const h = groups(head);
  const t = groups(tail);
  const all = tail === undefined ? h : [...h, ...new Array<number>(8 - h.length - t.length).fill(0), ...t];
  if (all.length !== 8 || all.some((g) => !Number.isInteger(g) || g < 0 || g > 0xffff))
    throw new Error(`raw frame: bad IPv6 address ${JSON.stringify(ip)}`);
  const b = Buffer.alloc(16);
  all.forEach((g, i) => b.writeUInt16BE(g, i * 2));
  return b;
}

function ipText(b: Buffer): string {
  if (b.length === 4) return [...b].join('.');
  const g: string[] = [];
  for (let i = 0; i < 16; i += 2) g.push(b.readUInt16BE(i).toString(16));
  // Canonical enough for comparison with what the probe sends: compress the longest zero run.
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; i++) {
    let j = i;
    while (j < 8 && g[j] === '0') j++;
    if (j - i > bestLen) {
      best = i;
      bestLen = j - i;
    }
  }
  if (best < 0) return g.join(':');
  return `${g.slice(0, best).join(':')}::${g.slice(best + bestLen).join(':')}`;
}

/** Ones' complement sum of 16-bit words, folded (the Internet checksum before inversion). */
function sum16(bufs: readonly Buffer[]): number {
  let s = 0;
  for (const b of bufs) {
    for (let i = 0; i + 1 < b.length; i += 2) s += b.readUInt16BE(i);
    if (b.length % 2 === 1) s += b[b.length - 1]! << 8;
  }
  while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
  return s;
}

function checksum(bufs: readonly Buffer[]): number {
  return ~sum16(bufs) & 0xffff;
}

export function buildFrame(s: RawSegment): Buffer {
  const v6 = s.src.includes(':');
  const src = ipBytes(s.src);
  const dst = ipBytes(s.dst);
  if ((dst.length === 16) !== v6) throw new Error(`raw frame: ${s.src} and ${s.dst} are not of one family`);
  let l4: Buffer;
  const protoNum = s.proto === 'tcp' ? 6 : 17;
  if (s.proto === 'tcp') {
    l4 = Buffer.alloc(20);
    l4.writeUInt16BE(s.sport, 0);
    l4.writeUInt16BE(s.dport, 2);
    l4.writeUInt32BE(s.seq >>> 0, 4);
    l4.writeUInt32BE(0, 8);
    l4[12] = 5 << 4; // data offset: 5 words, no options
    l4[13] = TCP_SYN;
    l4.writeUInt16BE(64240, 14); // window
  } else {
    l4 = Buffer.concat([Buffer.alloc(8), s.payload]);
    l4.writeUInt16BE(s.sport, 0);
    l4.writeUInt16BE(s.dport, 2);
    l4.writeUInt16BE(l4.length, 4);
  }
  const pseudo = v6
    ? Buffer.concat([src, dst, Buffer.from([0, 0, l4.length >> 8, l4.length & 0xff, 0, 0, 0, protoNum])])
    : Buffer.concat([src, dst, Buffer.from([0, protoNum, l4.length >> 8, l4.length & 0xff])]);
  let c = checksum([pseudo, l4]);
  if (s.proto === 'udp' && c === 0) c = 0xffff; // 0 means "no checksum" for UDP (and is illegal over IPv6)
  l4.writeUInt16BE(c, s.proto === 'tcp' ? 16 : 6);
  let ip: Buffer;
  if (v6) {
    ip = Buffer.alloc(40);
    ip.writeUInt32BE(0x60000000, 0);
    ip.writeUInt16BE(l4.length, 4);
    ip[6] = protoNum;
    ip[7] = 64;
    src.copy(ip, 8);
    dst.copy(ip, 24);
  } else {
    ip = Buffer.alloc(20);
    ip[0] = 0x45;
    ip.writeUInt16BE(20 + l4.length, 2);
    ip.writeUInt16BE(0x4000, 6); // DF
    ip[8] = 64;
    ip[9] = protoNum;
    src.copy(ip, 12);
    dst.copy(ip, 16);
    ip.writeUInt16BE(checksum([ip]), 10);
  }
  const eth = Buffer.concat([macBytes(s.dstMac), macBytes(s.srcMac), Buffer.from(v6 ? [0x86, 0xdd] : [0x08, 0x00])]);
  return Buffer.concat([eth, ip, l4]);
}

/** The IP/TCP/UDP fields of an Ethernet frame, or undefined when it is not IPv4/IPv6. */
export function parseFrame(f: Buffer): ParsedFrame | undefined {
  if (f.length < 14) return undefined;
  const type = f.readUInt16BE(12);
  let family: 4 | 6;
  let protoNum: number;
  let src: Buffer;
  let dst: Buffer;
  let l4: number;
  if (type === 0x0800 && f.length >= 34) {
    family = 4;
    const ihl = (f[14]! & 0x0f) * 4;
    protoNum = f[23]!;
    src = f.subarray(26, 30);
    dst = f.subarray(30, 34);
    l4 = 14 + ihl;
  } else if (type === 0x86dd && f.length >= 54) {
    family = 6;
    protoNum = f[20]!; // no extension headers expected on these replies
    src = f.subarray(22, 38);
    dst = f.subarray(38, 54);
    l4 = 54;
  } else return undefined;
  const proto = protoNum === 6 ? 'tcp' : protoNum === 17 ? 'udp' : 'other';
  const ports = proto !== 'other' && f.length >= l4 + 4;
  return {
    family,
    proto,
    src: ipText(Buffer.from(src)),
    dst: ipText(Buffer.from(dst)),
    sport: ports ? f.readUInt16BE(l4) : 0,
    dport: ports ? f.readUInt16BE(l4 + 2) : 0,
    flags: proto === 'tcp' && f.length >= l4 + 14 ? f[l4 + 13]! : 0,
  };
}
