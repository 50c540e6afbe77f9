/** Past this many characters without a sentence's end, the text is released at its last space. */
const MAX_HELD_CHARS = 1_000;
/** The end of a sentence or a line: none of the detected kinds (an address, a number, an IBAN) spans one. */
const BOUNDARY = /(?:[.!?](?=\s)|\n)\s*/g;

/**
 * Holds a streamed answer back to whole sentences, so each piece the answer guardrails check holds
 * whole values: an e-mail address or a card number split across two deltas is seen whole.
 */
export class SentenceRelease {
  private held = '';

  /** Adds a delta; answers the text now whole enough to check and pass on ('' while none is). */
  push(delta: string): string {
    this.held += delta;
    let cut = 0;
    for (const match of this.held.matchAll(BOUNDARY)) cut = match.index + match[0].length;
    if (cut === 0 && this.held.length > MAX_HELD_CHARS) cut = this.held.lastIndexOf(' ') + 1;
    const released = this.held.slice(0, cut);
    this.held = this.held.slice(cut);
    return released;
  }

  /** What is still held, at the end of the stream. */
  flush(): string {
    const rest = this.held;
    this.held = '';
    return rest;
  }
}
