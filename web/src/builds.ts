// The forge integration's builds as the console shows them.

/** buildsPath is the builds query of a repository page (names escaped). */
export function buildsPath(org?: string, repo?: string): string {
  if (!org) return '/builds';
  return `/builds?organization=${encodeURIComponent(org)}` + (repo ? `&repository=${encodeURIComponent(repo)}` : '');
}

/** buildState maps a build's state onto the console's task states. */
export function buildState(state: string): string {
  return ({ success: 'completed', failure: 'failed', error: 'exception', cancelled: 'exception' } as Record<string, string>)[state] ?? state;
}


/** Delivery is a webhook delivery's record (/api/github/v1/deliveries). */
export interface Delivery {
  host: string;
  deliveryId: string;
  event: string;
  repository: string;
  received: string;
  state: string;
  attempts: number;
  outcome: string;
  error: string;
  replayOf?: string;
}

/** deliveryHref is the console page of a delivery (its whole error). */
export function deliveryHref(d: { host: string; deliveryId: string }): string {
  return `#/delivery/${encodeURIComponent(d.host)}/${encodeURIComponent(d.deliveryId)}`;
}

/**
 * deliveriesFor keeps the failed deliveries a Builds page shows: those of
 * its organization (and repository), all on the page of every repository.
 */
export function deliveriesFor(list: Delivery[], org?: string, repo?: string): Delivery[] {
  if (!org) return list;
  return list.filter((d) => {
    const [o, r] = d.repository.split('/');
    return o === org && (!repo || r === repo);
  });
}

/** deliveryState is the badge state of a delivery with an error. */
export function deliveryState(d: Delivery): string {
  return d.state === 'pending' ? 'pending' : 'exception';
}
