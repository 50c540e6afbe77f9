const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `probe` until `done` holds or `timeoutMs` passes (bounded); returns the last answer. */
export async function until<T>(probe: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last = await probe();
  while (!done(last) && Date.now() < deadline) {
    await sleep(50);
    last = await probe();
  }
  return last;
}
