// The image viewer: an image opens full size over the app, zooms (buttons, + and -, a click), moves to the
// next or previous image of the list it was opened from (buttons, arrow keys), and downloads. Escape or
// Close returns to where the user was, with the focus back on the image they opened.
import { useEffect, useRef, useState } from "preact/hooks";

export interface Viewable {
  ref: string;
  src: string;
  /** The caption, or what the image is when it has none. */
  alt: string;
  caption: string | null;
  filename: string | null;
}

interface Open {
  items: Viewable[];
  index: number;
  opener: HTMLElement | null;
}

let open: Open | null = null;
const listeners = new Set<() => void>();
const changed = () => listeners.forEach((l) => l());

/** Opens `ref` among `items` (the images of the list it was opened from). */
export function openViewer(items: Viewable[], ref: string) {
  const index = Math.max(0, items.findIndex((i) => i.ref === ref));
  open = { items: items.length ? items : [], index, opener: document.activeElement as HTMLElement | null };
  changed();
}

function closeViewer() {
  const opener = open?.opener;
  open = null;
  changed();
  opener?.focus?.();
}

const ZOOMS = [1, 1.5, 2, 3, 4];

/** Where the viewer shows, once for the app. */
export function ViewerHost() {
  const [, render] = useState(0);
  useEffect(() => {
    const l = () => render((n) => n + 1);
    listeners.add(l);
    return () => void listeners.delete(l);
  }, []);
  if (!open || !open.items.length) return null;
  return <Viewer key={open.items[open.index].ref} state={open} />;
}

function Viewer({ state }: { state: Open }) {
  const [zoom, setZoom] = useState(0);
  const close = useRef<HTMLButtonElement>(null);
  const item = state.items[state.index];
  const n = state.items.length;
  const go = (step: number) => {
    const index = state.index + step;
    if (!open || index < 0 || index >= n) return;
    open = { ...open, index };
    changed();
  };
  const zoomBy = (step: number) => setZoom((z) => Math.min(ZOOMS.length - 1, Math.max(0, z + step)));
  useEffect(() => {
    close.current?.focus();
    const onKey = (e: KeyboardEvent) => {
      if (e.key === "Escape") closeViewer();
      else if (e.key === "ArrowRight") go(1);
      else if (e.key === "ArrowLeft") go(-1);
      else if (e.key === "+" || e.key === "=") zoomBy(1);
      else if (e.key === "-") zoomBy(-1);
      else if (e.key === "0") setZoom(0);
      else return;
      e.preventDefault();
    };
    document.addEventListener("keydown", onKey);
    document.body.classList.add("no-scroll");
    return () => {
      document.removeEventListener("keydown", onKey);
      document.body.classList.remove("no-scroll");
    };
  }, [state.index]);
  const scale = ZOOMS[zoom];
  return (
    <div class="viewer" role="dialog" aria-modal="true" aria-label={`Image ${state.index + 1} of ${n}`}>
      <div class="viewer-bar">
        <button type="button" ref={close} onClick={closeViewer}>
          ✕ Close
        </button>
        <span class="meta" aria-live="polite">
          {state.index + 1} of {n}
        </span>
        <span class="viewer-tools">
          <button type="button" onClick={() => zoomBy(-1)} disabled={zoom === 0} aria-label="Zoom out">
            −
          </button>
          <span class="meta" data-zoom={scale}>
            {Math.round(scale * 100)}%
          </span>
          <button type="button" onClick={() => zoomBy(1)} disabled={zoom === ZOOMS.length - 1} aria-label="Zoom in">
            +
          </button>
          <a class="button" href={item.src} download={item.filename || true} data-external>
            Download
          </a>
        </span>
      </div>
      <div class={"viewer-stage" + (scale > 1 ? " zoomed" : "")} onClick={(e) => e.target === e.currentTarget || setZoom((z) => (z ? 0 : 2))}>
        <img src={item.src} alt={item.alt} style={{ width: scale > 1 ? `${scale * 100}%` : undefined }} />
      </div>
      {item.caption ? <p class="viewer-caption">{item.caption}</p> : null}
      <button type="button" class="viewer-prev" onClick={() => go(-1)} disabled={state.index === 0} aria-label="Previous image">
        ‹
      </button>
      <button type="button" class="viewer-next" onClick={() => go(1)} disabled={state.index === n - 1} aria-label="Next image">
        ›
      </button>
    </div>
  );
}
