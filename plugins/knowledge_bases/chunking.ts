/** A passage of a document: its text and where it starts (characters from the document's start). */
export interface Chunk {
  position: number;
  text: string;
}

/**
 * Cuts a text into passages of at most `size` characters, each starting `overlap` characters before
 * the previous one ended, cut where the text breaks best: at a paragraph, else a line, else a
 * sentence, else a space, in the last part of the window (a word is cut only when it is longer than
 * a passage). Passages of whitespace only are dropped.
 */
export function chunkText(text: string, size: number, overlap: number): Chunk[] {
  const chunks: Chunk[] = [];
  let start = 0;
  while (start < text.length) {
    let end = Math.min(start + size, text.length);
    if (end < text.length) end = bestBreak(text, start, end, size);
    const piece = text.slice(start, end);
    const lead = piece.length - piece.trimStart().length;
    if (piece.trim()) chunks.push({ position: start + lead, text: piece.trim() });
    if (end >= text.length) break;
    start = Math.max(end - overlap, start + 1);
    // Start the next passage at a word, not inside one.
    while (start < end && /\S/.test(text[start - 1] ?? ' ') && /\S/.test(text[start])) start++;
  }
  return chunks;
}

/** Where to end a window [start, end): the last paragraph, line, sentence or word break in its last 40 %. */
function bestBreak(text: string, start: number, end: number, size: number): number {
  const from = start + Math.floor(size * 0.6);
  const window = text.slice(from, end);
  for (const pattern of [/\n\s*\n/g, /\n/g, /[.!?](?=\s)/g, /\s/g]) {
    let last = -1;
    for (const match of window.matchAll(pattern)) last = match.index + match[0].length;
    if (last > 0) return from + last;
  }
  return end;
}
