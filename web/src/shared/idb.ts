// IndexedDB as the app uses it: a database of plain object stores, opened once, and one request per
// transaction, answered when the transaction has committed.

/** A database of `stores` (each keyed out of line unless a key path is given), opened on first use. */
export function database(name: string, stores: Record<string, IDBObjectStoreParameters | undefined>) {
  let opened: Promise<IDBDatabase> | null = null;
  const open = () => {
    opened ??= new Promise((resolve, reject) => {
      const req = indexedDB.open(name, 1);
      req.onupgradeneeded = () => Object.entries(stores).forEach(([store, options]) => req.result.createObjectStore(store, options));
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
    opened.catch(() => (opened = null));
    return opened;
  };
  /** Runs `f` on `store` in a transaction of its own; answers the request's result once committed. */
  return function run<T>(store: string, mode: IDBTransactionMode, f: (s: IDBObjectStore) => IDBRequest<T>): Promise<T> {
    return open().then(
      (db) =>
        new Promise<T>((resolve, reject) => {
          const tx = db.transaction(store, mode);
          const req = f(tx.objectStore(store));
          tx.oncomplete = () => resolve(req.result);
          tx.onerror = () => reject(tx.error);
          tx.onabort = () => reject(tx.error);
        }),
    );
  };
}
