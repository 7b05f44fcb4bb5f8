/**
 * The components' launch as the rendered manifests say it (e2e/deployment/launch.ts): what
 * deploy/ renders to, that each component changes what it says, that a change in a rendered copy
 * is followed, and that what a launch cannot follow is an error naming the field rather than a
 * default. Rendering needs kubectl (kustomize); without it these tests skip, saying so.
 */
import { test, expect } from '@playwright/test';
import * as path from 'node:path';
import {
  deploymentChoiceOf,
  deploymentDaemonSets,
  deploymentLaunch,
  kubectlAvailability,
  renderDeployment,
  type DeploymentChoice,
  renderKustomization,
} from '../../../e2e/deployment/launch.js';
import { PROXY_NODE_FLAGS } from '../../../impl/linux/node-flags.js';
import { installerSettings } from '../../../impl/linux/cni-installer-config.js';
import { SystemClock } from '../../../impl/linux/clock.js';
import { ApiStore } from '../../../sim/kube/store.js';
import { SeededRandom } from '../../../sim/time/seeded-random.js';
import { PROXY_POD } from '../../../scenarios/world.js';

const kubectl = kubectlAvailability();
test.skip(!kubectl.ok, kubectl.reason);

const DEPLOY = path.resolve(import.meta.dirname, '..', '..', '..', 'deploy');
const BASE = { profile: 'upstream', ipv6: true, dnsCapture: true } as const;

/** The base rendered, with `edit` applied to the stream's text (a rendered copy, as a user might change it). */
function editedRender(edit: (text: string) => string): string {
  const before = renderDeployment(BASE);
  const after = edit(before);
  expect(after).not.toBe(before); // the edit must hit something, or the test proves nothing
  return after;
}

