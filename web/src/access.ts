// Whether a refused read means "sign in": an anonymous visitor whose
// anonymous role lacks the scopes is asked to sign in, not shown the
// scope expression the API answered with.
import { ApiError } from './api';

export function needsSignIn(error: unknown, signedIn: boolean): boolean {
  if (signedIn || !(error instanceof ApiError)) return false;
  return error.status === 401 || (error.status === 403 && error.code === 'InsufficientScopes');
}
