// The partner console at /console/: a partner's members sign in with their phone and a one-time code
// (the first time with the invitation link an owner gave them), agents answer conversations — filter,
// assign, reply, keep internal notes, close — admins run the account (bots, webhooks, keys, canned replies,
// messages, templates, broadcasts, accounts) and owners manage members and read the audit log; every member
// may add passkeys and sign in with them. One module per page; this one is the shell and its routes. It
// loads only on /console/ and shares the end-user app's toolchain, styles and generated API types.
import "../shared/styles.css";
import "../shared/console.css";
import { render } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { del, get, onSignedOut, patch, type Member, type MemberSession, type Page } from "./api";
import { errorText } from "../shared/format";
import { startLive, stopLive, useLiveStatus } from "./live";
import { go, usePath, Link } from "./nav";
import { Inbox } from "./inbox";
import { SignIn } from "./signin";
import { Messages } from "./messages";
import { Templates } from "./templates";
import { Members, Audit } from "./members";
import { Webhooks } from "./webhooks";
import { Keys } from "./keys";
import { Bots } from "./bots";
import { Desk } from "./desk";
import { Broadcasts } from "./broadcasts";
import { Accounts } from "./accounts";
import { Passkeys } from "./passkeys";
import { Profile } from "./profile";
import { Senders } from "./senders";
import { Data } from "./data";
import { Analytics } from "./analytics";

// ---- The signed-in console ----

/** The member's status, which they set here: only those online are given conversations when the partner
 * assigns by itself, and going offline hands theirs back to the queue. */
function Presence({ session, onSession }: { session: MemberSession; onSession: (s: MemberSession) => void }) {
  const [error, setError] = useState<string | null>(null);
  return (
    <span class="presence-pick">
      <label for="my-status" class="sr-only">
        Your status
      </label>
      <select
        id="my-status"
        class={`presence-${session.member.status}`}
        value={session.member.status}
        title={error ?? "Only agents online are given new conversations; offline hands yours back to the queue"}
        onChange={(e) => {
          const status = e.currentTarget.value;
          patch<MemberSession>("/members/me", { status }).then(
            (s) => {
              setError(null);
              onSession(s);
            },
            (err) => setError(errorText(err)),
          );
        }}
      >
        <option value="online">● Online</option>
        <option value="away">◐ Away</option>
        <option value="offline">○ Offline</option>
      </select>
      {error ? (
        <span role="alert" class="sr-only">
          {error}
        </span>
      ) : null}
    </span>
  );
}

