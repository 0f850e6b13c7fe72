// The person's preferences (GET and PUT /me/preferences): their time zone, quiet hours, the channels messages
// may come by besides the app, and, per partner, muted, blocked or without marketing. A save sends the whole
// document (PUT replaces it); what the server stored is shown back.
import { useMemo, useState } from "preact/hooks";
import { ApiError, get, put, type PartnerPreferences, type Preferences, type PreferencesUpdate } from "../api";
import { ErrorNote, Loading, useAsync, useTitle } from "../util";

/** This browser's own time zone (IANA), if it knows one. */
function browserZone(): string | null {
  try {
    const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
    return zone && zone !== "Etc/Unknown" ? zone : null;
  } catch {
    return null;
  }
}

/** The time zones this browser knows, with `also` (the stored one, the browser's) when missing from them;
 * none when the browser cannot list them (the field is then typed). */
function zoneList(also: (string | null)[]): string[] {
  let zones: string[];
  try {
    zones = Intl.supportedValuesOf("timeZone");
  } catch {
    return [];
  }
  if (!zones.length) return [];
  const all = new Set(zones);
  for (const z of also) if (z) all.add(z);
  return [...all].sort();
}

export function PreferencesView() {
  useTitle("Preferences");
  const { data, error } = useAsync(() => get<Preferences>("/me/preferences"), []);
  return (
    <section aria-labelledby="prefs-h">
      <h1 id="prefs-h">Preferences</h1>
      <p class="muted">What reaches you, by which channel, and when.</p>
      <ErrorNote error={error} />
      {!data && !error ? <Loading /> : null}
      {data ? <PreferencesForm initial={data} /> : null}
    </section>
  );
}

type Flag = "muted" | "blocked" | "marketing";

// Each partner's three boxes, and what each means (the text is each box's description).
const FLAGS: { key: Flag; label: string; means: string }[] = [
  {
    key: "muted",
    label: "Muted",
    means: "Their messages stay in the app only: no notifications, and no copies by WhatsApp or SMS.",
  },
  { key: "blocked", label: "Blocked", means: "Nothing from them reaches you at all." },
  { key: "marketing", label: "Marketing", means: "On: they may send you marketing messages. Off: you get none from them." },
];

/** The fields a refusal names: `field` and `fields` of a `422`. */
function refused(e: unknown): Record<string, string> {
  if (!(e instanceof ApiError) || e.status !== 422) return {};
  if (e.fields && Object.keys(e.fields).length) return e.fields;
  return e.field ? { [e.field]: e.message } : {};
}

