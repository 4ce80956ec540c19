// Generates internal/jsone/testdata/vectors.json: every case of the JSON-e
// specification, rendered by the reference implementation (the npm package
// json-e pinned in package.json), with the result it returns or the error it
// throws (err.toString(), as the specification's own runner compares it).
//
// The specification is the file json-e publishes beside its sources
// (specification.yml at the tag of the pinned version); the npm package does
// not ship it. By default it is downloaded from GitHub and checked against
// SPEC_SHA256; pass a local copy as the first argument to work offline:
//
//   npm ci && node gen.mjs [path/to/specification.yml]
//
// Besides the specification, extra.mjs holds hopper's own templates
// for corners the specification leaves open (number formatting, Unicode,
// built-in argument checks...): they carry no expectation of their own, the
// reference implementation decides.

import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const yaml = require('js-yaml');
const jsonePackage = require('json-e/package.json');

const here = path.dirname(fileURLToPath(import.meta.url));
const outFile = path.join(here, '..', 'vectors.json');

const SPEC_URL = `https://raw.githubusercontent.com/json-e/json-e/v${jsonePackage.version}/specification.yml`;
const SPEC_SHA256 = '969ed4c530cd60917e8598e0f29c2e81ea2cd26c267afce81605728baa7a0991';

// The specification's runner freezes the clock at this instant.
const TEST_DATE = '2017-01-19T16:27:20.974Z';
const FROZEN_MS = Date.parse(TEST_DATE);

// Freeze `new Date()` and `Date.now()` the way the specification's runner
// does with timekeeper, before json-e is loaded.
const RealDate = Date;
class FrozenDate extends RealDate {
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
}
globalThis.Date = FrozenDate;
const jsone = require('json-e');

const readSpec = async () => {
  if (process.argv[2]) {
    return fs.readFileSync(process.argv[2], 'utf8');
  }
  const res = await fetch(SPEC_URL);
  if (!res.ok) {
    throw new Error(`fetching ${SPEC_URL}: HTTP ${res.status}`);
  }
  return await res.text();
};

// jsonValue checks that v survives a trip through JSON unchanged, so the Go
// side compares exactly what the reference returned. In a result (lenient),
// a non-finite number is allowed and becomes null, as JSON.stringify writes
// it and as hopper's renderer returns it.
const jsonValue = (v, where, lenient = false) => {
  if (v === null || typeof v === 'string' || typeof v === 'boolean') {
    return v;
  }
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) {
      if (lenient) {
        return null;
      }
      throw new Error(`${where}: non-finite number ${v}`);
    }
    return v;
  }
  if (Array.isArray(v)) {
    return v.map((e, i) => jsonValue(e, `${where}[${i}]`, lenient));
  }
  if (typeof v === 'object' && !(v instanceof RealDate)) {
    const out = {};
    for (const k of Object.keys(v)) {
      Object.defineProperty(out, k, {
        value: jsonValue(v[k], `${where}.${k}`, lenient), enumerable: true, writable: true, configurable: true,
      });
    }
    return out;
  }
  throw new Error(`${where}: not a JSON value: ${typeof v} ${String(v)}`);
};

// stable is JSON with sorted keys, to compare values whatever their key order.
const stable = v => JSON.stringify(v, (k, x) => (x && typeof x === 'object' && !Array.isArray(x))
  ? Object.fromEntries(Object.keys(x).sort().map(key => [key, x[key]])) : x);

const run = (c, where) => {
  const out = {
    section: c.section,
    title: c.title,
    context: jsonValue(c.context, `${where}.context`),
    template: jsonValue(c.template, `${where}.template`),
  };
  try {
    const result = jsone(c.template, c.context);
    if (result === undefined) {
      throw new Error(`${where}: rendered to undefined`);
    }
    out.result = jsonValue(result, `${where}.result`, true);
  } catch (err) {
    if (err.message && err.message.startsWith(where)) {
      throw err;
    }
    out.error = err.toString();
  }
  return out;
};

const main = async () => {
  const text = await readSpec();
  const sha = crypto.createHash('sha256').update(text).digest('hex');
  if (sha !== SPEC_SHA256) {
    throw new Error(`specification.yml has sha256 ${sha}, want ${SPEC_SHA256} (json-e v${jsonePackage.version})`);
  }

  const cases = [];
  let section = '';
  let disagreements = 0;
  // The default schema, as the specification's own runner loads it.
  yaml.loadAll(text, doc => {
    if (doc.section) {
      section = doc.section;
      return;
    }
    const where = `${section} / ${doc.title}`;
    const got = run({ ...doc, section }, where);
    // The reference must agree with its own specification; report (never
    // hide) a case where it does not.
    if (doc.error !== undefined) {
      if (got.error === undefined || (doc.error !== true && got.error !== doc.error)) {
        console.error(`disagreement: ${where}: spec error ${JSON.stringify(doc.error)}, got ${JSON.stringify(got)}`);
        disagreements++;
      }
    } else if (got.error !== undefined || stable(got.result) !== stable(jsonValue(doc.result, where))) {
      console.error(`disagreement?: ${where}: spec result ${JSON.stringify(doc.result)}, got ${JSON.stringify(got)}`);
      disagreements++;
    }
    cases.push(got);
  });

  const extra = (await import('./extra.mjs')).default;
  for (const c of extra) {
    cases.push(run({ ...c, section: 'hopper extras' }, `hopper extras / ${c.title}`));
  }

  const doc = {
    comment: 'Generated by internal/jsone/testdata/gen/gen.mjs; do not edit.',
    jsone: jsonePackage.version,
    specification: SPEC_URL,
    specificationSha256: sha,
    now: TEST_DATE,
    cases,
  };
  fs.writeFileSync(outFile, JSON.stringify(doc, null, 1) + '\n');
  console.log(`wrote ${cases.length} cases to ${path.relative(process.cwd(), outFile)} (${disagreements} disagreements with the specification)`);
};

await main();
