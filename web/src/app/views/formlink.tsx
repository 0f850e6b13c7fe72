// A form of a bot's session on WhatsApp or SMS, opened from the link the bot sent there (`/f/{token}`):
// no login, the link is the capability for this one form. Sent once; the conversation goes on where it
// started.
import { useState } from "preact/hooks";
import { enc, get, post } from "../api";
import { ScreenForm, type Screen } from "../steps";
import { ErrorNote, Loading, useAsync, useTitle } from "../util";

interface LinkedForm {
  screen: Screen;
  bot: string;
  partner: string;
  channel: "whatsapp" | "sms";
  expires_at: string;
}

const CHANNEL_NAMES = { whatsapp: "WhatsApp", sms: "SMS" } as const;

export function FormLink({ token }: { token: string }) {
  const form = useAsync(() => get<LinkedForm>(`/form-links/${enc(token)}`), [token]);
  const [sent, setSent] = useState<"whatsapp" | "sms" | null>(null);
  useTitle(form.data?.screen.title || "Form");
  if (sent) {
    return (
      <section class="form-link">
        <h1 tabIndex={-1}>Sent</h1>
        <p role="status">
          Thank you. {form.data?.bot || "The bot"} answers you on {CHANNEL_NAMES[sent]}: you can close this page.
        </p>
      </section>
    );
  }
  if (form.error) {
    return (
      <section class="form-link">
        <h1 tabIndex={-1}>This form cannot be opened</h1>
        <ErrorNote error={form.error} />
      </section>
    );
  }
  if (!form.data) return <Loading what="Loading the form" />;
  const f = form.data;
  return (
    <section class="form-link">
      <h1 tabIndex={-1}>{f.bot}</h1>
      <p class="muted">
        {f.partner ? `${f.partner}: y` : "Y"}our answers go to this bot, and it answers you on {CHANNEL_NAMES[f.channel]}.
      </p>
      <ScreenForm
        screen={f.screen}
        submit={async (values) => {
          const r = await post<{ state: string; channel: "whatsapp" | "sms" }>(`/form-links/${enc(token)}`, { values });
          setSent(r.channel);
        }}
      />
    </section>
  );
}
