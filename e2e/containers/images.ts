/**
 * The container world's images, built offline on this machine (tools/images.ts: a debootstrap
 * base with Node 20, then ci/node.Dockerfile, ci/agent.Dockerfile, ci/proxy.Dockerfile and ci/ca.Dockerfile FROM it)
 * or reused when their inputs are unchanged (the tags are hashes of the inputs).
 */
import { buildLocalImages } from '../../tools/images.js';

/**
 * Builds what is missing and returns the tags. Throws with the reason (naming the Debian package
 * to install: docker.io, debootstrap) when Docker or debootstrap is unavailable. Concurrent
 * callers, in this process or others, wait for one build.
 */
export async function localImages(opts?: {
  log?: (line: string) => void;
}): Promise<{ readonly node: string; readonly agent: string; readonly proxy: string; readonly ca: string }> {
  inFlight ??= buildLocalImages(opts?.log ? { log: opts.log } : {}).catch((e: unknown) => {
    inFlight = undefined; // a failed build is tried again by the next caller
    throw e;
  });
  const { node, agent, proxy, ca } = await inFlight;
  return { node, agent, proxy, ca };
}

let inFlight: ReturnType<typeof buildLocalImages> | undefined;
