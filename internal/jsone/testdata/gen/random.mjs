// Generates internal/jsone/testdata/random.json: random expressions and
// templates (from a fixed seed, so the file is reproducible) with what the
// reference implementation makes of them. The specification's cases pin each
// rule alone; these pin their combinations (precedence, types, errors of
// nested calls), where a reimplementation most easily drifts.
//
//   npm ci && node random.mjs

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const here = path.dirname(fileURLToPath(import.meta.url));
const outFile = path.join(here, '..', 'random.json');

const NOW = '2017-01-19T16:27:20.974Z';
const FROZEN_MS = Date.parse(NOW);
const RealDate = Date;
globalThis.Date = class extends RealDate {
  constructor(...args) {
    if (args.length === 0) {
      super(FROZEN_MS);
    } else {
      super(...args);
    }
  }
  static now() {
    return FROZEN_MS;
  }
};
const jsone = require('json-e');
const jsonePackage = require('json-e/package.json');

const SEED = 20261124;
const EXPRESSIONS = 3000;
const TEMPLATES = 1500;

// A linear congruential generator: the same seed gives the same file.
let seed = SEED;
const rnd = () => {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed / 2147483648;
};
const pick = a => a[Math.floor(rnd() * a.length)];

const context = {
  a: [1, 'x', null, [2]], o: { k: true, 1: 'one', n: { m: -1.5 } }, s: 'héllo😀 w', n: 2.5, z: 0, e: '',
  t: true, nl: null, big: 1e21, arr: [3, 1, 2], strs: ['b', 'a', 'é'], objs: [{ v: 2, k: 'b' }, { v: 1, k: 'a' }],
};

const atoms = ['a', 'o', 's', 'n', 'z', 'e', 't', 'nl', 'big', 'arr', 'strs', 'objs', '1', '0', '2.5', '-1', '"x"',
  "'ab'", '""', 'true', 'false', 'null', '[]', '{}', '[1, "a"]', '{a: 1, "b": [2]}', 'now', 'o.k', 'o.n.m', 'a[1]',
  's[2:4]', 'a[-1]', 'arr[1:]', '10', '3', '0.1', '1000000', '0.000001', 'missing'];
const functions = ['min', 'max', 'sqrt', 'ceil', 'floor', 'abs', 'lowercase', 'uppercase', 'len', 'str', 'number',
  'strip', 'lstrip', 'rstrip', 'split', 'join', 'fromNow', 'typeof', 'defined', 'range'];
const infix = ['+', '-', '*', '/', '**', '==', '!=', '<', '>', '<=', '>=', '&&', '||', 'in', '.'];

const expression = depth => {
  const r = rnd();
  if (depth <= 0 || r < 0.3) {
    return pick(atoms);
  }
  if (r < 0.55) {
    const op = pick(infix);
    return op === '.' ? `${expression(depth - 1)}.${pick(['k', 'n', 'm', 'x'])}` : `${expression(depth - 1)} ${op} ${expression(depth - 1)}`;
  }
  if (r < 0.65) {
    return `${pick(['-', '+', '!'])}${expression(depth - 1)}`;
  }
  if (r < 0.75) {
    return `(${expression(depth - 1)})`;
  }
  if (r < 0.9) {
    const args = Array.from({ length: Math.floor(rnd() * 4) }, () => expression(depth - 1));
    return `${pick(functions)}(${args.join(', ')})`;
  }
  if (r < 0.95) {
    return `${expression(depth - 1)}[${expression(depth - 1)}${rnd() < 0.5 ? ':' + expression(depth - 1) : ''}]`;
  }
  return `[${expression(depth - 1)}, ${expression(depth - 1)}]`;
};

const value = depth => {
  const r = rnd();
  if (depth <= 0 || r < 0.25) {
    return pick([1, 'text ${n}', '${s[0:2]}', true, null, [], {}, '$${x}']);
  }
  if (r < 0.35) {
    return { $eval: expression(2) };
  }
  if (r < 0.4) {
    return [value(depth - 1), value(depth - 1)];
  }
  if (r < 0.45) {
    return { k: value(depth - 1), 'key ${n}': value(depth - 1) };
  }
  return template(depth - 1);
};

