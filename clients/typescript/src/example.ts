// Compile-checked example of the generated client (`npm run check` type-checks it; nothing runs it).
// Every field name here comes from docs/openapi.json: if the document renames one, the check fails.
import { createHubbubClient, type HubbubClient, type Schemas } from "./index.js";

type Message = Schemas["Message"];
type MessageState = Schemas["MessageState"];
type ApiError = Schemas["Error"];

/** An error answer of the API, with its machine-readable code. */
export class HubbubError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly field: string | null | undefined,
    message: string,
  ) {
    super(message);
  }
}

/** The error body `{"error": {"code", "message", "field"?, "fields"?}}` as an exception. */
export function toError(status: number, body: ApiError): HubbubError {
  const { code, message, field, fields } = body.error;
  const detail = fields ? ` (${Object.entries(fields).map(([k, v]) => `${k}: ${v}`).join(", ")})` : "";
  return new HubbubError(status, code, field, `${code}: ${message}${detail}`);
}

/** POST /api/v1/messages: send a text message to one user; answers the stored message (201). */
export async function sendText(hubbub: HubbubClient, phone: string, body: string): Promise<Message> {
  const { data, error, response } = await hubbub.POST("/api/v1/messages", {
    params: { header: { "Idempotency-Key": `welcome-${phone}` } },
    body: { phone, body, priority: "notification" },
  });
  if (error) {
    // Typed from the E4xx/E5xx responses of the operation: error.error.code is a string.
    if (error.error.code === "rate_limited") console.warn("slow down");
    throw toError(response.status, error);
  }
  const id: number = data.message_id;
  const state: MessageState = data.state;
  // @ts-expect-error message_id is an integer, not a string: proves `data` is typed, not `any`.
  const wrong: string = data.message_id;
  void wrong;
  console.log(`message ${id} (${data.ref}) to ${data.phone} is ${state}, channel ${data.channel ?? "not yet sent"}`);
  return data;
}

/** GET /api/v1/messages with query parameters, following `next_cursor` to the last page. */
export async function deliveredTo(hubbub: HubbubClient, phone: string): Promise<Message[]> {
  const all: Message[] = [];
  let cursor: string | undefined;
  do {
    const { data, error, response } = await hubbub.GET("/api/v1/messages", {
      params: { query: { phone, state: "delivered", limit: 100, cursor } },
    });
    if (error) throw toError(response.status, error);
    for (const m of data.data) {
      console.log(m.message_id, m.state, m.created_at, m.body ?? "");
      all.push(m);
    }
    cursor = data.next_cursor ?? undefined;
  } while (cursor);
  return all;
}

export async function main(): Promise<void> {
  const hubbub = createHubbubClient("https://hubbub.example.com", "sk_live_example");
  try {
    await sendText(hubbub, "+15551230000", "Welcome to Hubbub!");
    const delivered = await deliveredTo(hubbub, "+15551230000");
    console.log(`${delivered.length} delivered`);
  } catch (e) {
    if (e instanceof HubbubError && e.code === "validation") console.error(`invalid ${e.field ?? "request"}`);
    throw e;
  }
}
