import { test } from 'node:test';
import assert from 'node:assert/strict';
import { count } from '../src/format';

test('count puts the noun in the plural unless the number is one', () => {
  const cases: [number, string, string | undefined, string][] = [
    [0, 'task', undefined, '0 tasks'],
    [1, 'task', undefined, '1 task'],
    [2, 'task', undefined, '2 tasks'],
    [1, 'dependency', 'dependencies', '1 dependency'],
    [3, 'dependency', 'dependencies', '3 dependencies'],
  ];
  for (const [n, noun, plural, want] of cases) assert.equal(count(n, noun, plural), want);
});
