// The audit log (auth.getEntityHistory, auth.listAuditHistory): who
// created, changed or deleted a client or a role, and when; or everything
// one client changed. Clients and roles are what hopper audits.
import { useState } from 'preact/hooks';
import { listAll } from '../api';
import { AUDIT_KINDS, auditApiPath, auditHref, type AuditKind } from '../audit';
import { Card, Loading, useAsync } from '../components';
import { fmtTime } from '../format';
import { AccessError } from '../signin';

interface AuditEntry {
  clientId: string;
  actionType: string;
  created: string;
  entityId: string;
  entityType: string;
}

export function AuditPage({ kind, id }: { kind?: string; id?: string }) {
  const k = (AUDIT_KINDS.some(([x]) => x === kind) ? kind : 'client') as AuditKind;
  const [formKind, setFormKind] = useState<AuditKind>(k);
  const [formId, setFormId] = useState(id ?? '');
  const history = useAsync(async () => (id ? listAll<AuditEntry>('auth', auditApiPath(k, id), 'auditHistory', 5000) : []), [k, id]);
  const go = (e: Event) => {
    e.preventDefault();
    if (formId.trim()) location.hash = auditHref(formKind, formId.trim());
  };
  return (
    <div>
      <h1>Audit log</h1>
      <form class="search audit-form" onSubmit={go}>
        <select value={formKind} onChange={(e) => setFormKind((e.target as HTMLSelectElement).value as AuditKind)} aria-label="what to show">
          {AUDIT_KINDS.map(([v, label]) => <option key={v} value={v}>{label}</option>)}
        </select>
        <input name="auditId" value={formId} onInput={(e) => setFormId((e.target as HTMLInputElement).value)} placeholder="client or role id" aria-label="client or role id" />
        <button type="submit">Show</button>
      </form>
      {id && history.loading && !history.data && <Loading what="the audit log" />}
      <AccessError error={history.error} what="the audit log" />
      {id && history.data && (
        <Card title={`${AUDIT_KINDS.find(([x]) => x === k)?.[1]}: ${id} (${history.data.length})`}>
          {history.data.length === 0 ? <p class="empty">Nothing recorded (entries are kept 30 days).</p> : (
            <table class="list audit">
              <thead><tr><th>When</th><th>What</th><th>Of</th><th>By</th></tr></thead>
              <tbody>
                {history.data.map((a, i) => (
                  <tr key={i}>
                    <td>{fmtTime(a.created)}</td>
                    <td>{a.actionType}</td>
                    <td><a href={auditHref(a.entityType as AuditKind, a.entityId)}>{a.entityType} {a.entityId}</a></td>
                    <td><a href={auditHref('by', a.clientId)}>{a.clientId}</a></td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </Card>
      )}
    </div>
  );
}
