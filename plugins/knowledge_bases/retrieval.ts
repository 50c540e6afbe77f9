/** Cosine similarity of two vectors of the same length (0 when either is all zeros). */
export function cosine(a: number[], b: number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return na && nb ? dot / Math.sqrt(na * nb) : 0;
}

/** The constant of reciprocal rank fusion (Cormack, Clarke and Büttcher, 2009): 60, as most engines use. */
export const RRF_K = 60;

/** Several rankings of ids fused by reciprocal rank: each id scores Σ 1 / (RRF_K + rank), best first. */
export function reciprocalRankFusion(rankings: number[][]): { id: number; score: number }[] {
  const scores = new Map<number, number>();
  for (const ranking of rankings) ranking.forEach((id, index) => scores.set(id, (scores.get(id) ?? 0) + 1 / (RRF_K + index + 1)));
  return [...scores].map(([id, score]) => ({ id, score })).sort((a, b) => b.score - a.score || a.id - b.id);
}

const EXCERPT_CHARS = 300;

/** A passage as a source cites it: its first EXCERPT_CHARS characters. */
export const excerpt = (text: string) => (text.length > EXCERPT_CHARS ? `${text.slice(0, EXCERPT_CHARS).trimEnd()}…` : text);
