/**
 * The exec-protocol frame every sim plugin shares (the reference plugins' `skel` package): check
 * the environment for the command, decode stdin, refuse an unsupported cniVersion (code 1),
 * dispatch, and turn any failure into error JSON on stdout with exit code 1. Untyped failures
 * get code 999 as libcni's types.ErrInternal, which is what the Debian binaries print.
 */
import {
  CNI_ERR_INTERNAL,
  CniError,
  CniErrorCode,
  execFailure,
  execSuccess,
  parseCniEnv,
  parseNetConf,
  type CniEnv,
  type CniExecOutput,
  type CniExecRequest,
  type CniNetConf,
  type CniPlugin,
  type CniResult,
} from '../../impl/api/cni.js';

/** Spec versions the reference plugins of Debian bookworm (1.1.1) support. */
export const REFERENCE_PLUGIN_VERSIONS: readonly string[] = ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0'];

export interface SkelCommands {
  readonly supportedVersions?: readonly string[];
  add(env: CniEnv, conf: CniNetConf): Promise<CniResult>;
  del(env: CniEnv, conf: CniNetConf): Promise<void>;
  check(env: CniEnv, conf: CniNetConf): Promise<void>;
}

export function skelPlugin(cmds: SkelCommands): CniPlugin {
  const supported = cmds.supportedVersions ?? REFERENCE_PLUGIN_VERSIONS;
  return {
    async exec(req: CniExecRequest): Promise<CniExecOutput> {
      let version = supported[supported.length - 1] ?? '1.0.0';
      try {
        const env = parseCniEnv(req.env);
        if (env.command === 'VERSION') return execSuccess({ cniVersion: version, supportedVersions: [...supported] });
        if (env.command === 'STATUS' || env.command === 'GC') {
          throw new CniError(CniErrorCode.InvalidEnvironment, `unknown CNI_COMMAND: ${env.command}`, `this plugin implements spec ${supported.join(', ')}`);
        }
        const conf = parseNetConf(req.stdin);
        version = conf.cniVersion;
        if (!supported.includes(conf.cniVersion)) {
          throw new CniError(CniErrorCode.IncompatibleVersion, 'incompatible CNI versions',
            `config is "${conf.cniVersion}", plugin supports [${supported.map((v) => `"${v}"`).join(' ')}]`);
        }
        switch (env.command) {
          case 'ADD':
            return execSuccess(await cmds.add(env, conf));
          case 'DEL':
            await cmds.del(env, conf);
            return { exitCode: 0, stdout: '', stderr: '' };
          case 'CHECK':
            await cmds.check(env, conf);
            return { exitCode: 0, stdout: '', stderr: '' };
        }
      } catch (e) {
        const err = e instanceof CniError ? e : new CniError(CNI_ERR_INTERNAL, e instanceof Error ? e.message : String(e));
        return execFailure(err, version);
      }
    },
  };
}
