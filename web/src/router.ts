// History API routing: one signal-like subscription for the current location.
import { useEffect, useState } from "preact/hooks";

type Listener = () => void;
const listeners = new Set<Listener>();

export function navigate(to: string, replace = false): void {
  if (to === location.pathname + location.search) return;
  if (replace) history.replaceState({ app: true }, "", to);
  else history.pushState({ app: true }, "", to);
  listeners.forEach((l) => l());
  window.scrollTo(0, 0);
}

window.addEventListener("popstate", () => listeners.forEach((l) => l()));

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
