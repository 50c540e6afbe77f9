/** Checks of answers many suites share. */
import { expect } from 'vitest';
import type { TestResponse } from './test-kernel.ts';

/** A problem-details answer of `status`, naming `path` among its field errors when given. */
export function expectProblem(res: TestResponse, status: number, path?: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  if (path) expect(res.body.errors.map((e: { path: string }) => e.path)).toContain(path);
}

/** The events of a Server-Sent Events body, in order: [{event, data}] with each `data` parsed as JSON. */
export function sseEvents(text: string): { event: string; data: any }[] {
  return text
    .split('\n\n')
    .filter((block) => block.trim())
    .map((block) => ({ event: /^event: (.*)$/m.exec(block)?.[1] ?? 'message', data: JSON.parse(/^data: (.*)$/m.exec(block)?.[1] ?? 'null') }));
}
