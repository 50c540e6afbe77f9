// The worker thread that scores rows with trained versions (the main side is prediction-thread.ts).
// Plain JavaScript: it runs before any TypeScript loader exists, registers tsx (a worker does not
// inherit the server's `--import tsx`), then predicts with learn.ts. Messages, in the order the main
// side sent them: `{load, artifact}` loads a version from its artifact's JSON text, parsed here, off
// the main thread (kept with the others it loaded; the oldest go past PREDICTORS_MAX),
// `{id, versionId, rows}` scores rows and answers `{id, result}`, `{id, error}` or `{id, missing}`
// for a version it does not hold (let go, or never sent).
import { parentPort } from 'node:worker_threads';
import { register as registerTypeScript } from 'tsx/esm/api';

const PREDICTORS_MAX = 32;

registerTypeScript();
const { predictorOf, predictWith } = await import('./learn.ts');
const loaded = new Map();

parentPort.on('message', (message) => {
  if (message.load !== undefined) {
    if (loaded.has(message.load)) return;
    if (loaded.size >= PREDICTORS_MAX) loaded.delete(loaded.keys().next().value);
    try {
      const artifact = JSON.parse(message.artifact);
      loaded.set(message.load, { artifact, predictor: predictorOf(artifact) });
    } catch {
      // Not kept: the calls of that version answer `missing`, and the main side sends it again.
    }
    return;
  }
  const { id, versionId, rows } = message;
  const version = loaded.get(versionId);
  if (!version) return parentPort.postMessage({ id, missing: true });
  try {
    parentPort.postMessage({ id, result: predictWith(version.artifact, version.predictor, rows) });
  } catch (err) {
    parentPort.postMessage({ id, error: err instanceof Error ? err.message : String(err) });
  }
});
