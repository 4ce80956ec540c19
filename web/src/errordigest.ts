// What a person needs from a Taskcluster API error message: its first line,
// then the lines that say what to fix (each schema violation, each missing
// scope), bounded. The same rules as the CLI's (internal/tcclient
// ErrorDigest): a message cut at its first paragraph stops at "…is missing
// the following scopes:" or "…does not match schema create-task-request:",
// just before the part that matters.

const MAX_LINES = 25;
const MAX_LINE = 300;

export interface Digest {
  summary: string;
  details: string[];
}

export function errorDigest(message: string): Digest {
  let msg = message;
  const footer = msg.indexOf('\n---');
  if (footer >= 0) msg = msg.slice(0, footer);
  // hopper's second wording, in Taskcluster's validator's words; kept when
  // it is the only one (a message from Taskcluster itself).
  const tcWording = msg.indexOf('\nSchema Validation Failed!');
  if (tcWording > 0) msg = msg.slice(0, tcWording);
  const lines = msg.replace(/\r\n/g, '\n').split('\n');
  const out: string[] = [];
  let missingScopes = false;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].replace(/[ \t]+$/, '');
    if (line.trim().startsWith('```')) {
      let j = i + 1;
      while (j < lines.length && !lines[j].trim().startsWith('```')) j++;
      out.push(...fencedLines(lines.slice(i + 1, j)));
      i = j;
      // What follows is the expression the missing scopes came from.
      if (missingScopes) break;
      continue;
    }
    if (line.trim() === '') continue;
    if (line.includes('is missing the following scopes:')) missingScopes = true;
    out.push(line);
  }
  if (out.length === 0) return { summary: '', details: [] };
  const details: string[] = [];
  for (const line of out.slice(1)) {
    if (details.length === MAX_LINES) {
      details.push(`… and ${out.length - 1 - MAX_LINES} more lines`);
      break;
    }
    details.push(line.length > MAX_LINE ? line.slice(0, MAX_LINE) + '…' : line);
  }
  return { summary: out[0].trim(), details };
}

function fencedLines(block: string[]): string[] {
  try {
    const lines = scopeLines(JSON.parse(block.join('\n')), '  ');
    if (lines) return lines;
  } catch {
    // not JSON
  }
  if (block.length === 1 && block[0].trim() !== '' && !/[{}[\]"]/.test(block[0])) return ['  ' + block[0].trim()];
  return block.filter((l) => l.trim() !== '').map((l) => '  ' + l.replace(/[ \t]+$/, ''));
}

/** A scope expression one scope a line; an AnyOf's members under "one of:". */
function scopeLines(expr: unknown, indent: string): string[] | undefined {
  if (typeof expr === 'string') return [indent + expr];
  if (!expr || typeof expr !== 'object' || Array.isArray(expr)) return undefined;
  const keys = Object.keys(expr);
  if (keys.length !== 1 || (keys[0] !== 'AllOf' && keys[0] !== 'AnyOf')) return undefined;
  const members = (expr as Record<string, unknown>)[keys[0]];
  if (!Array.isArray(members)) return undefined;
  const out: string[] = [];
  let inner = indent;
  if (keys[0] === 'AnyOf') {
    out.push(indent + 'one of:');
    inner += '  ';
  }
  for (const m of members) {
    const lines = scopeLines(m, inner);
    if (!lines) return undefined;
    out.push(...lines);
  }
  return out;
}
