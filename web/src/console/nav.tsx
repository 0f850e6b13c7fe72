// Moving within the console without reloading it: the address as state, links, and polling while visible.
import { useEffect, useState } from "preact/hooks";

const listeners = new Set<() => void>();
export function go(path: string) {
  history.pushState(null, "", path);
  listeners.forEach((l) => l());
}
export function usePath(): string {
  const [path, setPath] = useState(location.pathname);
  useEffect(() => {
    const l = () => setPath(location.pathname);
    listeners.add(l);
    addEventListener("popstate", l);
    return () => {
      listeners.delete(l);
      removeEventListener("popstate", l);
    };
  }, []);
  return path;
}
/** A link that moves within the console without reloading it. */
export function Link({ href, children, ...rest }: { href: string; children: any; class?: string; "aria-current"?: "page" | undefined }) {
  return (
    <a
      href={href}
      {...rest}
      onClick={(e) => {
        if (e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return;
        e.preventDefault();
        go(href);
      }}
    >
      {children}
    </a>
  );
}
