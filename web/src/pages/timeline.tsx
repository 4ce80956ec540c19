// The timeline of a group's runs (a Gantt chart): one row per run, its
// wait (scheduled → started) pale, its run solid, coloured by state; the
// runs of the critical path are marked. Rows are virtualised.
import { useMemo } from 'preact/hooks';
import { Card, VirtualList } from '../components';
import { count, fmtDuration, fmtTime } from '../format';
import { axisTicks, bars, criticalPath } from '../graph';
import type { GroupMember } from '../types';

const LABEL_W = 220;

export function Timeline({ members }: { members: GroupMember[] }) {
  const now = Date.now();
  const rows = useMemo(() => bars(members, now), [members]);
  const critical = useMemo(() => new Set(criticalPath(members, now)), [members]);
  if (!rows.length) return <Card title="Timeline"><p class="empty">No runs yet.</p></Card>;
  let t0 = Infinity, t1 = -Infinity;
  for (const r of rows) {
    t0 = Math.min(t0, r.scheduled);
    t1 = Math.max(t1, r.end);
  }
  t1 = Math.max(t1, t0 + 1000);
  const span = t1 - t0;
  const pct = (t: number) => `${((t - t0) / span) * 100}%`;
  const wid = (a: number, b: number) => `${Math.max(0.15, ((b - a) / span) * 100)}%`;
  const critRows = rows.filter((r) => critical.has(r.taskId));
  const critEnd = critRows.reduce((m, r) => Math.max(m, r.end), -Infinity);
  // Round steps from the first run's scheduling, each label where its tick is.
  const ticks = axisTicks(span);
  return (
    <Card title={`Timeline: ${count(rows.length, 'run')} over ${fmtDuration(span)}`}>
      <p class="small muted">Critical path: {count(critical.size, 'task')}, ending {critEnd > -Infinity ? fmtTime(new Date(critEnd).toISOString()) : 'not yet'}. Pale: waiting for a worker; solid: running.</p>
      <div class="timeline" data-rows={rows.length} data-critical={critical.size}>
        <div class="axis" style={{ marginLeft: `${LABEL_W}px` }}>
          {ticks.map((t, i) => <span key={i} class="tick" style={{ left: `${(t / span) * 100}%` }}>{i === 0 ? fmtTime(new Date(t0).toISOString()) : `+${fmtDuration(t)}`}</span>)}
        </div>
        <VirtualList items={rows} rowHeight={22} height={560} row={(r) => (
          <div class={`trow${critical.has(r.taskId) ? ' critical' : ''}`}>
            <a class="tlabel" href={`#/task/${r.taskId}`} style={{ width: `${LABEL_W}px` }} title={r.taskId}>{r.name || r.taskId}{r.runId ? ` (run ${r.runId})` : ''}</a>
            <div class="ttrack">
              <div class="twait" style={{ left: pct(r.scheduled), width: wid(r.scheduled, r.start) }} />
              {!r.waiting && <div class={`tbar seg-${r.state}${r.open ? ' open' : ''}`} style={{ left: pct(r.start), width: wid(r.start, r.end) }}
                title={`${r.name} run ${r.runId}: ${r.state}, ${fmtDuration(r.end - r.start)}`} />}
            </div>
          </div>
        )} />
      </div>
    </Card>
  );
}
