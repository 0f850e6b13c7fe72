// The media viewer: an image opens full size over the app, zooms (buttons, + and -, a click), moves to the
// next or previous image of the list it was opened from (buttons, arrow keys), and downloads. A document
// the browser can show opens in place too: a PDF in the browser's own PDF viewer, a text file (plain,
// CSV, Markdown, JSON) as text. Escape or Close returns to where the user was, with the focus back on what
// they opened.
import { useEffect, useRef, useState } from "preact/hooks";

/** How the viewer shows a file: an image, a PDF, or text. */
export type ViewKind = "image" | "pdf" | "text";

/** The largest text file shown in place (the rest is in the download). */
const TEXT_LIMIT = 512 * 1024;

const TEXT_TYPES = ["text/plain", "text/csv", "text/markdown", "text/tab-separated-values", "application/json"];
const TEXT_EXTENSIONS = /\.(txt|csv|tsv|md|json|log)$/i;

/** How a document of `mimetype` named `filename` opens in place, or null when it can only be downloaded. */
export function documentKind(mimetype: string | null | undefined, filename: string | null | undefined): ViewKind | null {
  const essence = (mimetype ?? "").split(";")[0].trim().toLowerCase();
  const name = filename ?? "";
  if (essence === "application/pdf" || (!essence.startsWith("text/") && /\.pdf$/i.test(name))) return "pdf";
  if (TEXT_TYPES.includes(essence) || ((essence === "" || essence === "application/octet-stream") && TEXT_EXTENSIONS.test(name))) return "text";
  return null;
}

export interface Viewable {
  ref: string;
  kind: ViewKind;
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
  const image = item.kind === "image";
  const label = image ? `Image ${state.index + 1} of ${n}` : `Document: ${item.filename || item.alt}`;
  return (
    <div class="viewer" role="dialog" aria-modal="true" aria-label={label}>
      <div class="viewer-bar">
        <button type="button" ref={close} onClick={closeViewer}>
          ✕ Close
        </button>
        <span class="meta" aria-live="polite">
          {image ? `${state.index + 1} of ${n}` : item.filename || item.alt}
        </span>
        <span class="viewer-tools">
          {image ? (
            <>
              <button type="button" onClick={() => zoomBy(-1)} disabled={zoom === 0} aria-label="Zoom out">
                −
              </button>
              <span class="meta" data-zoom={scale}>
                {Math.round(scale * 100)}%
              </span>
              <button type="button" onClick={() => zoomBy(1)} disabled={zoom === ZOOMS.length - 1} aria-label="Zoom in">
                +
              </button>
            </>
          ) : null}
          <a class="button" href={item.src} download={item.filename || true} data-external>
            Download
          </a>
        </span>
      </div>
      {image ? (
        <div class={"viewer-stage" + (scale > 1 ? " zoomed" : "")} onClick={(e) => e.target === e.currentTarget || setZoom((z) => (z ? 0 : 2))}>
          <img src={item.src} alt={item.alt} style={{ width: scale > 1 ? `${scale * 100}%` : undefined }} />
        </div>
      ) : (
        <DocumentStage item={item} />
      )}
      {item.caption ? <p class="viewer-caption">{item.caption}</p> : null}
      {n > 1 ? (
        <>
          <button type="button" class="viewer-prev" onClick={() => go(-1)} disabled={state.index === 0} aria-label="Previous image">
            ‹
          </button>
          <button type="button" class="viewer-next" onClick={() => go(1)} disabled={state.index === n - 1} aria-label="Next image">
            ›
          </button>
        </>
      ) : null}
    </div>
  );
}

type Loaded = { state: "loading" } | { state: "pdf"; url: string; bytes: number } | { state: "text"; text: string; cut: boolean } | { state: "failed" };

/**
 * A document shown in place. Its bytes are fetched from its content link (which serves every document as a
 * sandboxed download) and shown from a blob of the declared type: a PDF in the browser's PDF viewer, so no
 * document ever runs as a page of this origin; text as text, never as markup.
 */
function DocumentStage({ item }: { item: Viewable }) {
  const [loaded, setLoaded] = useState<Loaded>({ state: "loading" });
  useEffect(() => {
    let url: string | null = null;
    let gone = false;
    (async () => {
      const res = await fetch(item.src, { credentials: "omit" });
      if (!res.ok) throw new Error(String(res.status));
      const bytes = await res.arrayBuffer();
      if (gone) return;
      if (item.kind === "pdf") {
        url = URL.createObjectURL(new Blob([bytes], { type: "application/pdf" }));
        setLoaded({ state: "pdf", url, bytes: bytes.byteLength });
      } else {
        const cut = bytes.byteLength > TEXT_LIMIT;
        const text = new TextDecoder("utf-8").decode(cut ? bytes.slice(0, TEXT_LIMIT) : bytes);
        setLoaded({ state: "text", text, cut });
      }
    })().catch(() => gone || setLoaded({ state: "failed" }));
    return () => {
      gone = true;
      if (url) URL.revokeObjectURL(url);
    };
  }, [item.src, item.kind]);
  const name = item.filename || "the document";
  switch (loaded.state) {
    case "loading":
      return (
        <div class="viewer-stage doc" aria-busy="true">
          <p>Opening {name}…</p>
        </div>
      );
    case "failed":
      return (
        <div class="viewer-stage doc" role="alert">
          <p>{name} could not be opened here. Use Download to keep a copy.</p>
        </div>
      );
    case "pdf":
      return (
        <div class="viewer-stage doc">
          <iframe class="viewer-pdf" src={loaded.url} title={name} data-bytes={loaded.bytes} />
        </div>
      );
    case "text":
      return (
        <div class="viewer-stage doc">
          <pre class="viewer-text" tabIndex={0} aria-label={name}>
            {loaded.text}
          </pre>
          {loaded.cut ? <p class="viewer-caption">The first {TEXT_LIMIT / 1024} KB are shown; Download has the whole file.</p> : null}
        </div>
      );
  }
}
