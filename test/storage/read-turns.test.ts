import { describe, expect, it } from 'vitest';
import { ReadTurns } from '../../storage/read-turns.ts';

/** Lets every settled promise's callbacks run. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('turns of long reads', () => {
  it('bounds one organization, so another still gets a turn while the first waits', async () => {
    const turns = new ReadTurns(3, 2);
    const started: string[] = [];
    const take = (orgId: number, name: string) => turns.take(orgId).then((giveBack) => (started.push(name), giveBack));
    const [a1, a2] = await Promise.all([take(1, 'a1'), take(1, 'a2')]);
    const a3 = take(1, 'a3');
    const b1 = take(2, 'b1');
    await settle();
    // Organization 1 is at its bound: its third read waits, organization 2's starts.
    expect(started).toEqual(['a1', 'a2', 'b1']);
    a1();
    await settle();
    expect(started).toEqual(['a1', 'a2', 'b1', 'a3']);
    a2();
    (await a3)();
    (await b1)();
  });

  it('gives freed turns to organizations one after another, each in arrival order', async () => {
    const turns = new ReadTurns(1, 1);
    const started: string[] = [];
    const giveBacks = new Map<string, () => void>();
    const take = (orgId: number, name: string) => turns.take(orgId).then((giveBack) => (started.push(name), giveBacks.set(name, giveBack)));
    await take(1, 'a1');
    const waiting = Promise.all([take(1, 'a2'), take(1, 'a3'), take(2, 'b1'), take(3, 'c1')]);
    await settle();
    expect(started).toEqual(['a1']);
    for (let i = 0; i < 4; i += 1) {
      const giveBack = giveBacks.get(started.at(-1)!)!;
      giveBack();
      // A turn given back twice counts once: no second read starts.
      giveBack();
      await settle();
      expect(started).toHaveLength(i + 2);
    }
    await waiting;
    expect(started).toEqual(['a1', 'a2', 'b1', 'c1', 'a3']);
  });
});
