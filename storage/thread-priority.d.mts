export const BACKGROUND_NICENESS: number;
export function lowerThreadPriority(niceness?: number): void;
