import { test, expect } from '@playwright/test';
import { Netfilter } from '../../../../sim/kernel/netfilter/netfilter.js';
import { IpSets } from '../../../../sim/kernel/netfilter/ipset.js';
import { ctx, hostProbe, ISTIO_INPOD_V4, ISTIO_INPOD_V6, packet, PROBE_V4 } from './fixtures.js';

test.describe('the Istio rulesets (upstream golden files) load, save normalised and round-trip', () => {
  test('in-pod v4 loads and saves like iptables 1.8.9 prints it', () => {
    const nf = new Netfilter(4);
    nf.restore(ISTIO_INPOD_V4, { source: 'inpod-v4' });
    const nat = nf.save('nat');
    expect(nat).toContain('-A ISTIO_PRERT -s 169.254.7.127/32 -p tcp -m tcp -j ACCEPT');
    expect(nat).toContain(
      '-A ISTIO_PRERT ! -d 127.0.0.1/32 -p tcp -m tcp ! --dport 15008 -m mark ! --mark 0x539/0xfff -j REDIRECT --to-ports 15006',
    );
    expect(nat).toContain(
      '-A ISTIO_OUTPUT ! -o lo -p udp -m mark ! --mark 0x539/0xfff -m udp --dport 53 -j REDIRECT --to-ports 15053',
    );
    expect(nat).toContain(
      '-A ISTIO_OUTPUT ! -d 127.0.0.1/32 -p tcp -m tcp --dport 53 -m mark ! --mark 0x539/0xfff -j REDIRECT --to-ports 15053',
    );
    // User chains are printed sorted, built-in chain rules first.
    expect(nat.split('\n').slice(0, 9)).toEqual([
      '*nat',
      ':PREROUTING ACCEPT [0:0]',
      ':INPUT ACCEPT [0:0]',
      ':OUTPUT ACCEPT [0:0]',
      ':POSTROUTING ACCEPT [0:0]',
      ':ISTIO_OUTPUT - [0:0]',
      ':ISTIO_PRERT - [0:0]',
      '-A PREROUTING -j ISTIO_PRERT',
      '-A OUTPUT -j ISTIO_OUTPUT',
    ]);
    expect(nf.save('mangle')).toContain(
      '-A ISTIO_OUTPUT -m connmark --mark 0x111/0xfff -j CONNMARK --restore-mark --nfmask 0xffffffff --ctmask 0xffffffff',
    );
    expect(nf.save('raw')).toContain(
      '-A ISTIO_PRERT -p udp -m mark ! --mark 0x539/0xfff -m udp --sport 53 -j CT --zone 1',
    );
    expect(nf.rules().length).toBe(18); // mangle 4, nat 10, raw 4
  });

  for (const [name, text, family] of [
    ['in-pod v4', ISTIO_INPOD_V4, 4],
    ['in-pod v6', ISTIO_INPOD_V6, 6],
  ] as const) {
    test(`${name}: restore(save()) yields an identical save()`, () => {
      const a = new Netfilter(family);
      a.restore(text);
      const b = new Netfilter(family);
      b.restore(a.save());
      expect(b.save()).toBe(a.save());
      expect(a.save()).toContain(family === 4 ? '! -d 127.0.0.1/32' : '! -d ::1/128');
    });
  }

  for (const family of [4, 6] as const) {
    test(`host probe v${family}: needs its ipset, loads, inserts at position 1 and round-trips`, () => {
      const sets = new IpSets();
      const nf0 = new Netfilter(family, { ipsets: sets });
      nf0.restore('*nat\n:KUBE - [0:0]\n-A POSTROUTING -j KUBE\nCOMMIT\n');
      expect(() => nf0.restore(hostProbe(family), { noflush: true })).toThrow(
        /ipset "istio-inpod-probes-v.*" does not exist/,
      );
      sets.create(`istio-inpod-probes-v${family}`, 'hash:ip', family, { comment: true });
      nf0.restore(hostProbe(family), { noflush: true });
      const saved = nf0.save('nat');
      expect(saved).toContain('-A POSTROUTING -j ISTIO_POSTRT\n-A POSTROUTING -j KUBE');
      expect(saved).toContain(
        `-A ISTIO_POSTRT -p tcp -m owner --socket-exists -m set --match-set istio-inpod-probes-v${family} dst -j SNAT --to-source ${family === 4 ? PROBE_V4 : 'fd16:9254:7127:1337:ffff:ffff:ffff:ffff'}`,
      );
      const nf1 = new Netfilter(family, { ipsets: sets });
      nf1.restore(nf0.save());
      expect(nf1.save()).toBe(nf0.save());
    });
  }

  test('in-pod v4 behaviour: app TCP is redirected to 15001, ztunnel-marked TCP is not, probes pass', () => {
    const nf = new Netfilter(4);
    nf.restore(ISTIO_INPOD_V4);
    const out = nf.runTable(
      'nat',
      'OUTPUT',
      ctx({ hook: 'OUTPUT', outIface: 'eth0', packet: packet({ dst: '10.244.9.9', dport: 8080 }) }),
    );
    expect(out.verdict).toEqual({ kind: 'nat', action: { kind: 'redirect', ports: [15001, 15001] } });
    expect(out.steps.map((s) => s.effect)).toEqual(['jump ISTIO_OUTPUT', 'REDIRECT --to-ports 15001']);
    const zt = nf.runTable(
      'nat',
      'OUTPUT',
      ctx({ hook: 'OUTPUT', outIface: 'eth0', packet: packet({ dst: '10.244.9.9', mark: 0x539 }) }),
    );
    expect(zt.verdict).toEqual({ kind: 'accept' });
    const probe = nf.runTable(
      'nat',
      'PREROUTING',
      ctx({ hook: 'PREROUTING', inIface: 'eth0', packet: packet({ src: PROBE_V4, dport: 8080 }) }),
    );
    expect(probe.verdict).toEqual({ kind: 'accept' });
    expect(probe.steps[1]?.text).toBe('-A ISTIO_PRERT -s 169.254.7.127/32 -p tcp -m tcp -j ACCEPT');
    const hbone = nf.runTable(
      'nat',
      'PREROUTING',
      ctx({ hook: 'PREROUTING', inIface: 'eth0', packet: packet({ dport: 15008 }) }),
    );
    expect(hbone.verdict).toEqual({ kind: 'accept' });
    const inbound = nf.runTable(
      'nat',
      'PREROUTING',
      ctx({ hook: 'PREROUTING', inIface: 'eth0', packet: packet({ dport: 8080 }) }),
    );
    expect(inbound.verdict).toEqual({ kind: 'nat', action: { kind: 'redirect', ports: [15006, 15006] } });
    const dns = nf.runTable(
      'nat',
      'OUTPUT',
      ctx({ hook: 'OUTPUT', outIface: 'eth0', packet: packet({ proto: 'udp', dport: 53 }) }),
    );
    expect(dns.verdict).toEqual({ kind: 'nat', action: { kind: 'redirect', ports: [15053, 15053] } });
    const udp = nf.runTable(
      'nat',
      'OUTPUT',
      ctx({ hook: 'OUTPUT', outIface: 'eth0', packet: packet({ proto: 'udp', dport: 443 }) }),
    );
    expect(udp.verdict).toEqual({ kind: 'accept' });
    expect(udp.steps.at(-1)?.text).toBe('policy ACCEPT');
  });

  test('in-pod v4 connmark: ztunnel mark sets ctmark 0x111 in PREROUTING, OUTPUT restores it onto the reply', () => {
    const nf = new Netfilter(4);
    nf.restore(ISTIO_INPOD_V4);
    const c1 = ctx({ hook: 'PREROUTING', inIface: 'lo', packet: packet({ mark: 0x539 }), ct: { mark: 0xf000 } });
    nf.runTable('mangle', 'PREROUTING', c1);
    expect(c1.ct?.mark).toBe(0xf111);
    const c2 = ctx({
      hook: 'OUTPUT',
      outIface: 'eth0',
      packet: packet({ mark: 0 }),
      ct: { mark: 0xf111, state: 'ESTABLISHED', direction: 'reply' },
    });
    const r = nf.runTable('mangle', 'OUTPUT', c2);
    expect(c2.packet.mark).toBe(0xf111);
    expect(r.verdict).toEqual({ kind: 'accept' });
  });

  test('host probe: only socket-owning TCP to a set member is SNATed', () => {
    const sets = new IpSets();
    sets.create('istio-inpod-probes-v4', 'hash:ip', 4, { comment: true });
    sets.add('istio-inpod-probes-v4', '10.244.1.9', { comment: 'pod-uid-1' });
    const nf = new Netfilter(4, { ipsets: sets });
    nf.restore(hostProbe(4));
    const run = (dst: string, socket?: { uid: number; gid: number }) =>
      nf.runTable(
        'nat',
        'POSTROUTING',
        ctx({
          hook: 'POSTROUTING',
          outIface: 'veth1',
          packet: packet({ src: '10.244.1.1', dst }),
          ipsets: sets,
          ...(socket ? { socket } : {}),
        }),
      ).verdict;
    expect(run('10.244.1.9', { uid: 0, gid: 0 })).toEqual({
      kind: 'nat',
      action: { kind: 'snat', addr: { family: 4, value: 0xa9fe077fn } },
    });
    expect(run('10.244.1.9')).toEqual({ kind: 'accept' });
    expect(run('10.244.1.10', { uid: 0, gid: 0 })).toEqual({ kind: 'accept' });
  });
});
