/**
 * The plugin-event port: how the CNI plugin reaches the node agent on the same node, and how the
 * agent serves it. On Linux: HTTP over a Unix socket with restrictive permissions; in the sim:
 * in-memory delivery on the virtual clock with fault hooks. Types only.
 */
import type { PluginEvent, PluginEventReply } from '../api/plugin-event.js';

export interface PluginEventServeOptions {
  /** Largest accepted request body; larger requests are refused without being read further. */
  readonly maxBodyBytes: number;
  /** A request that takes longer than this to arrive is dropped. */
  readonly requestTimeoutMs: number;
}

export interface PluginEventServer {
  readonly address: string;
  close(): Promise<void>;
}

export type PluginEventHandler = (event: PluginEvent) => Promise<PluginEventReply>;

/** Failure to talk to the agent at all (as opposed to the agent answering with an error). */
export class PluginEventTransportError extends Error {
  constructor(
    readonly reason: 'unavailable' | 'timeout' | 'protocol',
    message: string,
  ) {
    super(message);
  }
}

export interface PluginEventTransport {
  serve(address: string, handler: PluginEventHandler, opts: PluginEventServeOptions): Promise<PluginEventServer>;
  /** Send one event; rejects with PluginEventTransportError when the agent cannot be reached in time. */
  send(address: string, event: PluginEvent, timeoutMs: number): Promise<PluginEventReply>;
}
