import { HttpProblem } from '../problem.ts';

/** How the JSON body parser (co-body, through @hapi/bourne) refuses a body holding a `__proto__` key. */
const PROTOTYPE_KEY_REFUSED = 'Object contains forbidden prototype property';
/** Paths named in one answer at most (a body may hold the key thousands of times). */
const MAX_PATHS = 100;

/**
 * The 400 for a JSON body refused by the parser for a `__proto__` key (copied onto an object, it
 * would set that object's prototype), naming where each is (`body.__proto__`,
 * `body.rows.0.__proto__`); null for any other error. The parser keeps the body's text on its
 * error: JSON.parse reads it again, making every `__proto__` an own key, found breadth-first.
 */
export function prototypeKeyProblem(err: unknown): HttpProblem | null {
  const { message, body } = err as { message?: unknown; body?: unknown };
  if (message !== PROTOTYPE_KEY_REFUSED || typeof body !== 'string') return null;
  const found: string[] = [];
  const queue: [unknown, string][] = [[JSON.parse(body), 'body']];
  for (let next = 0; next < queue.length && found.length < MAX_PATHS; next += 1) {
    const [value, path] = queue[next];
    if (typeof value !== 'object' || value === null) continue;
    for (const [key, item] of Object.entries(value)) {
      if (key === '__proto__') found.push(`${path}.__proto__`);
      queue.push([item, `${path}.${key}`]);
    }
  }
  const errors = found.map((path) => ({ path, message: 'a key named __proto__ is not accepted' }));
  return new HttpProblem(400, `a key named __proto__ is not accepted in a request body: ${found.slice(0, 5).join(', ')}`, { errors });
}
