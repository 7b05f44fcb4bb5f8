/**
 * Driving a cluster made by `ambient-lab up` from later CLI processes, through its daemon's
 * control socket, as a user reproducing the attack catalog by hand would: pod add (uid, caps,
 * labels, ports, a new namespace), label a namespace into the mesh, exec with --uid/--caps and a
 * clean environment, a DENY policy applied and deleted, a proxy stopped and started, a node
 * rebooted, the API broken for the CNI plugin while a pod is added (fail closed, then retried),
 * annotate, pod delete, logs (--follow ends when the cluster goes down), and down ending the daemon.
 */
import { test, expect } from '@playwright/test';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { netnsWorldFactory } from '../../../e2e/netns/world.js';
import { NetnsLab } from '../../../e2e/netns/world-lab.js';
import { listNetns } from '../../../e2e/netns/ip.js';
import { REPO, runCli, type CliRun } from '../../cli-run.js';

const avail = netnsWorldFactory.available();
test.skip(!avail.ok, avail.reason);
test.setTimeout(600_000);

const NAME = `drive-${process.pid}`;
const DIR = `/run/ambient-lab/${NAME}`;
const A = ['--name', NAME];
/** The CLI with this lab's --name (before a `--`, after which the pod's command begins). */
const cli = (args: string[]): Promise<CliRun> => {
  const dd = args.indexOf('--');
  const withName = dd < 0 ? [...args, ...A] : [...args.slice(0, dd), ...A, ...args.slice(dd)];
  return runCli(withName, { timeoutMs: 300_000 });
};

