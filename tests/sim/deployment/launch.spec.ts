/**
 * The components' launch as the manifests say it (e2e/deployment/launch.ts): what the real
 * manifests give, that a change in a copy is followed, and that what a launch cannot follow is an
 * error naming the field rather than a default.
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { deploymentLaunch } from '../../../e2e/deployment/launch.js';
import { PROXY_NODE_FLAGS } from '../../../impl/linux/node-flags.js';

const MANIFESTS = path.resolve(import.meta.dirname, '..', '..', '..', 'fixtures', 'manifests');

/** A copy of the manifests with `edit` applied to one file's text. */
function withEditedCopy(file: string, edit: (text: string) => string, fn: (dir: string) => void): void {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'al-launch-'));
  try {
    for (const f of fs.readdirSync(MANIFESTS)) fs.copyFileSync(path.join(MANIFESTS, f), path.join(dir, f));
    const full = path.join(dir, file);
    const before = fs.readFileSync(full, 'utf8');
    const after = edit(before);
    expect(after).not.toBe(before); // the edit must hit something, or the test proves nothing
    fs.writeFileSync(full, after);
    fn(dir);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

test('the shipped manifests: the proxy as 1337:1337 with NET_ADMIN and SYS_ADMIN, the agent as root in group 1337 with its four', () => {
  const l = deploymentLaunch(MANIFESTS, { nodeName: 'node-7' });
  expect(l.proxy).toMatchObject({
    uid: 1337,
    gid: 1337,
    groups: [],
    caps: ['net_admin', 'sys_admin'],
    nodeFlags: [...PROXY_NODE_FLAGS],
    program: 'bin/ambient-lab-proxy.js',
  });
  expect(l.agent).toMatchObject({
    uid: 0,
    gid: 0,
    groups: [1337],
    caps: ['net_admin', 'net_raw', 'sys_admin', 'sys_ptrace'],
    nodeFlags: [],
    program: 'bin/ambient-lab-agent.js',
  });
  // The agent admits the proxy's uid and gives the ZDS socket the proxy's group: the same ids.
  expect(l.agent.env['AMBIENT_LAB_PROXY_UID']).toBe(String(l.proxy.uid));
  expect(l.agent.env['AMBIENT_LAB_ZDS_SOCKET_GROUP']).toBe(String(l.proxy.gid));
  // Field references resolved as a kubelet would on that node.
  expect(l.agent.env['AMBIENT_LAB_NODE']).toBe('node-7');
  expect(l.agent.env['AMBIENT_LAB_SYSTEM_NAMESPACE']).toBe('ambient-lab-system');
});

test('a changed securityContext in a copy changes the launch', () => {
  withEditedCopy(
    '20-proxy.yaml',
    (t) => t.replace('runAsUser: 1337', 'runAsUser: 4242').replace('add: [NET_ADMIN, SYS_ADMIN]', 'add: [NET_ADMIN]'),
    (dir) => {
      const l = deploymentLaunch(dir, { nodeName: 'n' });
      expect(l.proxy.uid).toBe(4242);
      expect(l.proxy.caps).toEqual(['net_admin']);
    },
  );
});

const refused: ReadonlyArray<[string, string, (t: string) => string, RegExp]> = [
  [
    'no drop ALL',
    '20-proxy.yaml',
    (t) => t.replace('drop: [ALL]', 'drop: [NET_RAW]'),
    /20-proxy\.yaml: DaemonSet ambient-lab-proxy, container proxy: capabilities must drop ALL/,
  ],
  [
    'a non-numeric user',
    '20-proxy.yaml',
    (t) => t.replace('runAsUser: 1337', 'runAsUser: "1337"'),
    /runAsUser must be a numeric id, got "1337"/,
  ],
  [
    'an env value from a secret',
    '10-agent.yaml',
    (t) =>
      t.replace(
        'value: kube-system\n            - name: AMBIENT_LAB_SYSTEM_NAMESPACE\n              valueFrom: { fieldRef: { fieldPath: metadata.namespace } }\n            - name: AMBIENT_LAB_OWN_POD_PREFIXES\n              value: ambient-lab-agent-,ambient-lab-proxy-\n            # iptables',
        'value: kube-system\n            - name: AMBIENT_LAB_SYSTEM_NAMESPACE\n              valueFrom: { secretKeyRef: { name: s, key: k } }\n            - name: AMBIENT_LAB_OWN_POD_PREFIXES\n              value: ambient-lab-agent-,ambient-lab-proxy-\n            # iptables',
      ),
    /container agent: env AMBIENT_LAB_SYSTEM_NAMESPACE: only literal values and fieldRef/,
  ],
  [
    'a program outside the image app dir',
    '20-proxy.yaml',
    (t) => t.replace('/app/bin/ambient-lab-proxy.js]', '/opt/proxy.js]'),
    /the program "\/opt\/proxy\.js" is not under \/app\//,
  ],
  [
    'a missing DaemonSet',
    '20-proxy.yaml',
    (t) => t.replace('name: ambient-lab-proxy\n  namespace', 'name: other-proxy\n  namespace'),
    /no DaemonSet ambient-lab-proxy in /,
  ],
];

for (const [name, file, edit, message] of refused) {
  test(`refused, naming the field: ${name}`, () => {
    withEditedCopy(file, edit, (dir) => {
      expect(() => deploymentLaunch(dir, { nodeName: 'n' })).toThrow(message);
    });
  });
}

test('what a container world follows: the binary and program args, host namespaces, privilege escalation, read-only root, hostPath mounts, the installer container', () => {
  const l = deploymentLaunch(MANIFESTS, { nodeName: 'node-7' });
  expect(l.proxy).toMatchObject({
    binary: '/app/node-netcaps',
    programArgs: [],
    pod: { hostNetwork: true, hostPID: false, serviceAccount: 'ambient-lab-proxy', namespace: 'ambient-lab-system' },
    allowPrivilegeEscalation: true,
    readOnlyRootFilesystem: true,
    hostPathMounts: [{ hostPath: '/var/run/ambient-lab', mountPath: '/var/run/ambient-lab', propagation: 'None' }],
  });
  expect(l.agent).toMatchObject({
    binary: 'node',
    pod: { hostNetwork: true, hostPID: true },
    allowPrivilegeEscalation: false,
  });
  expect(l.agent.hostPathMounts).toContainEqual({
    hostPath: '/var/run/netns',
    mountPath: '/var/run/netns',
    propagation: 'HostToContainer',
  });
  expect(l.installCni).toMatchObject({
    uid: 0,
    caps: [],
    program: 'dist/impl/linux/cni-installer-main.js',
    programArgs: ['install'],
  });
  expect(l.installCni.hostPathMounts.map((m) => m.mountPath)).toEqual([
    '/host/opt/cni/bin',
    '/host/etc/cni/net.d',
    '/host/opt/ambient-lab',
    '/var/run/ambient-lab',
  ]);
  withEditedCopy(
    '20-proxy.yaml',
    (t) => t.replace('allowPrivilegeEscalation: true', 'allowPrivilegeEscalation: false'),
    (dir) => expect(deploymentLaunch(dir, { nodeName: 'n' }).proxy.allowPrivilegeEscalation).toBe(false),
  );
  withEditedCopy(
    '10-agent.yaml',
    (t) => t.replace('mountPropagation: HostToContainer', 'mountPropagation: Bidirectional'),
    (dir) =>
      expect(() => deploymentLaunch(dir, { nodeName: 'n' })).toThrow(
        /mountPropagation "Bidirectional" is not followed/,
      ),
  );
});
