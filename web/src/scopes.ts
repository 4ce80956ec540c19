// Scope arithmetic the console needs: satisfaction with a trailing star,
// and the intersection of two scope sets (what both grant), as
// Taskcluster's scope library defines them.

/** satisfies reports whether holding have grants want. */
export function satisfies(have: string, want: string): boolean {
  return have === want || (have.endsWith('*') && want.startsWith(have.slice(0, -1)));
}

/**
 * scopeIntersection returns the scopes granted by both a and b, without
 * scopes another in the result already grants, sorted.
 */
export function scopeIntersection(a: string[], b: string[]): string[] {
  const both = new Set<string>();
  for (const s of a) if (b.some((h) => satisfies(h, s))) both.add(s);
  for (const s of b) if (a.some((h) => satisfies(h, s))) both.add(s);
  const all = [...both];
  return all.filter((s) => !all.some((o) => o !== s && satisfies(o, s))).sort();
}

const UNITS: [RegExp, (d: Date, n: number) => void][] = [
  [/^y(ears?|rs?)?$/, (d, n) => d.setUTCFullYear(d.getUTCFullYear() + n)],
  [/^mo(nths?)?$/, (d, n) => d.setUTCMonth(d.getUTCMonth() + n)],
  [/^w(eeks?|ks?)?$/, (d, n) => d.setTime(d.getTime() + n * 7 * 86400e3)],
  [/^d(ays?)?$/, (d, n) => d.setTime(d.getTime() + n * 86400e3)],
  [/^h(ours?|rs?)?$/, (d, n) => d.setTime(d.getTime() + n * 3600e3)],
  [/^m(in(utes?)?)?$/, (d, n) => d.setTime(d.getTime() + n * 60e3)],
  [/^s(ec(onds?)?)?$/, (d, n) => d.setTime(d.getTime() + n * 1e3)],
];

/**
 * fromNow reads a relative time as Taskcluster's clients write it ("1d",
 * "2 hours", "-1 year 3 days") and returns that time from now, or null if
 * the text is not one.
 */
export function fromNow(text: string, now = new Date()): Date | null {
  let rest = text.trim();
  let sign = 1;
  if (rest.startsWith('-') || rest.startsWith('+')) {
    sign = rest[0] === '-' ? -1 : 1;
    rest = rest.slice(1).trim();
  }
  if (!rest) return null;
  const d = new Date(now.getTime());
  const part = /^(\d+)\s*([a-z]+)\s*/i;
  while (rest) {
    const m = part.exec(rest);
    if (!m) return null;
    const unit = UNITS.find(([re]) => re.test(m[2].toLowerCase()));
    if (!unit) return null;
    unit[1](d, sign * Number(m[1]));
    rest = rest.slice(m[0].length);
  }
  return d;
}

/**
 * cliCallbackAllowed says whether a sign-in may hand credentials to url:
 * only a server on this machine (`taskcluster signin` listens on
 * localhost), as Taskcluster's own console allows.
 */
export function cliCallbackAllowed(url: string): boolean {
  return /^https?:\/\/localhost(:[0-9]+)?(\/|$)/.test(url);
}

/**
 * cliClientId names the client a CLI sign-in creates: the signed-in
 * client's id, then the name asked for. A configured client's "static/"
 * prefix is left out, since clients under it cannot be created.
 */
export function cliClientId(signedIn: string, name: string): string {
  return `${signedIn.replace(/^static\//, '')}/${name}`;
}
