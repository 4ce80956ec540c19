// Generates ../cron.json: for each cron pattern, either the message
// cron-parser rejects it with or its next due times (UTC) after a few
// reference instants. Run with `npm ci && node gen.mjs`; the output is
// committed so Go tests never need Node.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CronExpressionParser } from 'cron-parser';

const here = path.dirname(fileURLToPath(import.meta.url));

// Reference instants: month and year ends, a leap day, a time with
// milliseconds, and an instant exactly on a due time.
const references = [
  '2030-01-31T23:59:58.500Z',
  '2031-12-31T23:59:59.000Z',
  '2032-02-28T12:00:00.000Z',
  '2030-06-15T09:00:00.000Z',
];

const patterns = [
  '', '* * * * * *', '0 * * * * *', '*/5 * * * * *', '5/15 * * * * *', '0 0 1 * * *',
  '0 0 9,21 * * 1-5', '0 0 12 * * 0,6', '0 0 * * *', '30 2 * * *', '*/10 * * * *',
  '15,45 */2 * * *', '0 0 0 1 JAN *', '0 0 0 1 jan-mar,oct *', '0 0 0 ? * MON', '0 0 0 * * sun-tue',
  '0 0 0 * * 7', '0 0 0 * * 5-7', '0 0 0 * * 0-7/2', '0 0 0 L * *', '0 0 0 1,L * *', '0 0 0 * * 5L',
  '0 0 0 * * 1L,3', '0 0 0 * * 5#3', '0 0 0 * * 1#1', '0 0 0 * * 1#5', '0 0 0 15 * 1', '0 0 0 13 * 5',
  '0 0 0 29 2 *', '0 0 0 30 1,2 *', '0 0 0 1-7 * 1', '0 0 12 1 * ?', '0 30 8-18/3 * * mon-fri',
  '* * * *', '* *', '0', '1-59/20 * * * * *', '0 0 0 ? ? ?',
  '@yearly', '@annually', '@monthly', '@weekly', '@daily', '@hourly', '@minutely', '@secondly', '@weekdays', '@weekends',
  // errors
  '61 * * * *', '* 24 * * *', '0 0 0 0 * *', '0 0 0 32 * *', '0 0 0 * 13 *', '0 0 0 * 0 *', '0 0 0 * * 8',
  'a b c', '* * * * * * *', '10-5 * * * *', '*/0 * * * *', '0 0 0 LW * *', '0 0 0 31 2 *', '0 0 0 30 feb *',
  '0 0 0 * foo *', '0 0 0 * * 5#6', '0 0 0 * * 1-2#3', '1,,2 * * * *', '1/2/3 * * * *', '0 0 0 * * 1#2#3',
  '0 0 0 * * 5#0', '@reboot', '1-2-3 * * * *', '* * * * * L', '0 0 0 * * 9L',
];

const vectors = [];
for (const pattern of patterns) {
  const entry = { pattern };
  try {
    CronExpressionParser.parse(pattern, { currentDate: new Date(references[0]), utc: true });
    entry.next = {};
    for (const ref of references) {
      const it = CronExpressionParser.parse(pattern, { currentDate: new Date(ref), utc: true });
      const times = [];
      for (let i = 0; i < 4; i++) times.push(it.next().toDate().toISOString());
      entry.next[ref] = times;
    }
  } catch (err) {
    entry.error = err.message;
  }
  vectors.push(entry);
}
fs.writeFileSync(path.join(here, '..', 'cron.json'), JSON.stringify(vectors, null, 2) + '\n');
console.log(`wrote cron.json (${vectors.length} patterns)`);