function PreferencesForm({ initial }: { initial: Preferences }) {
  const proposedZone = useMemo(browserZone, []);
  const zones = useMemo(() => zoneList([initial.time_zone ?? null, proposedZone]), []);
  const [storedZone, setStoredZone] = useState<string | null>(initial.time_zone ?? null);
  const [zone, setZone] = useState(initial.time_zone ?? proposedZone ?? "");
  const [quiet, setQuiet] = useState(!!initial.quiet_hours);
  const [start, setStart] = useState(initial.quiet_hours?.start ?? "22:00");
  const [end, setEnd] = useState(initial.quiet_hours?.end ?? "07:00");
  const [channels, setChannels] = useState(initial.channels ?? { whatsapp: true, sms: true });
  const [partners, setPartners] = useState<Record<string, PartnerPreferences>>(initial.partners ?? {});
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [invalid, setInvalid] = useState<Record<string, string>>({});
  const [saved, setSaved] = useState(false);

  /** Any change: what is on screen is no longer what was saved. */
  const changed = () => setSaved(false);

  const show = (p: Preferences) => {
    setStoredZone(p.time_zone ?? null);
    if (p.time_zone) setZone(p.time_zone);
    setQuiet(!!p.quiet_hours);
    if (p.quiet_hours) {
      setStart(p.quiet_hours.start);
      setEnd(p.quiet_hours.end);
    }
    if (p.channels) setChannels(p.channels);
    // The answer names each partner; one that would not keeps the name shown.
    if (p.partners)
      setPartners((old) =>
        Object.fromEntries(Object.entries(p.partners).map(([code, v]) => [code, { ...v, name: v.name ?? old[code]?.name }])),
      );
  };

  async function save(e: Event) {
    e.preventDefault();
    setBusy(true);
    setError(null);
    setInvalid({});
    setSaved(false);
    const doc: PreferencesUpdate = {
      time_zone: zone.trim() || null,
      quiet_hours: quiet ? { start, end } : null,
      channels: { whatsapp: channels.whatsapp, sms: channels.sms },
      partners: Object.fromEntries(
        Object.entries(partners).map(([code, p]) => [code, { muted: p.muted, blocked: p.blocked, marketing: p.marketing }]),
      ),
    };
    try {
      const stored = await put<Preferences>("/me/preferences", doc);
      if (stored) show(stored);
      setSaved(true);
    } catch (err) {
      setError(err);
      setInvalid(refused(err));
      // The first field refused takes the focus, so keyboard and screen-reader users land on it.
      setTimeout(() => (document.querySelector('#prefs-form [aria-invalid="true"]') as HTMLElement | null)?.focus(), 0);
    } finally {
      setBusy(false);
    }
  }

  const zoneError = invalid["time_zone"];
  const quietError = invalid["quiet_hours"];
  const startError = invalid["quiet_hours.start"] ?? quietError;
  const endError = invalid["quiet_hours.end"] ?? quietError;
  /** aria-invalid and aria-describedby for a field, with its own hint when it has one. */
  const described = (error: string | undefined, errorId: string, hint?: string) => ({
    "aria-invalid": error ? ("true" as const) : undefined,
    "aria-describedby": [hint, error ? errorId : undefined].filter(Boolean).join(" ") || undefined,
  });
  const codes = Object.keys(partners).sort((a, b) => (partners[a].name ?? a).localeCompare(partners[b].name ?? b));

  return (
    <form id="prefs-form" class="prefs" onSubmit={save}>
      <section class="card">
        <h2>
          <label for="pref-tz">Time zone</label>
        </h2>
        {zones.length ? (
          <select
            id="pref-tz"
            value={zone}
            onChange={(e) => {
              setZone((e.target as HTMLSelectElement).value);
              changed();
            }}
            {...described(zoneError, "pref-tz-err", "pref-tz-hint")}
          >
            {zone ? null : <option value="">Choose your time zone</option>}
            {zones.map((z) => (
              <option key={z} value={z}>
                {z.replace(/_/g, " ")}
              </option>
            ))}
          </select>
        ) : (
          <input
            id="pref-tz"
            autocomplete="off"
            spellcheck={false}
            placeholder="Europe/Berlin"
            value={zone}
            onInput={(e) => {
              setZone((e.target as HTMLInputElement).value);
              changed();
            }}
            {...described(zoneError, "pref-tz-err", "pref-tz-hint")}
          />
        )}
        {zoneError ? (
          <p id="pref-tz-err" class="field-error">
            {zoneError}
          </p>
        ) : null}
        <p id="pref-tz-hint" class="hint">
          {storedZone
            ? "Your quiet hours follow this time zone."
            : "Not saved yet: this is the time zone of this device. Your quiet hours follow it."}
        </p>
      </section>

      <section class="card">
        <div class="field check">
          <input
            type="checkbox"
            role="switch"
            id="pref-qh"
            checked={quiet}
            aria-describedby="qh-means"
            onChange={(e) => {
              setQuiet((e.target as HTMLInputElement).checked);
              changed();
            }}
          />
          <h2>
            <label for="pref-qh">Quiet hours</label>
          </h2>
        </div>
        {quiet ? (
          <div class="row">
            <div class="field">
              <label for="pref-qh-start">Starts at</label>
              <input
                type="time"
                id="pref-qh-start"
                required
                value={start}
                onInput={(e) => {
                  setStart((e.target as HTMLInputElement).value);
                  changed();
                }}
                {...described(startError, "pref-qh-start-err")}
              />
              {startError ? (
                <p id="pref-qh-start-err" class="field-error">
                  {startError}
                </p>
              ) : null}
            </div>
            <div class="field">
              <label for="pref-qh-end">Ends at</label>
              <input
                type="time"
                id="pref-qh-end"
                required
                value={end}
                onInput={(e) => {
                  setEnd((e.target as HTMLInputElement).value);
                  changed();
                }}
                {...described(endError, "pref-qh-end-err")}
              />
              {endError ? (
                <p id="pref-qh-end-err" class="field-error">
                  {endError}
                </p>
              ) : null}
            </div>
          </div>
        ) : null}
        <p id="qh-means" class="hint">
          During quiet hours, in your time zone, notifications and marketing messages wait until they end. One-time codes and
          replies in conversations you opened still come. Messages in the app arrive silently.
        </p>
      </section>

      <section class="card">
        <h2 id="ch-h">Channels</h2>
        <div class="row" role="group" aria-labelledby="ch-h" aria-describedby="ch-means">
          {(
            [
              ["whatsapp", "WhatsApp"],
              ["sms", "SMS"],
            ] as const
          ).map(([key, label]) => (
            <div class="field check" key={key}>
              <input
                type="checkbox"
                id={`pref-ch-${key}`}
                checked={channels[key]}
                onChange={(e) => {
                  const on = (e.target as HTMLInputElement).checked;
                  setChannels((c) => ({ ...c, [key]: on }));
                  changed();
                }}
              />
              <label for={`pref-ch-${key}`}>{label}</label>
            </div>
          ))}
        </div>
        <p id="ch-means" class="hint">
          Besides the app, your messages may come by WhatsApp or SMS. A channel you turn off is never used: those messages wait
          for you in the app instead.
        </p>
      </section>

      <section class="card">
        <h2 id="pp-h">Partners</h2>
        <dl class="summary">
          {FLAGS.map((f) => (
            <div key={f.key}>
              <dt>{f.label}</dt>
              <dd id={`pp-means-${f.key}`}>{f.means}</dd>
            </div>
          ))}
        </dl>
        {codes.length ? (
          <ul class="plain partners">
            {codes.map((code, i) => {
              const p = partners[code];
              return (
                <li key={code}>
                  <fieldset class="field">
                    <legend>
                      {p.name || code} <span class="meta">({code})</span>
                    </legend>
                    <div class="row">
                      {FLAGS.map((f) => (
                        <div class="field check" key={f.key}>
                          <input
                            type="checkbox"
                            id={`pp-${i}-${f.key}`}
                            checked={!!p[f.key]}
                            aria-describedby={`pp-means-${f.key}`}
                            onChange={(e) => {
                              const on = (e.target as HTMLInputElement).checked;
                              setPartners((all) => ({ ...all, [code]: { ...all[code], [f.key]: on } }));
                              changed();
                            }}
                          />
                          <label for={`pp-${i}-${f.key}`}>{f.label}</label>
                        </div>
                      ))}
                    </div>
                  </fieldset>
                </li>
              );
            })}
          </ul>
        ) : (
          <p class="muted">No partner has sent you a message yet.</p>
        )}
      </section>

      <ErrorNote error={error} />
      <div class="row">
        <button type="submit" class="primary" disabled={busy}>
          {busy ? "Saving…" : "Save"}
        </button>
      </div>
      <p role="status" class="hint">
        {saved ? "Your preferences are saved." : ""}
      </p>
    </form>
  );
}
