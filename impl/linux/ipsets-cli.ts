/**
 * Real adapter of the HostIpSets port: the `ipset` tool, run in this process's own network
 * namespace (the agent runs in the node's host netns, and ipsets are per network namespace).
 * Set names and members are validated before they reach argv; no shell is involved.
 */
import { execFile } from 'node:child_process';
import type { HostIpSets, IpSetSpec } from '../host/ipsets.js';

const SET_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,30}$/;
const IP = /^[0-9a-fA-F.:]{2,45}$/;
const COMMENT = /^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$/;

function check(what: string, v: string, re: RegExp): void {
  if (!re.test(v)) throw new Error(`ipset: invalid ${what} ${JSON.stringify(v)}`);
}

export class CliHostIpSets implements HostIpSets {
  constructor(
    private readonly bin = 'ipset',
    private readonly timeoutMs = 10_000,
  ) {}

  private run(args: readonly string[]): Promise<string> {
    return new Promise((resolve, reject) => {
      execFile(this.bin, args, { timeout: this.timeoutMs }, (err, stdout, stderr) => {
        if (err)
          reject(
            new Error(
              `\`ipset ${args.join(' ')}\` failed: ${stderr.trim() || err.message}; is the ipset tool installed and the ip_set module available?`,
            ),
          );
        else resolve(stdout);
      });
    });
  }

  async ensure(set: IpSetSpec): Promise<void> {
    check('set name', set.name, SET_NAME);
    await this.run([
      'create',
      set.name,
      'hash:ip',
      'family',
      set.family === 'ipv6' ? 'inet6' : 'inet',
      'comment',
      '-exist',
    ]);
  }

  async add(set: string, ip: string, comment: string): Promise<void> {
    check('set name', set, SET_NAME);
    check('address', ip, IP);
    check('comment', comment, COMMENT);
    // Replace: delete first (absent is fine), so the comment is the new owner's.
    await this.run(['del', set, ip, '-exist']);
    await this.run(['add', set, ip, 'comment', comment, '-exist']);
  }

  async remove(set: string, ip: string, comment: string): Promise<void> {
    const cur = (await this.list(set)).find((m) => m.ip === ip);
    if (cur && cur.comment === comment) await this.run(['del', set, ip, '-exist']);
  }

  async list(set: string): Promise<readonly { readonly ip: string; readonly comment: string }[]> {
    check('set name', set, SET_NAME);
    const out = await this.run(['save', set]);
    const members: { ip: string; comment: string }[] = [];
    for (const line of out.split('\n')) {
      const m = /^add (\S+) (\S+)(?: comment "([^"]*)")?/.exec(line);
      if (m && m[1] === set) members.push({ ip: m[2]!, comment: m[3] ?? '' });
    }
    return members;
  }
}
