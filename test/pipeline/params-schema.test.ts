import { describe, expect, it } from 'vitest';
import { compileParams } from '../../kernel/json-schema.ts';

// Recipe and step types' parameter schemas share one ajv instance: what one plugin compiles must not leak into another's.
describe('parameter schemas of contributions', () => {
  it('compiles two schemas of different plugins with the same $id, each checking its own way', () => {
    const counts = compileParams('recipe type "a"', { $id: 'https://example.test/params', type: 'object', properties: { n: { type: 'integer' } } });
    const names = compileParams('recipe type "b"', { $id: 'https://example.test/params', type: 'object', properties: { n: { type: 'string' } } });
    expect(counts({ n: 1 }, 'body.params')).toEqual([]);
    expect(names({ n: 'x' }, 'body.params')).toEqual([]);
    expect(names({ n: 1 }, 'body.params')).toEqual([{ path: 'body.params.n', message: 'must be string' }]);
  });

  it('refuses an invalid schema naming the contribution', () => {
    expect(() => compileParams('step type "broken"', { type: 'no-such-type' })).toThrow(/^step type "broken": params is not a valid JSON Schema/);
  });
});
