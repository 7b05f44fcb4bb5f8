/**
 * The ZDS messages in our vocabulary. The wire form (protobuf, istio.workload.zds) lives in
 * schema.ts and codec.ts; these are what the server and client state machines handle.
 *
 * Direction: the node proxy sends a hello and then one response per request; the node agent
 * sends requests. The netns handle of an Add travels beside the message (SCM_RIGHTS on Linux),
 * not in it, so it is not part of these types.
 */
import type { PodUid } from '../ids.js';

/** ZdsHello.version. Unknown enum values are kept as numbers (proto3 open enums). */
export const ZDS_VERSION = { NOT_USED: 0, V1: 1 } as const;

export interface ZdsHello {
  readonly version: number;
}

/** Identity hints for a workload; the proxy serves the netns as this workload. */
export interface WorkloadInfo {
  readonly name: string;
  readonly namespace: string;
  readonly serviceAccount: string;
}

/** Agent -> proxy: the WorkloadRequest oneof. */
export type WorkloadRequest =
  /** Enroll: must come with exactly one netns handle. Same uid + same netns = no-op. */
  | { readonly kind: 'add'; readonly uid: PodUid; readonly info: WorkloadInfo }
  /** Snapshot only: keep the pod if the proxy has it (the agent lost its netns handle). */
  | { readonly kind: 'keep'; readonly uid: PodUid }
  /** Remove the pod's proxy at once. */
  | { readonly kind: 'del'; readonly uid: PodUid }
  /** End of the snapshot: drop every pod not named in it. */
  | { readonly kind: 'snapshot-sent' };

export type WorkloadRequestKind = WorkloadRequest['kind'];

/** Proxy -> agent: the WorkloadResponse oneof (only Ack exists). Empty error = ACK, else NACK. */
export interface WorkloadResponse {
  readonly kind: 'ack';
  readonly error: string;
}

/** What the proxy may send: the hello first, then responses. */
export type ProxyMessage =
  | { readonly type: 'hello'; readonly hello: ZdsHello }
  | { readonly type: 'response'; readonly response: WorkloadResponse };

/** Upstream reads each datagram into a 1024-byte buffer and rejects longer ones; so do we. */
export const ZDS_MAX_FRAME_BYTES = 1024;
