import { Fragment } from "preact";
import { useState } from "preact/hooks";
import { when } from "../shared/format";
import { Alert, Head } from "../shared/ui";
import { del, put, type PartnerSender } from "./api";
import { useList, type Act } from "./page";

type Channel = "whatsapp" | "sms";

/**
 * The partner's own WhatsApp number and Twilio sender: its users' messages go from them, messages to them
 * are the partner's, and their webhooks are checked with their own secrets. Secrets are written, never
 * read back: the list shows their first characters.
 */
export function Senders() {
  const { list: senders, error, status, act } = useList<PartnerSender>("Numbers", "/settings/senders");
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
        <Head cols={["Channel", "Number", "Account", "Token", "App secret", "Messages a second", "New people today", "Provider", "Changed"]} actions />
        <tbody>
          {senders.map((s) => (
            <tr>
              <td>{names[s.channel as Channel]}</td>
              <td class="mono">{s.address}</td>
              <td class="mono">{s.account}</td>
              <td class="mono">{s.token_prefix}</td>
              <td class="mono">{s.app_secret_prefix ?? ""}</td>
              <td>{s.mps ?? "the service's default"}</td>
              <td>
                {s.limits
                  ? `${s.limits.reached_today} of ${s.limits.daily_limit ?? "unlimited"}${s.limits.quality ? ` (Meta: ${s.limits.quality})` : ""}`
                  : "—"}
              </td>
              <td>{s.circuit_open_until ? `Down: not tried until ${when(s.circuit_open_until)}` : "Up"}</td>
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

/** One field of a sender's form: its key in the request, its label, and whether it is a secret or a number. */
type Field = [key: string, label: string, kind?: "secret" | "rate"];

/** The pace a sender may be given: messages a second, optional (empty: the service's default). */
const RATE: Field = ["mps", "Messages a second (empty: the service's default)", "rate"];

/** The form that sets the partner's own sender on `channel`; emptied once saved (secrets are not kept here). */
function SenderForm({ act, channel, title, fields, button, done }: { act: Act; channel: Channel; title: string; fields: Field[]; button: string; done: string }) {
  const empty = () => Object.fromEntries(fields.map(([k]) => [k, ""]));
  const [f, setF] = useState<Record<string, string>>(empty);
  return (
    <form
      class="card invite"
      aria-labelledby={`${channel}-h`}
      onSubmit={(e) => {
        e.preventDefault();
        act(async () => {
          const body: Record<string, string | number> = {};
          for (const [k, , kind] of fields) {
            if (kind !== "rate") body[k] = f[k];
            else if (f[k].trim() !== "") body[k] = Number(f[k]);
          }
          await put(`/settings/senders/${channel}`, body);
          setF(empty());
        }, done);
      }}
    >
      <h2 id={`${channel}-h`}>{title}</h2>
      {fields.map(([k, label, kind]) => (
        <Fragment key={k}>
          <label for={`${channel}-${k}`}>{label}</label>
          {kind === "rate" ? (
            <input id={`${channel}-${k}`} type="number" min={1} max={10000} step={1} value={f[k]} onInput={(e) => setF({ ...f, [k]: e.currentTarget.value })} />
          ) : (
            <input id={`${channel}-${k}`} type={kind === "secret" ? "password" : "text"} autocomplete="off" value={f[k]} onInput={(e) => setF({ ...f, [k]: e.currentTarget.value })} required />
          )}
        </Fragment>
      ))}
      <button class="primary">{button}</button>
    </form>
  );
}

function WhatsappForm({ act }: { act: Act }) {
  return (
    <SenderForm
      act={act}
      channel="whatsapp"
      title="Your WhatsApp number"
      fields={[
        ["phone_number_id", "Phone number id (not the number)"],
        ["business_account_id", "WhatsApp Business Account id"],
        ["token", "Access token", "secret"],
        ["app_secret", "Meta app secret", "secret"],
        RATE,
      ]}
      button="Save the WhatsApp number"
      done="Your WhatsApp number is saved: your users' WhatsApp messages go from it."
    />
  );
}

function SmsForm({ act }: { act: Act }) {
  return (
    <SenderForm
      act={act}
      channel="sms"
      title="Your Twilio sender"
      fields={[
        ["account_sid", "Twilio account SID"],
        ["auth_token", "Auth token", "secret"],
        ["from", "From (a number in +E.164 form, or a messaging service SID)"],
        RATE,
      ]}
      button="Save the Twilio sender"
      done="Your Twilio sender is saved: your users' SMS go from it."
    />
  );
}
