// The worker thread that trains one model version (the main side is training-thread.ts). Plain
// JavaScript: it runs before any TypeScript loader exists, registers tsx (a worker does not
// inherit the server's `--import tsx`), then trains with learn.ts and posts the result as JSON
// text (the libraries' models hold class instances that structured cloning would strip).
import { parentPort, workerData } from 'node:worker_threads';
import { register as registerTypeScript } from 'tsx/esm/api';
import { lowerThreadPriority } from '../../storage/thread-priority.mjs';

// Training gives way to the request path when the CPU is short.
lowerThreadPriority();
registerTypeScript();
const { train } = await import('./learn.ts');
try {
  parentPort.postMessage({ ok: true, result: JSON.stringify(train(workerData)) });
} catch (err) {
  parentPort.postMessage({ ok: false, error: err instanceof Error ? err.message : String(err) });
}
