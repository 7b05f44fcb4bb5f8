/**
 * The enrollment settings the node agent and the CNI installer read from the same flags (or
 * AMBIENT_LAB_* variables), with the same defaults, so the agent and the plugin the installer
 * configures decide enrollment alike (impl/api/enrollment-config.ts, EnrollmentSettings):
 *   --exclude-namespaces a,b     (default kube-system; as upstream's excludeNamespaces: items trimmed, empty ones dropped)
 *   --system-namespace NS        (default ambient-lab-system; the DaemonSets pass their own namespace)
 *   --own-pod-prefixes p,q       (default ambient-lab-agent-,ambient-lab-proxy-: the mesh's own pods there)
 */
import { DEPLOYMENT_ENROLLMENT_SETTINGS, type EnrollmentSettings } from '../api/enrollment-config.js';
import { ConfigError, type ComponentFlags } from './component-main.js';

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const POD_NAME_PREFIX = /^[a-z0-9][-a-z0-9.]{0,252}$/;

export function enrollmentSettingsFromFlags(f: ComponentFlags, component: string): EnrollmentSettings {
  const d = DEPLOYMENT_ENROLLMENT_SETTINGS;
  const excludeNamespaces = f.list('exclude-namespaces', d.excludeNamespaces);
  for (const ns of excludeNamespaces) {
    if (!DNS1123_LABEL.test(ns))
      throw new ConfigError(
        `${component}: --exclude-namespaces: ${JSON.stringify(ns)} is not a namespace name (a DNS-1123 label)`,
      );
  }
  const systemNamespace = f.str('system-namespace', d.systemNamespace);
  if (!DNS1123_LABEL.test(systemNamespace))
    throw new ConfigError(
      `${component}: --system-namespace: ${JSON.stringify(systemNamespace)} is not a namespace name (a DNS-1123 label)`,
    );
  const ownPodPrefixes = f.list('own-pod-prefixes', d.ownPodPrefixes);
  for (const p of ownPodPrefixes) {
    if (!POD_NAME_PREFIX.test(p))
      throw new ConfigError(
        `${component}: --own-pod-prefixes: ${JSON.stringify(p)} is not the start of a pod name ([a-z0-9][-a-z0-9.]*)`,
      );
  }
  return { excludeNamespaces, systemNamespace, ownPodPrefixes };
}
