// The dependency graph of a group: columns by dependency depth, drawn in
// SVG, only the part in view (so 10,000 tasks scroll as smoothly as ten).
// Nodes link to their tasks; the critical path is drawn bold.
import { useMemo, useState } from 'preact/hooks';
import { Card } from '../components';
import { GEOMETRY, criticalPath, edgePath, layout, type Node } from '../graph';
import type { GroupMember } from '../types';

const { nodeW: NODE_W, nodeH: NODE_H, colW: COL_W, rowH: ROW_H, pad: PAD } = GEOMETRY;
const VIEW_H = 600;

export function Graph({ members }: { members: GroupMember[] }) {
  const g = useMemo(() => layout(members), [members]);
  const critical = useMemo(() => new Set(criticalPath(members, Date.now())), [members]);
  const [view, setView] = useState({ left: 0, top: 0, width: 1200 });
  // The last column ends at its nodes' right edge (plus padding), not at a
  // full column pitch.
  const width = Math.max(0, g.layers - 1) * COL_W + NODE_W + PAD * 2;
  const height = g.height * ROW_H + PAD * 2;
  const x = (n: Node) => PAD + n.layer * COL_W;
  const y = (n: Node) => PAD + n.row * ROW_H;
  const margin = 200;
  const inView = (n: Node) => x(n) + NODE_W >= view.left - margin && x(n) <= view.left + view.width + margin &&
    y(n) + NODE_H >= view.top - margin && y(n) <= view.top + VIEW_H + margin;
  const nodes = g.nodes.filter(inView);
  const edges = g.edges.filter(([a, b]) => inView(a) || inView(b));
  return (
    <Card title={`Dependency graph: ${g.nodes.length} tasks in ${g.layers} levels, ${g.edges.length} dependencies`}>
      <p class="small muted">Columns are dependency depth within the group; the bold chain is the critical path (what the group's end waited for).</p>
      <div class="graph" style={{ height: `${Math.min(VIEW_H, height + 20)}px` }} data-nodes={g.nodes.length} data-drawn={nodes.length}
        ref={(el) => { if (el && el.clientWidth && el.clientWidth !== view.width) setView({ ...view, width: el.clientWidth }); }}
        onScroll={(e) => { const el = e.currentTarget as HTMLElement; setView({ left: el.scrollLeft, top: el.scrollTop, width: el.clientWidth }); }}>
        <svg width={width} height={height} role="img" aria-label="dependency graph">
          <g class="edges">
            {edges.map(([a, b]) => {
              const crit = critical.has(a.taskId) && critical.has(b.taskId);
              return <path key={`${a.taskId}>${b.taskId}`} class={crit ? 'edge critical' : 'edge'} d={edgePath(a, b)} />;
            })}
          </g>
          {nodes.map((n) => (
            <a key={n.taskId} href={`#/task/${n.taskId}`} class={`node state-${n.state}${critical.has(n.taskId) ? ' critical' : ''}`} data-task={n.taskId}>
              <title>{`${n.name} (${n.state})\n${n.taskId}`}</title>
              <rect x={x(n)} y={y(n)} width={NODE_W} height={NODE_H} rx={5} />
              <text x={x(n) + 8} y={y(n) + 17}>{n.name.length > 26 ? n.name.slice(0, 25) + '…' : n.name || n.taskId}</text>
            </a>
          ))}
        </svg>
      </div>
    </Card>
  );
}
