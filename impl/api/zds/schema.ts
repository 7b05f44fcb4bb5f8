/**
 * zds.proto (this folder) as a protobufjs JSON descriptor, so the codec needs no file I/O.
 * tests/sim/zds/codec.spec.ts parses zds.proto and checks it equals this descriptor.
 */
import type { INamespace } from 'protobufjs';

export const ZDS_PACKAGE = 'istio.workload.zds';

export const ZDS_SCHEMA: INamespace = {
  nested: {
    istio: {
      nested: {
        workload: {
          nested: {
            zds: {
              nested: {
                Version: { values: { NOT_USED: 0, V1: 1 } },
                ZdsHello: { fields: { version: { type: 'Version', id: 1 } } },
                WorkloadInfo: {
                  fields: {
                    name: { type: 'string', id: 1 },
                    namespace: { type: 'string', id: 2 },
                    service_account: { type: 'string', id: 3 },
                  },
                  reserved: [[4, 4], 'trust_domain'],
                },
                AddWorkload: {
                  fields: {
                    uid: { type: 'string', id: 1 },
                    workload_info: { type: 'WorkloadInfo', id: 2 },
                  },
                },
                KeepWorkload: { fields: { uid: { type: 'string', id: 1 } } },
                DelWorkload: { fields: { uid: { type: 'string', id: 2 } } },
                SnapshotSent: { fields: {} },
                Ack: { fields: { error: { type: 'string', id: 1 } } },
                WorkloadRequest: {
                  oneofs: { payload: { oneof: ['add', 'keep', 'del', 'snapshot_sent'] } },
                  fields: {
                    add: { type: 'AddWorkload', id: 1 },
                    keep: { type: 'KeepWorkload', id: 5 },
                    del: { type: 'DelWorkload', id: 2 },
                    snapshot_sent: { type: 'SnapshotSent', id: 3 },
                  },
                },
                WorkloadResponse: {
                  oneofs: { payload: { oneof: ['ack'] } },
                  fields: { ack: { type: 'Ack', id: 1 } },
                },
              },
            },
          },
        },
      },
    },
  },
};
