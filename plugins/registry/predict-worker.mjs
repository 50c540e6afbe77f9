// The worker thread that scores rows with trained versions (the main side is prediction-thread.ts).
// Plain JavaScript: it runs before any TypeScript loader exists, registers tsx (a worker does not
// inherit the server's `--import tsx`), then predicts with learn.ts. It keeps the versions it loaded
// (the oldest go past PREDICTORS_MAX) and answers `missing` for one it does not hold, which the main
// side then sends with its artifact.
import { parentPort } from 'node:worker_threads';
import { register as registerTypeScript } from 'tsx/esm/api';

const PREDICTORS_MAX = 32;

registerTypeScript();
const { predictorOf, predictWith } = await import('./learn.ts');
const loaded = new Map();

parentPort.on('message', ({ id, versionId, artifact, rows }) => {
  try {
    if (artifact) {
      if (loaded.size >= PREDICTORS_MAX) loaded.delete(loaded.keys().next().value);
      loaded.set(versionId, { artifact, predictor: predictorOf(artifact) });
    }
    const version = loaded.get(versionId);
    if (!version) return parentPort.postMessage({ id, missing: true });
    parentPort.postMessage({ id, result: predictWith(version.artifact, version.predictor, rows) });
  } catch (err) {
    parentPort.postMessage({ id, error: err instanceof Error ? err.message : String(err) });
  }
});
