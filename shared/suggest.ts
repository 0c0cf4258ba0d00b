// "Did you mean": the known name closest to a misspelt one, when it is close
// enough to be a slip (at most two edits, and fewer than the name's length).
export function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min(
        (prev[j] ?? 0) + 1,
        (cur[j - 1] ?? 0) + 1,
        (prev[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    prev = cur;
  }
  return prev[b.length] ?? 0;
}

// Case, "-" for "_" and edit distance; the closest wins, the first on a tie.
export function closest(name: string, candidates: readonly string[]): string | undefined {
  const key = name.toLowerCase().replace(/-/g, '_');
  let best: { c: string; d: number } | undefined;
  for (const c of candidates) {
    const d = c === key ? 0 : editDistance(key, c.toLowerCase().replace(/-/g, '_'));
    if (d <= 2 && d < key.length && (!best || d < best.d)) best = { c, d };
  }
  return best?.c;
}

// ' (did you mean "x"?)', or nothing.
export function didYouMean(name: string, candidates: readonly string[]): string {
  const c = closest(name, candidates);
  return c === undefined ? '' : ` (did you mean "${c}"?)`;
}