interface Status {
  nodes: { name: string; agent: { ready: boolean }; proxy: { running: boolean; ready: boolean } }[];
  pods: { pod: string; phase: string; annotation: string; redirection: string; ips: string[] }[];
}
const status = async (): Promise<Status> => {
  const r = await cli(['status', '--json']);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as Status;
};
/** Poll `status` until `ok` holds (bounded). */
async function until(what: string, ok: (s: Status) => boolean, ms = 60_000): Promise<Status> {
  const deadline = Date.now() + ms;
  for (;;) {
    const s = await status();
    if (ok(s)) return s;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms; last status ${JSON.stringify(s)}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}
const pod = (s: Status, key: string) => s.pods.find((p) => p.pod === key);

/** A TCP exchange from inside a pod (exec): the app's answer, or ERR <code>. */
async function connectFrom(from: string, ip: string, port: number): Promise<string> {
  const r = await cli([
    'exec',
    from,
    '--',
    'node',
    '-e',
    `const s=require('net').connect(${port},'${ip}');s.setTimeout(5000,()=>{console.log('ERR timeout');process.exit(0)});s.on('error',e=>{console.log('ERR',e.code);process.exit(0)});s.on('data',d=>{process.stdout.write(d);process.exit(0)});s.write('hi\\n')`,
  ]);
  expect(r.code, r.stderr).toBe(0);
  return r.stdout.trim();
}

test('up, then pod add / label / exec / policy / component / node reboot / api fault / annotate / pod delete / logs / down from other processes', async () => {
  const up = await cli(['up', '--nodes', '2', '--pods', '1', '--no-ipv6', '--profile', 'strict']);
  try {
    expect(up.code, up.stderr).toBe(0);
    expect(up.stdout).toContain('profile strict, IPv6 off, DNS capture on');
    const daemonPid = Number(fs.readFileSync(`${DIR}/daemon.pid`, 'utf8'));
    expect(fs.readFileSync(`/proc/${daemonPid}/cmdline`, 'utf8')).toContain('lab-daemon-main');

    // a pod added later, in a new namespace, as root with NET_ADMIN: CNI chain, not enrolled yet
    const add = await cli(
      ['pod', 'add', 'web', '--namespace', 'shop', '--node', 'node-1', '--uid', '0'].concat([
        '--caps',
        'NET_ADMIN',
        '--label',
        'app=web',
        '--tcp-port',
        '8080',
        '--udp-port',
        '5353',
        '--json',
      ]),
    );
    expect(add.code, add.stderr).toBe(0);
    expect(JSON.parse(add.stdout)).toMatchObject({
      namespace: 'shop',
      name: 'web',
      node: 'node-1',
      phase: 'Running',
      redirected: false,
    });
    // labelling its namespace enrolls it
    expect((await cli(['label', 'namespace', 'shop', 'istio.io/dataplane-mode=ambient'])).code).toBe(0);
    let s = await until('shop/web enrolled', (x) => pod(x, 'shop/web')?.annotation === 'enabled');
    const webIp = pod(s, 'shop/web')!.ips[0]!;

    // exec: the pod's uid and caps by default, --uid/--caps to change them, a clean environment
    const ex = await cli(['exec', 'shop/web', '--', 'sh', '-c', 'id -u; grep CapEff /proc/self/status; env']);
    expect(ex.code, ex.stderr).toBe(0);
    const [uid, capEff, ...env] = ex.stdout.trim().split('\n');
    expect(uid).toBe('0');
    expect(BigInt(`0x${capEff!.split(/\s+/)[1]}`) & (1n << 12n)).toBe(1n << 12n); // CAP_NET_ADMIN
    expect(env.sort()).toEqual(
      [
        'HOME=/',
        'LANG=C.UTF-8',
        'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
        expect.stringMatching(/^PWD=/),
      ].sort(),
    );
    const demo = await cli(['exec', 'demo/node-0-app-0', '--uid', '2000', '--', 'id', '-u']);
    expect(demo.stdout.trim()).toBe('2000');
    const refused = await cli(['exec', 'demo/node-0-app-0', '--caps', 'NET_RAW', '--', 'true']);
    expect(refused.code).toBe(2);

    // a DENY policy resets the connection; deleting it lets it through again
    expect(await connectFrom('demo/node-0-app-0', webIp, 8080)).toBe('ok shop/web');
    const policy = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'al-policy-')), 'deny.yaml');
    fs.writeFileSync(
      policy,
      'apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: deny-all, namespace: shop}\nspec: {action: DENY, rules: [{}]}\n',
    );
    expect((await cli(['policy', 'apply', policy])).code).toBe(0);
    await expect.poll(() => connectFrom('demo/node-0-app-0', webIp, 8080), { timeout: 30_000 }).toMatch(/^ERR /);
    expect((await cli(['policy', 'delete', 'shop/deny-all'])).code).toBe(0);
    await expect.poll(() => connectFrom('demo/node-0-app-0', webIp, 8080), { timeout: 30_000 }).toBe('ok shop/web');

    // the proxy of node-1 stopped: strict fails closed; started: served again
    expect((await cli(['component', 'stop', 'proxy', '--node', 'node-1'])).code).toBe(0);
    s = await status();
    expect(s.nodes.find((n) => n.name === 'node-1')!.proxy.running).toBe(false);
    expect(await connectFrom('demo/node-0-app-0', webIp, 8080)).toMatch(/^ERR /);
    expect((await cli(['component', 'start', 'proxy', '--node', 'node-1'])).code).toBe(0);
    await expect.poll(() => connectFrom('demo/node-0-app-0', webIp, 8080), { timeout: 60_000 }).toBe('ok shop/web');

    // a reboot: new sandboxes for node-1's pods, enrolled and served again
    const netnsBefore = NetnsLab.attach(DIR).state.pods['shop/web']!.netns;
    expect((await cli(['node', 'reboot', 'node-1'])).code).toBe(0);
    expect(NetnsLab.attach(DIR).state.pods['shop/web']!.netns).not.toBe(netnsBefore);
    s = await until('shop/web served after the reboot', (x) => pod(x, 'shop/web')?.redirection === 'enabled');
    await expect
      .poll(() => connectFrom('demo/node-0-app-0', pod(s, 'shop/web')!.ips[0]!, 8080), { timeout: 60_000 })
      .toBe('ok shop/web');

    // the API broken for node-0's CNI plugin: a new mesh pod does not start; fixed: the kubelet's retry starts it
    expect((await cli(['api', 'fault', 'on', '--node', 'node-0'])).code).toBe(0);
    const late = await cli(['pod', 'add', 'late', '--namespace', 'shop', '--node', 'node-0', '--json']);
    expect(late.code, late.stderr).toBe(0);
    expect(JSON.parse(late.stdout)).toMatchObject({ started: false });
    expect((await cli(['api', 'fault', 'off'])).code).toBe(0);
    await until(
      'shop/late started and enrolled after the fault',
      (x) => pod(x, 'shop/late')?.annotation === 'enabled',
      120_000,
    );
    // the same with an API that answers 500
    expect((await cli(['api', 'fault', 'on', '--mode', 'error', '--node', 'node-0'])).code).toBe(0);
    const late2 = await cli(['pod', 'add', 'late2', '--namespace', 'shop', '--node', 'node-0', '--json']);
    expect(JSON.parse(late2.stdout)).toMatchObject({ started: false });
    const conf = fs.readdirSync(`${DIR}/node-0/net.d`).map((f) => fs.readFileSync(`${DIR}/node-0/net.d/${f}`, 'utf8'));
    expect(conf.join('\n')).toContain('cni-api-error.kubeconfig');
    expect((await cli(['api', 'fault', 'off'])).code).toBe(0);
    await until('shop/late2 started after the 500s', (x) => pod(x, 'shop/late2')?.annotation === 'enabled', 120_000);

    // a pod label, and an agent restart: the pod stays enrolled and served
    expect((await cli(['label', 'pod', 'shop/web', 'tier=front', 'app-'])).code).toBe(0);
    const labelled = await NetnsLab.attach(DIR).api.get('Pod', 'web', 'shop');
    expect(labelled.metadata?.labels).toEqual({ tier: 'front' });
    expect((await cli(['component', 'restart', 'agent', '--node', 'node-1'])).code).toBe(0);
    await until(
      'agent on node-1 ready after its restart',
      (x) => x.nodes.find((n) => n.name === 'node-1')!.agent.ready,
    );
    await expect
      .poll(() => connectFrom('demo/node-0-app-0', pod(s, 'shop/web')!.ips[0]!, 8080), { timeout: 60_000 })
      .toBe('ok shop/web');

    // annotate and delete
    expect((await cli(['annotate', 'pod', 'shop/web', 'example.com/note=hello'])).code).toBe(0);
    const obj = await NetnsLab.attach(DIR).api.get('Pod', 'web', 'shop');
    expect(obj.metadata?.annotations?.['example.com/note']).toBe('hello');
    expect((await cli(['pod', 'delete', 'shop/late'])).code).toBe(0);
    expect(pod(await status(), 'shop/late')).toBeUndefined();

    // logs: the agent's enrollment lines; --follow prints as they come and ends with the cluster
    const logs = await cli(['logs', 'agent', '--node', 'node-1']);
    expect(logs.stdout).toMatch(/"msg":"pod enrolled"/);
    const follower = spawn(process.execPath, [
      path.join(REPO, 'bin', 'ambient-lab.js'),
      'logs',
      'proxy',
      '--node',
      'node-1',
      '--follow',
      ...A,
    ]);
    let followed = '';
    follower.stdout.on('data', (d: Buffer) => (followed += d.toString()));
    const followerEnded = new Promise<number | null>((r) => follower.on('exit', (c) => r(c)));
    await expect.poll(() => followed.length, { timeout: 10_000 }).toBeGreaterThan(0);

    const prefix = NetnsLab.attach(DIR).state.prefix;
    const down = await cli(['down']);
    expect(down.code, down.stderr).toBe(0);
    expect(down.stdout).toContain('(by its daemon)');
    expect(await followerEnded).toBe(0);
    expect((await listNetns()).filter((n) => n.startsWith(prefix))).toEqual([]);
    await expect.poll(() => fs.existsSync(`/proc/${daemonPid}`), { timeout: 10_000 }).toBe(false);
  } finally {
    await cli(['down']);
  }
});
