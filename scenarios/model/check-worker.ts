/**
 * Worker thread of `check`: takes tasks one at a time from the main thread (a shared queue, so
 * a slow cell does not hold back the others), runs them, and reports progress and results.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { runTask, type Task, type TaskEnv } from './tasks.js';

const port = parentPort;
if (!port) throw new Error('check-worker.js runs only as a worker thread of `ambient-lab check`');
const env = workerData as TaskEnv;

port.on('message', (msg: { task?: Task; stop?: true }) => {
  if (msg.stop) {
    port.close();
    return;
  }
  const task = msg.task;
  if (!task) return;
  let pending = 0;
  // Progress in small batches: one message per history would flood the channel.
  const flush = (): void => {
    if (pending > 0) port.postMessage({ runs: pending });
    pending = 0;
  };
  const timer = setInterval(flush, 100);
  void runTask(task, env, () => {
    pending++;
  }).then(
    (result) => {
      clearInterval(timer);
      flush();
      port.postMessage({ result: JSON.parse(JSON.stringify(result)) as unknown });
    },
    (e: unknown) => {
      clearInterval(timer);
      flush();
      port.postMessage({ failed: e instanceof Error ? e.message : String(e) });
    },
  );
});
