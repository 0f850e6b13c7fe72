// "Typing…" both ways in a support conversation: the side that writes tells the service at most every
// 2 seconds while it writes (`POST …/typing`), and the other side shows it for 6 seconds after the last
// signal, or until that side's message comes (the service's `conversations::TYPING_*`).
import { useEffect, useRef, useState } from "preact/hooks";

const EVERY_MS = 2000;
const SHOWN_MS = 6000;

/** A function to call on each keystroke: it calls `tell` at most every 2 seconds (a failure is ignored: a
 * typing signal is never worth an error). */
export function useTypingSignal(tell: () => Promise<unknown>, deps: unknown[]): () => void {
  const last = useRef(0);
  useEffect(() => {
    last.current = 0;
  }, deps);
  return () => {
    const now = Date.now();
    if (now - last.current < EVERY_MS) return;
    last.current = now;
    tell().catch(() => undefined);
  };
}

/** Whether the other side is typing: `[shown, heard, stopped]` — `heard()` on each signal, `stopped()` when
 * their message comes. */
export function useTypingShown(deps: unknown[]): [boolean, () => void, () => void] {
  const [shown, setShown] = useState(false);
  const timer = useRef<number | undefined>(undefined);
  const stopped = () => {
    clearTimeout(timer.current);
    setShown(false);
  };
  useEffect(() => stopped, deps);
  const heard = () => {
    clearTimeout(timer.current);
    setShown(true);
    timer.current = window.setTimeout(() => setShown(false), SHOWN_MS);
  };
  return [shown, heard, stopped];
}