test('the shipped manifests: the proxy as 1337:1337 with NET_ADMIN and SYS_ADMIN, the agent as root in group 1337 with its four', () => {
  const l = deploymentLaunch(renderDeployment(BASE), { nodeName: 'node-7' });
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

test('a changed securityContext in a rendered copy changes the launch', () => {
  const rendered = editedRender((t) =>
    t
      .replace('runAsUser: 1337', 'runAsUser: 4242')
      .replace(/add:\n(\s+)- NET_ADMIN\n\s+- SYS_ADMIN\n(\s+)drop:/, 'add:\n$1- NET_ADMIN\n$2drop:'),
  );
  const l = deploymentLaunch(rendered, { nodeName: 'n' });
  expect(l.proxy.uid).toBe(4242);
  expect(l.proxy.caps).toEqual(['net_admin']);
});

test('the base is profile upstream with IPv6 and DNS capture; each component changes exactly its setting, and they combine', () => {
  const choice = (c: DeploymentChoice) => deploymentChoiceOf(deploymentLaunch(renderDeployment(c), { nodeName: 'n' }));
  expect(choice(BASE)).toEqual(BASE);
  for (const c of [
    { profile: 'strict', ipv6: true, dnsCapture: true },
    { profile: 'upstream', ipv6: false, dnsCapture: true },
    { profile: 'upstream', ipv6: true, dnsCapture: false },
    { profile: 'strict', ipv6: false, dnsCapture: false },
    { profile: 'upstream', ipv6: true, dnsCapture: true, backend: 'nftables' },
    { profile: 'strict', ipv6: false, dnsCapture: true, backend: 'nftables' },
  ] as const)
    expect(choice(c), JSON.stringify(c)).toEqual(c);
  // the named overlays are the same components on the same base
  for (const [overlay, c] of [
    ['strict', { ...BASE, profile: 'strict' }],
    ['ipv6-off', { ...BASE, ipv6: false }],
    ['dns-capture-off', { ...BASE, dnsCapture: false }],
    ['nftables', { ...BASE, backend: 'nftables' }],
  ] as const) {
    const rendered = renderKustomization(path.join(DEPLOY, 'overlays', overlay));
    expect(rendered, overlay).toBe(renderDeployment(c));
  }
  // the nftables backend is the agent's setting alone
  const nft = deploymentLaunch(renderDeployment({ ...BASE, backend: 'nftables' }), { nodeName: 'n' });
  expect(nft.agent.env['AMBIENT_LAB_BACKEND']).toBe('nftables');
  expect(nft.proxy.env['AMBIENT_LAB_BACKEND']).toBeUndefined();
  // no DNS capture: the proxy runs no DNS listener either (an empty upstream list)
  const off = deploymentLaunch(renderDeployment({ ...BASE, dnsCapture: false }), { nodeName: 'n' });
  expect(off.proxy.env['AMBIENT_LAB_DNS_UPSTREAM']).toBe('');
  // the proxy runs the agent's profile (strict: no plaintext to a pod pending enrollment)
  for (const profile of ['upstream', 'strict'] as const)
    expect(
      deploymentLaunch(renderDeployment({ ...BASE, profile }), { nodeName: 'n' }).proxy.env['AMBIENT_LAB_PROFILE'],
    ).toBe(profile);
});

test("a proxy profile that is not the agent's is refused, naming both", () => {
  const l = deploymentLaunch(renderDeployment({ ...BASE, profile: 'strict' }), { nodeName: 'n' });
  const split = { ...l, proxy: { ...l.proxy, env: { ...l.proxy.env, AMBIENT_LAB_PROFILE: 'upstream' } } };
  expect(() => deploymentChoiceOf(split)).toThrow(
    /the agent's AMBIENT_LAB_PROFILE is strict but the proxy's is upstream/,
  );
});

test('a rendering failure names the directory and says what to do', () => {
  expect(() => renderKustomization(path.join(DEPLOY, 'no-such-overlay'))).toThrow(
    /deployment: kubectl kustomize .*no-such-overlay failed: .*check the kustomization/,
  );
});

const refused: ReadonlyArray<[string, (t: string) => string, RegExp]> = [
  [
    'no drop ALL',
    (t) => t.replace(/(name: proxy\n[\s\S]*?drop:\n\s+)- ALL/, '$1- NET_RAW'),
    /the rendered deployment: DaemonSet ambient-lab-proxy, container proxy: capabilities must drop ALL/,
  ],
  [
    'a non-numeric user',
    (t) => t.replace('runAsUser: 1337', 'runAsUser: "1337"'),
    /runAsUser must be a numeric id, got "1337"/,
  ],
  [
    'an env value from a secret',
    (t) =>
      t.replace(
        /(- name: AMBIENT_LAB_SYSTEM_NAMESPACE\n\s+valueFrom:\n\s+)fieldRef:\n\s+fieldPath: metadata.namespace/g,
        '$1secretKeyRef: { name: s, key: k }',
      ),
    /container agent: env AMBIENT_LAB_SYSTEM_NAMESPACE: only literal values and fieldRef/,
  ],
  [
    'a program outside the image app dir',
    (t) => t.replace('- /app/bin/ambient-lab-proxy.js', '- /opt/proxy.js'),
    /the program "\/opt\/proxy\.js" is not under \/app\//,
  ],
  [
    'a missing DaemonSet',
    (t) =>
      t.replace(
        'name: ambient-lab-proxy\n  namespace: ambient-lab-system\nspec:',
        'name: other-proxy\n  namespace: ambient-lab-system\nspec:',
      ),
    /no DaemonSet ambient-lab-proxy in /,
  ],
];

for (const [name, edit, message] of refused) {
  test(`refused, naming the field: ${name}`, () => {
    expect(() => deploymentLaunch(editedRender(edit), { nodeName: 'n' })).toThrow(message);
  });
}

test('what a container world follows: the binary and program args, host namespaces, privilege escalation, read-only root, hostPath, secret, configMap and token mounts, the installer container, the CA', () => {
  const l = deploymentLaunch(renderDeployment(BASE), { nodeName: 'node-7' });
  expect(l.proxy).toMatchObject({
    binary: '/app/node-netcaps',
    programArgs: [],
    pod: { hostNetwork: true, hostPID: false, serviceAccount: 'ambient-lab-proxy', namespace: 'ambient-lab-system' },
    allowPrivilegeEscalation: true,
    readOnlyRootFilesystem: true,
    hostPathMounts: [{ hostPath: '/var/run/ambient-lab', mountPath: '/var/run/ambient-lab', propagation: 'None' }],
    secretMounts: [],
    configMapMounts: [
      {
        configMapName: 'ambient-lab-mesh-root-cert',
        mountPath: '/var/run/secrets/ambient-lab/mesh-root-cert',
        defaultMode: 0o644,
      },
    ],
    tokenMounts: [
      { mountPath: '/var/run/secrets/tokens', path: 'istio-token', audience: 'istio-ca', expirationSeconds: 43200 },
    ],
  });
  // The proxy holds no root key: certificates from the CA, verified by the root certificate's ConfigMap.
  expect(l.proxy.env).toMatchObject({
    AMBIENT_LAB_CERTIFICATES: 'ca',
    AMBIENT_LAB_CA_ADDRESS: 'https://ambient-lab-ca.ambient-lab-system.svc:15012',
    AMBIENT_LAB_CA_ROOT: '/var/run/secrets/ambient-lab/mesh-root-cert/ca.crt',
    AMBIENT_LAB_TOKEN_FILE: '/var/run/secrets/tokens/istio-token',
  });
  expect(l.proxy.env['AMBIENT_LAB_CA_KEY']).toBeUndefined();
  // The CA Deployment: its own uid and group, no capabilities, the only mount of the root key.
  expect(l.ca).toMatchObject({
    uid: 1338,
    gid: 1338,
    caps: [],
    binary: 'node',
    program: 'bin/ambient-lab-ca.js',
    pod: { hostNetwork: false, serviceAccount: 'ambient-lab-ca', namespace: 'ambient-lab-system' },
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    secretMounts: [
      {
        secretName: 'ambient-lab-mesh-root',
        mountPath: '/var/run/secrets/ambient-lab/mesh-root',
        defaultMode: 0o440,
        readOnly: true,
      },
    ],
  });
  expect(l.ca.env).toMatchObject({
    AMBIENT_LAB_CA_CERT: '/var/run/secrets/ambient-lab/mesh-root/ca.crt',
    AMBIENT_LAB_CA_KEY: '/var/run/secrets/ambient-lab/mesh-root/ca.key',
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
    secretMounts: [],
  });
  // Its exit policy, as the container world's uninstall follows it (cni-installer-main.ts).
  expect(l.installCni.env['AMBIENT_LAB_UNINSTALL_ON_EXIT']).toBe('when-daemonset-gone');
  expect(l.installCni.hostPathMounts.map((m) => m.mountPath)).toEqual([
    '/host/opt/cni/bin',
    '/host/etc/cni/net.d',
    '/host/opt/ambient-lab',
    '/var/run/ambient-lab',
  ]);
  const escalation = editedRender((t) =>
    t.replace('allowPrivilegeEscalation: true', 'allowPrivilegeEscalation: false'),
  );
  expect(deploymentLaunch(escalation, { nodeName: 'n' }).proxy.allowPrivilegeEscalation).toBe(false);
  const bidirectional = editedRender((t) =>
    t.replace('mountPropagation: HostToContainer', 'mountPropagation: Bidirectional'),
  );
  expect(() => deploymentLaunch(bidirectional, { nodeName: 'n' })).toThrow(
    /mountPropagation "Bidirectional" is not followed/,
  );
  // a projected volume other than one service-account token cannot be followed
  const downward = editedRender((t) =>
    t.replace(/- serviceAccountToken:\n(\s+)audience: istio-ca/, '- downwardAPI:\n$1audience: istio-ca'),
  );
  expect(downward).not.toBe(renderDeployment(BASE));
  expect(() => deploymentLaunch(downward, { nodeName: 'n' })).toThrow(
    /volume istio-token: a projected volume is followed only as one serviceAccountToken/,
  );
  const emptyDir = editedRender((t) => t.replace(/configMap:\n(\s+)name: ambient-lab-mesh-root-cert/, 'emptyDir: {}'));
  expect(() => deploymentLaunch(emptyDir, { nodeName: 'n' })).toThrow(
    /volume mesh-root-cert is none of hostPath, secret, configMap or a projected token/,
  );
});

test("the rendered DaemonSets, as a lab creates them in its API: the installer's owner is one of them", () => {
  const rendered = renderDeployment(BASE);
  const sets = deploymentDaemonSets(rendered);
  expect(sets.map((d) => `${d.metadata.namespace}/${d.metadata.name}`)).toEqual([
    'ambient-lab-system/ambient-lab-agent',
    'ambient-lab-system/ambient-lab-proxy',
  ]);
  // The DaemonSet install-cni looks up at exit (when-daemonset-gone) is the one that runs it.
  const cni = deploymentLaunch(rendered, { nodeName: 'n' }).installCni;
  const { owner, uninstallOnExit } = installerSettings([...cni.programArgs], cni.env);
  expect(uninstallOnExit).toBe('when-daemonset-gone');
  expect(sets.map((d) => d.metadata)).toContainEqual(expect.objectContaining(owner));
  // The sim API takes them as they ship (the apps/v1 schema).
  const store = new ApiStore({ clock: new SystemClock(), random: new SeededRandom(1) });
  store.create('Namespace', { metadata: { name: 'ambient-lab-system' } });
  for (const d of sets) store.create('DaemonSet', d as never);
  expect(store.get('DaemonSet', owner.name, owner.namespace).metadata?.name).toBe('ambient-lab-agent');
});

test("the sim world's proxy pod and CA settings (PROXY_POD) are the manifests': namespace, service account, token audience and lifetime, the CA's trusted account", () => {
  const l = deploymentLaunch(renderDeployment(BASE), { nodeName: 'node-0' });
  expect(l.proxy.pod).toMatchObject({ namespace: PROXY_POD.namespace, serviceAccount: PROXY_POD.serviceAccount });
  expect(l.proxy.tokenMounts.map((m) => [m.audience, m.expirationSeconds])).toEqual([
    [PROXY_POD.tokenAudience, PROXY_POD.tokenSeconds],
  ]);
  expect(l.ca.env['AMBIENT_LAB_TRUSTED_NODE_ACCOUNTS']).toBe(`${PROXY_POD.namespace}/${PROXY_POD.serviceAccount}`);
});
