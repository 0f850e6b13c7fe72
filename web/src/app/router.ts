// History API routing: one signal-like subscription for the current location.
import { useEffect, useRef, useState } from "preact/hooks";

type Listener = () => void;
const listeners = new Set<Listener>();

/** How many in-app navigations (and history moves) there have been. */
let navigations = 0;

export function navigate(to: string, replace = false): void {
  if (to === location.pathname + location.search) return;
  navigations++;
  if (replace) history.replaceState({ app: true }, "", to);
  else history.pushState({ app: true }, "", to);
  listeners.forEach((l) => l());
  window.scrollTo(0, 0);
}

window.addEventListener("popstate", () => {
  navigations++;
  listeners.forEach((l) => l());
});

// Same-origin <a href="/…"> clicks become navigations (modifier clicks open tabs as usual).
document.addEventListener("click", (e) => {
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const a = (e.target as Element).closest?.("a");
  if (!a || a.target || a.hasAttribute("download") || a.dataset.external !== undefined) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || url.pathname.startsWith("/api/")) return;
  e.preventDefault();
  navigate(url.pathname + url.search);
});

export function useLocation(): { path: string; query: URLSearchParams } {
  const [, set] = useState(0);
  useEffect(() => {
    const l = () => set((n) => n + 1);
    listeners.add(l);
    return () => void listeners.delete(l);
  }, []);
  return { path: location.pathname, query: new URLSearchParams(location.search) };
}

/**
 * After an in-app navigation, moves the focus to the new page's main heading (`#main h1`, given
 * `tabindex="-1"`), so keyboard and screen-reader users start on the new page. Not on the first render
 * (the login field keeps its focus), not when a page only re-renders (the address is unchanged), and not
 * when the view has already placed the focus inside the page itself (a dialog's close button). A heading
 * that renders later (after a load) is waited for, unless the user has moved the focus meanwhile.
 */
export function useRouteFocus(): void {
  const last = useRef<string | null>(null);
  const pending = useRef<(() => void) | null>(null);
  // Navigations so far, as this render saw them: an effect runs after the paint (or just before the next
  // render), when the app may already have navigated on while the page on screen is still this render's.
  // That effect leaves the focus to the next render's.
  const seen = navigations;
  useEffect(() => {
    if (seen !== navigations) return;
    const here = location.pathname + location.search;
    const prev = last.current;
    last.current = here;
    if (prev === null || prev === here) return;
    pending.current?.();
    pending.current = null;
    const main = document.getElementById("main");
    if (!main) return;
    const before = document.activeElement;
    const tryFocus = (): boolean => {
      const a = document.activeElement;
      // The user (or the view) moved the focus since the navigation: leave it there.
      if (a && a !== before && a !== document.body) return true;
      if (a && a !== document.body && main.contains(a) && a.isConnected) return true;
      const h = main.querySelector<HTMLElement>("h1");
      if (!h) return false;
      if (h.getAttribute("tabindex") !== "-1") h.setAttribute("tabindex", "-1");
      h.focus({ preventScroll: true });
      return true;
    };
    if (tryFocus()) return;
    // Kept across re-renders of the same page; a next navigation (or 5 s) ends the wait.
    const mo = new MutationObserver(() => {
      if (tryFocus()) stop();
    });
    const timer = setTimeout(() => stop(), 5000);
    const stop = () => {
      mo.disconnect();
      clearTimeout(timer);
      if (pending.current === stop) pending.current = null;
    };
    pending.current = stop;
    mo.observe(main, { childList: true, subtree: true });
  });
  useEffect(() => () => pending.current?.(), []);
}
