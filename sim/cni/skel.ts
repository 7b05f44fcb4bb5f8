/**
 * The exec-protocol frame every sim plugin shares (the reference plugins' `skel` package): check
 * the environment for the command, decode stdin, refuse an unsupported cniVersion (code 1),
 * dispatch, and turn any failure into error JSON on stdout with exit code 1. Untyped failures
 * get code 999 as libcni's types.ErrInternal, which is what the Debian binaries print.
 *
 * Two entries, one dispatch: exec (the protocol's text: stdin JSON in, stdout JSON out) and
 * call (an in-process runtime hands over the derived configuration and takes the result as
 * values, skipping the JSON encode/decode on both sides). Both check the environment and the
 * configuration the same way, and a failure is error JSON in an exec output on both.
 */
import {
  CNI_ERR_INTERNAL,
  CniError,
  CniErrorCode,
  execFailure,
  parseCniEnv,
  parseNetConf,
  type CniEnv,
  type CniExecRequest,
  type CniNetConf,
  type CniResult,
} from '../../impl/api/cni.js';
import { execOutputOf, type CniCallOutcome, type CniCallRequest, type InProcessCniPlugin } from './chain.js';

/** Spec versions the reference plugins of Debian bookworm (1.1.1) support. */
const REFERENCE_PLUGIN_VERSIONS: readonly string[] = ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0'];

/** How a plugin was invoked; a plugin that delegates (bridge → IPAM) delegates the same way. */
export type CniInvocationMode = 'exec' | 'in-process';

interface SkelCommands {
  readonly supportedVersions?: readonly string[];
  /** `conf` is read-only (in process it is the runtime's own object; its prevResult is frozen). */
  add(env: CniEnv, conf: CniNetConf, mode: CniInvocationMode): Promise<CniResult>;
  del(env: CniEnv, conf: CniNetConf, mode: CniInvocationMode): Promise<void>;
  check(env: CniEnv, conf: CniNetConf, mode: CniInvocationMode): Promise<void>;
}

export function skelPlugin(cmds: SkelCommands): InProcessCniPlugin {
  const supported = cmds.supportedVersions ?? REFERENCE_PLUGIN_VERSIONS;
  const dispatch = async (
    rawEnv: CniExecRequest['env'],
    stdin: string | unknown,
    mode: CniInvocationMode,
  ): Promise<CniCallOutcome> => {
    let version = supported[supported.length - 1] ?? '1.0.0';
    try {
      const env = parseCniEnv(rawEnv);
      if (env.command === 'VERSION')
        return { kind: 'value', value: { cniVersion: version, supportedVersions: [...supported] } };
      if (env.command === 'STATUS' || env.command === 'GC') {
        throw new CniError(
          CniErrorCode.InvalidEnvironment,
          `unknown CNI_COMMAND: ${env.command}`,
          `this plugin implements spec ${supported.join(', ')}`,
        );
      }
      const conf = parseNetConf(stdin);
      version = conf.cniVersion;
      if (!supported.includes(conf.cniVersion)) {
        throw new CniError(
          CniErrorCode.IncompatibleVersion,
          'incompatible CNI versions',
          `config is "${conf.cniVersion}", plugin supports [${supported.map((v) => `"${v}"`).join(' ')}]`,
        );
      }
      switch (env.command) {
        case 'ADD':
          return { kind: 'value', value: await cmds.add(env, conf, mode) };
        case 'DEL':
          await cmds.del(env, conf, mode);
          return { kind: 'empty' };
        case 'CHECK':
          await cmds.check(env, conf, mode);
          return { kind: 'empty' };
      }
    } catch (e) {
      const err =
        e instanceof CniError ? e : new CniError(CNI_ERR_INTERNAL, e instanceof Error ? e.message : String(e));
      return { kind: 'output', output: execFailure(err, version) };
    }
  };
  return {
    async exec(req) {
      return execOutputOf(await dispatch(req.env, req.stdin, 'exec'));
    },
    call(req: CniCallRequest) {
      return dispatch(req.env, req.conf, 'in-process');
    },
  };
}
