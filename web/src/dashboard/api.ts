// The API as the developer portal uses it: the shared fetch core (shared/api.ts) signed in by the
// developer's 12-hour session key (or a new sign-up's API key), sent as a bearer header (`setBearer`). A 401
// ends the page's session, except from a call that signs in (there it is a refusal).
import { apiClient } from "../shared/api";

export * from "../shared/api";

let bearer: () => string | null = () => null;
/** Where the session key is read from, for every call. */
export function setBearer(read: () => string | null) {
  bearer = read;
}

const SIGNING_IN = ["/dev/signup", "/dev/verify", "/dev/session"];

export const { get, post, put, del, onSignedOut } = apiClient({
  bearer: () => bearer(),
  signedOut: (path) => !SIGNING_IN.some((p) => path.startsWith(p)),
});
