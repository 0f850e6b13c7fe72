// The API as the partner console uses it: the shared fetch core (shared/api.ts) signed in by the member's
// session cookie, which no script ever reads (HttpOnly): the browser sends it with the same-origin fetch, and
// the Sec-Fetch-Site header the host's CSRF check wants. A 401 ends the page's session, except from a call
// that signs in (there it is a refusal).
import { apiClient } from "../shared/api";

export * from "../shared/api";

const SIGNING_IN = ["/members/sessions", "/auth/"];

export const { get, post, put, patch, del, upload, onSignedOut } = apiClient({
  signedOut: (path) => !SIGNING_IN.some((p) => path.startsWith(p)),
});
