// The signed-in member's own profile: their display name, which the people they answer see (its first word,
// on each reply) and the partner's members see whole (assignments, notes, the thread).
import { useState } from "preact/hooks";
import { errorText, firstName } from "../shared/format";
import { Alert } from "../shared/ui";
import { patch, type MemberSession } from "./api";
import { useTitle } from "./page";

export function Profile({ session, onChange }: { session: MemberSession; onChange: (s: MemberSession) => void }) {
  useTitle("Your profile");
  const [name, setName] = useState(session.member.name ?? "");
  const [error, setError] = useState<string | null>(null);
  const [status, setStatus] = useState("");
  const [busy, setBusy] = useState(false);
  const first = firstName(name);
  const save = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const s = await patch<MemberSession>("/members/me", { name: name.trim() });
      onChange(s);
      setStatus(`Saved: people you answer now see “${firstName(s.member.name)}” on your replies.`);
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <section class="page" aria-labelledby="profile-h">
      <h1 id="profile-h">Your profile</h1>
      <p class="hint">
        {session.member.phone} · {session.member.role} at {session.partner.name}
      </p>
      <form class="card invite" onSubmit={save}>
        <label for="my-name">Your name</label>
        <input id="my-name" autocomplete="name" maxLength={100} required value={name} onInput={(e) => setName(e.currentTarget.value)} />
        <p class="hint">
          {first ? `People you answer see “${first}” on your replies; your team sees your whole name.` : `Without a name, people you answer see “${session.partner.name}”.`}
        </p>
        <button class="primary" disabled={busy}>
          Save name
        </button>
      </form>
      <Alert text={error} />
      <p role="status" class="hint">
        {status}
      </p>
    </section>
  );
}
