import { useEffect, useState } from "preact/hooks";
import { Alert, Head, acting, errorText, when } from "../pages/ui";
import { del, get, put, type Page, type PartnerSender } from "../pages/api";

type Channel = "whatsapp" | "sms";

/**
 * The partner's own WhatsApp number and Twilio sender: its users' messages go from them, messages to them
 * are the partner's, and their webhooks are checked with their own secrets. Secrets are written, never
 * read back: the list shows their first characters.
 */
export function Senders() {
  const [senders, setSenders] = useState<PartnerSender[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [status, setStatus] = useState("");
  const load = () => get<Page<PartnerSender>>("/settings/senders").then((p) => setSenders(p.data), (e) => setError(errorText(e)));
  useEffect(() => {
    load();
    document.title = "Numbers · Hubbub console";
  }, []);
  const act = acting(load, setError, setStatus);
  const names: Record<Channel, string> = { whatsapp: "WhatsApp", sms: "SMS" };
  return (
    <section class="page" aria-labelledby="senders-h">
      <h1 id="senders-h">Numbers</h1>
      <p class="hint">
        Without your own, your users' WhatsApp messages and SMS go from the service's shared number. With your own, they go from yours, and what
        people send to it reaches you: point its webhooks at this service (see the providers guide).
      </p>
      <Alert text={error} />
      {status ? <p role="status">{status}</p> : null}
      <table>
        <caption class="sr-only">Your own senders</caption>
        <Head cols={["Channel", "Number", "Account", "Token", "App secret", "Changed"]} actions />
        <tbody>
          {senders.map((s) => (
            <tr>
              <td>{names[s.channel as Channel]}</td>
              <td class="mono">{s.address}</td>
              <td class="mono">{s.account}</td>
              <td class="mono">{s.token_prefix}</td>
              <td class="mono">{s.app_secret_prefix ?? ""}</td>
              <td>{when(s.updated_at)}</td>
              <td>
                <button type="button" onClick={() => act(() => del(`/settings/senders/${s.channel}`), `Your users' ${names[s.channel as Channel]} goes from the shared number again.`)}>
                  Remove the {names[s.channel as Channel]} sender
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <WhatsappForm act={act} />
      <SmsForm act={act} />
    </section>
  );
}

type Act = (what: () => Promise<unknown>, done?: string) => Promise<void>;

function WhatsappForm({ act }: { act: Act }) {
  const [f, setF] = useState({ phone_number_id: "", business_account_id: "", token: "", app_secret: "" });
  const field = (k: keyof typeof f, label: string, secret = false) => (
    <>
      <label for={`wa-${k}`}>{label}</label>
      <input id={`wa-${k}`} type={secret ? "password" : "text"} autocomplete="off" value={f[k]} onInput={(e) => setF({ ...f, [k]: e.currentTarget.value })} required />
    </>
  );
  return (
    <form
      class="card invite"
      aria-labelledby="wa-h"
      onSubmit={(e) => {
        e.preventDefault();
        act(async () => {
          await put("/settings/senders/whatsapp", f);
          setF({ phone_number_id: "", business_account_id: "", token: "", app_secret: "" });
        }, "Your WhatsApp number is saved: your users' WhatsApp messages go from it.");
      }}
    >
      <h2 id="wa-h">Your WhatsApp number</h2>
      {field("phone_number_id", "Phone number id (not the number)")}
      {field("business_account_id", "WhatsApp Business Account id")}
      {field("token", "Access token", true)}
      {field("app_secret", "Meta app secret", true)}
      <button class="primary">Save the WhatsApp number</button>
    </form>
  );
}

function SmsForm({ act }: { act: Act }) {
  const [f, setF] = useState({ account_sid: "", auth_token: "", from: "" });
  return (
    <form
      class="card invite"
      aria-labelledby="sms-h"
      onSubmit={(e) => {
        e.preventDefault();
        act(async () => {
          await put("/settings/senders/sms", f);
          setF({ account_sid: "", auth_token: "", from: "" });
        }, "Your Twilio sender is saved: your users' SMS go from it.");
      }}
    >
      <h2 id="sms-h">Your Twilio sender</h2>
      <label for="sms-account">Twilio account SID</label>
      <input id="sms-account" autocomplete="off" value={f.account_sid} onInput={(e) => setF({ ...f, account_sid: e.currentTarget.value })} required />
      <label for="sms-token">Auth token</label>
      <input id="sms-token" type="password" autocomplete="off" value={f.auth_token} onInput={(e) => setF({ ...f, auth_token: e.currentTarget.value })} required />
      <label for="sms-from">From (a number in +E.164 form, or a messaging service SID)</label>
      <input id="sms-from" autocomplete="off" value={f.from} onInput={(e) => setF({ ...f, from: e.currentTarget.value })} required />
      <button class="primary">Save the Twilio sender</button>
    </form>
  );
}