function Shell({
  session,
  onSignOut,
  onLeaving,
  onSession,
}: {
  session: MemberSession;
  onSignOut: () => void;
  /** Called as a sign-out by choice starts: the refusals it brings are not a session that ended. */
  onLeaving: () => void;
  onSession: (s: MemberSession) => void;
}) {
  const path = usePath();
  const owner = session.member.role === "owner";
  const admin = owner || session.member.role === "admin";
  const [members, setMembers] = useState<Member[]>([]);
  const live = useLiveStatus();
  useEffect(() => {
    get<Page<Member>>("/members").then((p) => setMembers(p.data), () => undefined);
  }, [path]);
  useEffect(() => {
    // Ended by the server (signed out elsewhere, or idle): the next request says so and signs this page out.
    const check = () => void get("/members/me").catch(() => undefined);
    startLive(check, check);
    return stopLive;
  }, []);
  const signOut = async (everywhere: boolean) => {
    stopLive();
    onLeaving();
    await del(everywhere ? "/members/sessions" : "/members/sessions/current").catch(() => undefined);
    onSignOut();
  };
  const nav = [
    { href: "/console/", label: "Conversations", on: path === "/console/" || path.startsWith("/console/c/") },
    ...(admin
      ? [
          { href: "/console/bots", label: "Bots", on: path.startsWith("/console/bots") },
          { href: "/console/webhooks", label: "Webhooks", on: path.startsWith("/console/webhooks") },
          { href: "/console/keys", label: "API keys", on: path.startsWith("/console/keys") },
          { href: "/console/numbers", label: "Numbers", on: path.startsWith("/console/numbers") },
          { href: "/console/desk", label: "Desk", on: path.startsWith("/console/desk") || path.startsWith("/console/canned") },
          { href: "/console/messages", label: "Messages", on: path.startsWith("/console/messages") },
          { href: "/console/broadcasts", label: "Broadcasts", on: path.startsWith("/console/broadcasts") },
          { href: "/console/accounts", label: "Accounts", on: path.startsWith("/console/accounts") },
          { href: "/console/templates", label: "Templates", on: path.startsWith("/console/templates") },
          { href: "/console/data", label: "Data", on: path.startsWith("/console/data") },
          { href: "/console/analytics", label: "Analytics", on: path.startsWith("/console/analytics") },
        ]
      : []),
    ...(owner
      ? [
          { href: "/console/members", label: "Members", on: path.startsWith("/console/members") },
          { href: "/console/audit", label: "Audit log", on: path.startsWith("/console/audit") },
        ]
      : []),
    { href: "/console/passkeys", label: "Passkeys", on: path.startsWith("/console/passkeys") },
  ];
  const conversation = path.match(/^\/console\/c\/(\d+)$/)?.[1];
  let page;
  if (path.startsWith("/console/members") && owner) page = <Members self={session.member} />;
  else if (path.startsWith("/console/audit") && owner) page = <Audit />;
  else if (path.startsWith("/console/webhooks") && admin) page = <Webhooks />;
  else if (path.startsWith("/console/bots") && admin) page = <Bots />;
  else if (path.startsWith("/console/keys") && admin) page = <Keys />;
  else if (path.startsWith("/console/numbers") && admin) page = <Senders />;
  else if ((path.startsWith("/console/desk") || path.startsWith("/console/canned")) && admin) page = <Desk members={members} />;
  else if (path.startsWith("/console/messages") && admin) page = <Messages />;
  else if (path.startsWith("/console/templates") && admin) page = <Templates />;
  else if (path.startsWith("/console/broadcasts") && admin) page = <Broadcasts />;
  else if (path.startsWith("/console/accounts") && admin) page = <Accounts />;
  else if (path.startsWith("/console/data") && admin) page = <Data />;
  else if (path.startsWith("/console/analytics") && admin) page = <Analytics />;
  else if (path.startsWith("/console/passkeys")) page = <Passkeys />;
  else if (path.startsWith("/console/profile")) page = <Profile session={session} onChange={onSession} />;
  else page = <Inbox session={session} members={members} open={conversation ? Number(conversation) : null} />;
  return (
    <div class="console">
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="console-top">
        <strong>{session.partner.name}</strong>
        <nav aria-label="Console">
          {nav.map((n) => (
            <Link href={n.href} class={n.on ? "on" : ""} aria-current={n.on ? "page" : undefined}>
              {n.label}
            </Link>
          ))}
        </nav>
        {live === "reconnecting" ? (
          <span class="live-note" role="status">
            Reconnecting…
          </span>
        ) : null}
        <Presence session={session} onSession={onSession} />
        <Link href="/console/profile" class={path.startsWith("/console/profile") ? "meta on" : "meta"} aria-current={path.startsWith("/console/profile") ? "page" : undefined}>
          <span class="sr-only">Your profile: </span>
          {session.member.name || session.member.phone} · {session.member.role}
        </Link>
        <button type="button" onClick={() => signOut(false)}>
          Sign out
        </button>
        <button type="button" onClick={() => signOut(true)}>
          Sign out everywhere
        </button>
      </header>
      <main id="main">{page}</main>
    </div>
  );
}

function Console() {
  const [session, setSession] = useState<MemberSession | null | undefined>(undefined);
  const [flash, setFlash] = useState<string | null>(null);
  // Whether someone is signed in on this page: only then does a 401 mean their session ended (the first
  // look at /members/me answers 401 to someone who never signed in, and a refused code is not an ending).
  const signedIn = useRef(false);
  signedIn.current = !!session;
  // Signing out by choice: a call still in flight when the session ends answers 401 too, and is no ending.
  const leaving = useRef(false);
  useEffect(() => {
    get<MemberSession>("/members/me").then(setSession, () => setSession(null));
    return onSignedOut(() => {
      if (signedIn.current && !leaving.current) setFlash("Your session has ended. Please sign in again.");
      setSession(null);
    });
  }, []);
  if (session === undefined) return <p class="muted console-signin">Loading…</p>;
  if (!session)
    return (
      <>
        {flash ? (
          <p class="flash" role="alert">
            {flash}
          </p>
        ) : null}
        <SignIn
          onSignedIn={(s) => {
            leaving.current = false;
            setFlash(null);
            setSession(s);
            go("/console/");
          }}
        />
      </>
    );
  return (
    <Shell
      session={session}
      onSession={setSession}
      onLeaving={() => {
        leaving.current = true;
      }}
      onSignOut={() => {
        setSession(null);
        go("/console/");
      }}
    />
  );
}

render(<Console />, document.getElementById("console")!);
