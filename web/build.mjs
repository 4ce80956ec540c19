// Builds the web console into ../internal/ui/static (committed, so that
// `go build` needs no Node): src/main.tsx → app.js, src/style.css →
// style.css. With --tests, bundles test/*.test.ts into .test-build/ for
// `node --test`. With --watch, rebuilds on change.
import * as esbuild from 'esbuild';
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.join(here, '..', 'internal', 'ui', 'static');
const args = new Set(process.argv.slice(2));

const common = {
  bundle: true,
  target: 'es2022',
  jsx: 'automatic',
  jsxImportSource: 'preact',
  logLevel: 'warning',
  legalComments: 'none',
};

if (args.has('--tests')) {
  const tests = readdirSync(path.join(here, 'test')).filter((f) => f.endsWith('.test.ts'));
  await esbuild.build({
    ...common,
    entryPoints: tests.map((f) => path.join(here, 'test', f)),
    outdir: path.join(here, '.test-build'),
    platform: 'node',
    format: 'esm',
    // Node loads the npm packages itself (the yaml package's CommonJS
    // would not survive an ESM bundle).
    packages: 'external',
    outExtension: { '.js': '.mjs' },
  });
} else {
  const options = {
    ...common,
    entryPoints: { app: path.join(here, 'src', 'main.tsx'), style: path.join(here, 'src', 'style.css') },
    outdir: out,
    format: 'iife',
    minify: true,
    // Readable names in stack traces a user may paste into an issue.
    keepNames: true,
  };
  if (args.has('--watch')) {
    const ctx = await esbuild.context(options);
    await ctx.watch();
    console.log('watching web/src; rebuilding into', out);
  } else {
    await esbuild.build(options);
  }
}