const template = depth => {
  const each = pick(['each(x)', 'each(x, i)', 'each(x,i)', 'each(1)', 'each(x)y']);
  switch (Math.floor(rnd() * 17)) {
    case 0: return { $if: expression(2), then: value(depth), ...(rnd() < 0.5 ? { else: value(depth) } : {}) };
    case 1: return { $let: { x: value(depth), ...(rnd() < 0.2 ? { 'a-b': 1 } : {}) }, in: value(depth) };
    case 2: return { $map: pick([{ $eval: 'arr' }, { $eval: 'o' }, [1, 2], value(depth)]), [each]: value(depth) };
    case 3: return { $reduce: pick([{ $eval: 'arr' }, value(depth)]), initial: pick([0, '', [], null]), [pick(['each(acc, x)', 'each(acc, x, i)', 'each(acc)'])]: pick([{ $eval: 'acc + x' }, value(depth)]) };
    case 4: return { $find: pick([{ $eval: 'arr' }, value(depth)]), [each]: pick(['x > 1', expression(2), 1]) };
    case 5: return { $match: { [expression(1)]: value(depth), [expression(1)]: value(depth) } };
    case 6: return { $switch: { [expression(1)]: value(depth), ...(rnd() < 0.5 ? { $default: value(depth) } : {}) } };
    case 7: return { $merge: pick([[value(depth), value(depth)], [{ a: 1 }, value(depth)], value(depth)]) };
    case 8: return { $mergeDeep: pick([[value(depth), value(depth)], [{ a: [1] }, { a: value(depth) }], value(depth)]) };
    case 9: return { $sort: pick([{ $eval: 'arr' }, { $eval: 'strs' }, value(depth)]), ...(rnd() < 0.4 ? { 'by(v)': pick(['v', 'v.v', expression(1)]) } : {}) };
    case 10: return { $reverse: pick([{ $eval: 'arr' }, value(depth)]) };
    case 11: return { $flatten: pick([[[1, [2]], value(depth)], value(depth)]) };
    case 12: return { $flattenDeep: pick([[[1, [2]], value(depth)], value(depth)]) };
    case 13: return { $json: value(depth) };
    case 14: return { $fromNow: pick(['1 day', '-2 hours 3 minutes', 'nonsense', value(depth)]), ...(rnd() < 0.3 ? { from: pick(['2000-01-01T00:00:00Z', value(depth)]) } : {}) };
    case 15: return { $eval: expression(3), ...(rnd() < 0.1 ? { extra: 1 } : {}) };
  }
  return `<\${${expression(3)}}>`;
};

const run = tpl => {
  const rec = { template: tpl };
  try {
    // A fresh copy per case: $reverse reverses a context list in place.
    const result = jsone(tpl, structuredClone(context));
    // JSON.stringify writes NaN and Infinity as null, as hopper returns them.
    rec.result = JSON.parse(JSON.stringify(result === undefined ? null : result));
  } catch (err) {
    rec.error = err.toString();
  }
  return rec;
};

const cases = [];
for (let i = 0; i < EXPRESSIONS; i++) {
  cases.push(run(rnd() < 0.8 ? { $eval: expression(4) } : `<\${${expression(4)}}>`));
}
for (let i = 0; i < TEMPLATES; i++) {
  cases.push(run(template(3)));
}
fs.writeFileSync(outFile, JSON.stringify({
  comment: 'Generated by internal/jsone/testdata/gen/random.mjs; do not edit.',
  jsone: jsonePackage.version, seed: SEED, now: NOW, context, cases,
}) + '\n');
console.log(`wrote ${cases.length} cases to ${path.relative(process.cwd(), outFile)} (${cases.filter(c => c.error === undefined).length} results)`);
