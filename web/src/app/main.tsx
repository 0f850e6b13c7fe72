import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { auth, onSignedOut, type LoggedIn, type Unread } from "./api";
import { publishDeviceKey } from "./keystore";
import { close as closeLive, startLive, useLiveStatus } from "./live";
import { startUnread, stopUnread, useUnread } from "./unread";
import { ViewerHost } from "./viewer";
import { useOffline } from "./offline";
import { when } from "../shared/format";
import { navigate, useLocation, useRouteFocus } from "./router";
import "../shared/styles.css";
import { AccountView } from "./views/account";
import { BotChat, Bots } from "./views/bots";
import { ConversationView, Conversations, NewConversation } from "./views/conversations";
import { FlowRun, Forms } from "./views/forms";
import { FormLink } from "./views/formlink";
import { Inbox, MessageView, resetInbox } from "./views/inbox";
import { Login } from "./views/login";
import { PreferencesView } from "./views/preferences";

// Each area with the unread count it shows, if any.
const NAV: { href: string; label: string; match: (p: string) => boolean; unread?: keyof Unread }[] = [
  { href: "/", label: "Inbox", match: (p: string) => p === "/" || p.startsWith("/m/"), unread: "messages" },
  { href: "/forms", label: "Forms", match: (p: string) => p.startsWith("/forms") },
  { href: "/conversations", label: "Support", match: (p: string) => p.startsWith("/conversations"), unread: "conversations" },
  { href: "/bots", label: "Bots", match: (p: string) => p.startsWith("/bots"), unread: "bots" },
  { href: "/account", label: "Account", match: (p: string) => p.startsWith("/account") },
];

/** Only same-app paths are followed after login. */
function safeNext(next: string | null): string {
  return next && next.startsWith("/") && !next.startsWith("//") && !next.startsWith("/login") ? next : "/";
}

function App() {
  let { path, query } = useLocation();
  const [token, setToken] = useState(auth.token());
  const [flash, setFlash] = useState<string | null>(null);
  useRouteFocus();

  const live = useLiveStatus();
  const offline = useOffline();
  const unread = useUnread();
  const signedOut = () => {
    closeLive();
    stopUnread();
    setToken(null);
    resetInbox();
    setFlash(auth.flash());
    const here = location.pathname + location.search;
    navigate(location.pathname === "/login" ? here : `/login?next=${encodeURIComponent(here)}`, true);
  };
  useEffect(() => onSignedOut(signedOut), []);

  // One live event stream while signed in; the server ends it for a signed-out token.
  useEffect(() => {
    if (!token) return;
    startUnread();
    startLive(() => {
      auth.clear();
      auth.flash("Your session has expired or was signed out. Please log in again.");
      signedOut();
    });
  }, [token]);

  // Publish this browser's device key once per load (the same key again is a no-op on the server).
  useEffect(() => {
    if (token) publishDeviceKey().catch(() => {});
  }, [token]);

  // A form sent as a link on WhatsApp or SMS opens without a login: the link is its capability.
  const linked = path.match(/^\/f\/([^/]+)$/);
  if (linked) {
    return (
      <div class="shell">
        <header class="top">
          <span class="brand">
            <img src="/icon.svg" alt="" width={28} height={28} />
            <span>Hubbub</span>
          </span>
        </header>
        <main id="main" tabIndex={-1}>
          <FormLink key={linked[1]} token={decodeURIComponent(linked[1])} />
        </main>
      </div>
    );
  }
  if (!token) {
    // Redirects during render only rewrite the address: the view below is already the right one.
    if (path !== "/login") {
      history.replaceState({ app: true }, "", `/login?next=${encodeURIComponent(path + location.search)}`);
      query = new URLSearchParams(location.search);
    }
    return (
      <Login
        flash={flash ?? auth.flash()}
        done={async (r: LoggedIn) => {
          auth.set(r.token);
          await publishDeviceKey().catch(() => {});
          setFlash(null);
          setToken(r.token);
          navigate(safeNext(query.get("next")), true);
        }}
      />
    );
  }
  if (path === "/login") {
    history.replaceState({ app: true }, "", safeNext(query.get("next")));
    path = location.pathname;
  }

  const logout = () => {
    closeLive();
    stopUnread();
    auth.clear();
    resetInbox();
    setToken(null);
    setFlash("You are logged out.");
    navigate("/login", true);
  };

  const seg = path.split("/").filter(Boolean).map(decodeURIComponent);
  let view;
  if (seg.length === 0) view = <Inbox />;
  else if (seg[0] === "m" && seg[1]) view = <MessageView key={seg[1]} msgRef={seg[1]} />;
  else if (seg[0] === "forms" && seg[1]) view = <FlowRun key={seg[1]} flowRef={seg[1]} />;
  else if (seg[0] === "forms") view = <Forms />;
  else if (seg[0] === "conversations" && seg[1] === "new") view = <NewConversation />;
  else if (seg[0] === "conversations" && seg[1]) view = <ConversationView key={seg[1]} convRef={seg[1]} />;
  else if (seg[0] === "conversations") view = <Conversations />;
  else if (seg[0] === "bots" && seg[1]) view = <BotChat key={seg[1]} bot={seg[1]} />;
  else if (seg[0] === "bots") view = <Bots />;
  else if (seg[0] === "account") view = <AccountView logout={logout} />;
  else if (seg[0] === "preferences") view = <PreferencesView />;
  else
    view = (
      <section>
        <h1>Not found</h1>
        <p>
          There is nothing at this address. <a href="/">Go to the inbox</a>.
        </p>
      </section>
    );

  return (
    <div class="shell">
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <a href="/" class="brand" aria-label="Hubbub, inbox">
          <img src="/icon.svg" alt="" width={28} height={28} />
          <span>Hubbub</span>
        </a>
        <nav aria-label="Main">
          <ul>
            {NAV.map((n) => (
              <li key={n.href}>
                <a href={n.href} aria-current={n.match(path) ? "page" : undefined}>
                  {n.label}
                  {n.unread && unread[n.unread] ? (
                    <span class="nav-count" data-unread={n.unread}>
                      <span class="sr-only">, </span>
                      {unread[n.unread]}
                      <span class="sr-only"> unread</span>
                    </span>
                  ) : null}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        {offline.offline ? (
          <p class="live-note offline-note" role="status">
            Offline<span class="sr-only">: showing what this device saved</span> · saved{" "}
            {offline.savedAt ? when(offline.savedAt, "short") : "earlier"}
          </p>
        ) : live === "reconnecting" ? (
          <p class="live-note" role="status">
            Reconnecting…
          </p>
        ) : null}
        {/* Beside the main navigation (which has no room for a sixth entry on a phone's bottom bar). */}
        <a href="/preferences" class="top-link" aria-current={path.startsWith("/preferences") ? "page" : undefined}>
          Preferences
        </a>
      </header>
      <main id="main" tabIndex={-1}>
        {view}
      </main>
      <ViewerHost />
    </div>
  );
}

render(<App />, document.getElementById("app")!);

if ("serviceWorker" in navigator && location.protocol !== "file:" && !import.meta.env.DEV) {
  window.addEventListener("load", () => navigator.serviceWorker.register("/sw.js").catch(() => {}));
  // A tapped notification opens its message here, when the app is already open.
  navigator.serviceWorker.addEventListener("message", (e) => {
    const url = e.data?.type === "open" ? e.data.url : null;
    if (typeof url === "string" && url.startsWith("/") && !url.startsWith("//")) navigate(url);
  });
}
