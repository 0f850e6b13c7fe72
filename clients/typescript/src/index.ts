// The Hubbub API client: openapi-fetch driven by the types that openapi-typescript generates from
// docs/openapi.json into ./schema.d.ts (`npm run generate`; never edit that file by hand).
import createClient, { type Client, type ClientOptions } from "openapi-fetch";
import type { components, paths } from "./schema.js";

export type { components, operations, paths } from "./schema.js";

/** Every named schema of the document: `Schemas["Message"]`, `Schemas["SendMessage"]`, `Schemas["Error"]`, … */
export type Schemas = components["schemas"];

/** A typed client: `GET`, `POST`, `PUT`, `PATCH`, `DELETE` take a path of the document and check params and body. */
export type HubbubClient = Client<paths>;

/** Options passed through to openapi-fetch (a custom `fetch`, middleware-free defaults, …). */
export type HubbubClientOptions = Omit<ClientOptions, "baseUrl" | "headers">;

/**
 * A client for the Hubbub host at `baseUrl` (its origin, e.g. `https://hubbub.example.com`: the paths
 * already start with `/api/v1`), sending `Authorization: Bearer <token>` on every request. The token is
 * the credential the operation asks for: a partner key `sk_…`, a developer key `sk_dev_…`, a bot token
 * `bot_…` or a user JWT.
 */
export function createHubbubClient(baseUrl: string, token: string, options: HubbubClientOptions = {}): HubbubClient {
  return createClient<paths>({
    ...options,
    baseUrl,
    headers: { Authorization: `Bearer ${token}` },
  });
}
