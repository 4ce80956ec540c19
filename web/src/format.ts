// Formatting of times and durations, in the viewer's local time, which
// every time names (a time without its zone is read wrong by half the team).

/** zoneName is the short name of the viewer's time zone at d ("UTC", "CET", "GMT+2"). */
export function zoneName(d: Date, timeZone?: string): string {
  const part = new Intl.DateTimeFormat('en-US', { timeZoneName: 'short', timeZone }).formatToParts(d).find((x) => x.type === 'timeZoneName');
  return part?.value ?? '';
}

export function fmtTime(iso?: string, timeZone?: string): string {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const p = (n: number) => String(n).padStart(2, '0');
  if (timeZone) {
    const f = Object.fromEntries(new Intl.DateTimeFormat('en-CA', { timeZone, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit' })
      .formatToParts(d).map((x) => [x.type, x.value]));
    return `${f.year}-${f.month}-${f.day} ${f.hour}:${f.minute}:${f.second} ${zoneName(d, timeZone)}`;
  }
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())} ${zoneName(d)}`;
}

export function fmtDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  const h = Math.floor(m / 60);
  return `${h} h ${m % 60} min`;
}

export function since(iso?: string, now = Date.now()): string {
  if (!iso) return '';
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return '';
  return fmtDuration(now - t) + ' ago';
}

/**
 * count says "1 task", "2 tasks", "0 tasks": a number with its noun, which
 * takes its plural (given, or the noun and "s") unless the number is one.
 */
export function count(n: number, noun: string, plural = noun + 's'): string {
  return `${n} ${n === 1 ? noun : plural}`;
}
