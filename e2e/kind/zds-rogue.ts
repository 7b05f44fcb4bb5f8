/**
 * The rogue ZDS client of World.zdsClient, as a script for `node -e` run in a node's host-probe
 * pod under setpriv (the attacker's uid, no capabilities): connect to the agent's ZDS socket,
 * say hello as the node proxy does, ack whatever comes (Adds carry a pod netns fd, closed at
 * once), and after a moment print one JSON line — a ZdsClientAttempt. It uses the image's own
 * codec and native addon, so it speaks exactly the proxy's protocol.
 */
import type { ZdsClientAttempt } from '../../scenarios/world.js';

/** The ZDS socket on a node (the agent's default --zds-socket; the host-probe pod mounts its directory). */
export const NODE_ZDS_SOCKET = '/var/run/ambient-lab/zds/zds.sock';

/** `appRoot` holds dist/ and build/Release/ (the image's /app). */
export function zdsRogueScript(socket: string, appRoot = '/app', listenMs = 1500): string {
  return `
const out = (o) => { process.stdout.write(JSON.stringify(o) + '\\n'); process.exit(0); };
(async () => {
  const { encodeHello, encodeResponse } = await import(${JSON.stringify(`${appRoot}/dist/impl/api/zds/codec.js`)});
  const addon = require(${JSON.stringify(`${appRoot}/build/Release/ambient_lab_sockets.node`)});
  const fd = addon.seqpacketSocket();
  try { addon.unixConnect(fd, ${JSON.stringify(socket)}); } catch (e) { return out({ accepted: false, workloads: 0, detail: 'connect: ' + e.code }); }
  try { addon.seqpacketSend(fd, encodeHello({ version: 1 }), null); } catch (e) { return out({ accepted: false, workloads: 0, detail: 'hello: ' + e.code + ' (rejected)' }); }
  let frames = 0, workloads = 0;
  const started = Date.now();
  const poll = () => {
    let r = null;
    // A server that closes with our hello unread makes the kernel answer ECONNRESET, not EOF: the same rejection.
    try { r = addon.seqpacketRecv(fd, 65536); } catch (e) { return out({ accepted: frames > 0, workloads, detail: 'recv: ' + e.code + ' after ' + frames + ' frame(s)' + (frames === 0 && e.code === 'ECONNRESET' ? ' (rejected)' : '') }); }
    if (r !== null) {
      if (r.eof) return out({ accepted: frames > 0, workloads, detail: frames > 0 ? 'served ' + frames + ' frame(s), then closed' : 'closed without a word (rejected)' });
      frames++;
      workloads += r.fds.length;
      for (const f of r.fds) addon.close(f);
      try { addon.seqpacketSend(fd, encodeResponse({ kind: 'ack', error: '' }), null); } catch { /* the agent hung up; the next recv says so */ }
    }
    if (Date.now() - started > ${listenMs}) return out({ accepted: frames > 0, workloads, detail: 'accepted as the node proxy: ' + frames + ' frame(s), ' + workloads + ' pod netns handle(s)' });
    setTimeout(poll, 10);
  };
  poll();
})().catch((e) => out({ accepted: false, workloads: 0, detail: 'rogue client failed: ' + e.message }));
`;
}

/** The script's JSON line (the last line of its output that parses as an attempt). */
export function parseZdsRogueOutput(stdout: string): ZdsClientAttempt {
  for (const line of stdout.trim().split('\n').reverse()) {
    try {
      const o = JSON.parse(line) as Partial<ZdsClientAttempt>;
      if (typeof o.accepted === 'boolean' && typeof o.workloads === 'number' && typeof o.detail === 'string')
        return { accepted: o.accepted, workloads: o.workloads, detail: o.detail };
    } catch {
      // not the script's line
    }
  }
  throw new Error(`the rogue ZDS client printed no result: ${stdout.trim().slice(0, 300) || '(nothing)'}`);
}
