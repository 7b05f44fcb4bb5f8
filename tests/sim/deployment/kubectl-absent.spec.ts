/**
 * Without kubectl (or with one whose kustomize is too old) rendering deploy/ fails with a message
 * that says what is missing and how to get it, and kubectlAvailability gives the reason the
 * rendering tests skip with. Runs whether or not this machine has kubectl: PATH is a directory of
 * stand-ins.
 */
import { test, expect } from '@playwright/test';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { deployDir, kubectlAvailability, renderKustomization } from '../../../e2e/deployment/launch.js';

function withPath(bins: Record<string, string>, fn: (env: NodeJS.ProcessEnv) => void): void {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'al-nokubectl-'));
  try {
    for (const [name, script] of Object.entries(bins)) fs.writeFileSync(path.join(dir, name), script, { mode: 0o755 });
    fn({ PATH: dir });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

test('no kubectl: the reason and the render error name kubectl and how to install it', () => {
  withPath({}, (env) => {
    const k = kubectlAvailability(env);
    expect(k.ok).toBe(false);
    expect(k.reason).toMatch(/needs kubectl: kubectl is not on PATH; install kubectl >= 1\.27/);
    expect(k.reason).toContain("Debian bookworm's kubernetes-client package (1.20, kustomize 2) is too old");
    expect(() => renderKustomization(path.join(deployDir(), 'base'), env)).toThrow(
      /cannot render .*deploy\/base: kubectl is not on PATH; install kubectl/,
    );
  });
});

test("a kubectl whose kustomize cannot do components (Debian's 1.20) is not enough, and says which it has", () => {
  withPath(
    {
      kubectl: `#!/bin/sh\necho '{"clientVersion":{"gitVersion":"v1.20.2"},"kustomizeVersion":"v2.0.3"}'\n`,
    },
    (env) => {
      const k = kubectlAvailability(env);
      expect(k.ok).toBe(false);
      expect(k.reason).toMatch(/needs kustomize >= 4 \(components\) in kubectl; this kubectl has kustomize v2\.0\.3/);
    },
  );
});
