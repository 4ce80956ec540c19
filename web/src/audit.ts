// The audit log's views: what was done to a client or a role
// (auth.getEntityHistory) and what a client did (auth.listAuditHistory).

export type AuditKind = 'client' | 'role' | 'by';

export const AUDIT_KINDS: [AuditKind, string][] = [['client', 'changes to a client'], ['role', 'changes to a role'], ['by', 'changes made by a client']];

/** auditApiPath is the auth service's path of a view (ids escaped). */
export function auditApiPath(kind: AuditKind, id: string): string {
  const e = encodeURIComponent;
  if (kind === 'by') return `/clients/${e(id)}/audit`;
  // A role id may hold slashes, which the route takes whole.
  return `/audit/${kind}/${id.split('/').map(e).join('/')}`;
}

/** auditHref is the console page of a view. */
export function auditHref(kind: AuditKind, id: string): string {
  return `#/audit/${kind}/${encodeURIComponent(id)}`;
}
