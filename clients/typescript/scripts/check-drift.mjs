// Fails when src/schema.d.ts is not what `npm run generate` makes from docs/openapi.json now:
// regenerates into a temporary file with the pinned openapi-typescript and compares byte for byte.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const committed = join(root, "src", "schema.d.ts");
const dir = mkdtempSync(join(tmpdir(), "hubbub-schema-"));
const fresh = join(dir, "schema.d.ts");
try {
  const cli = join(root, "node_modules", "openapi-typescript", "bin", "cli.js");
  const run = spawnSync(process.execPath, [cli, "../../docs/openapi.json", "--output", fresh], {
    cwd: root,
    encoding: "utf8",
  });
  if (run.status !== 0) {
    process.stderr.write(run.stdout + run.stderr);
    console.error("openapi-typescript failed on docs/openapi.json");
    process.exit(1);
  }
  // Anything it says besides its banner and the one success line is a warning about the document.
  const noise = (run.stdout + run.stderr)
    .split("\n")
    .filter((l) => l.trim() && !/openapi-typescript \d|→/.test(l));
  if (noise.length) process.stderr.write(`openapi-typescript said:\n${noise.join("\n")}\n`);
  const want = readFileSync(fresh, "utf8");
  const have = readFileSync(committed, "utf8");
  if (want !== have) {
    const a = have.split("\n");
    const b = want.split("\n");
    let i = 0;
    while (i < a.length && i < b.length && a[i] === b[i]) i++;
    console.error(
      `src/schema.d.ts is out of date with docs/openapi.json (first difference at line ${i + 1}:\n` +
        `  committed: ${a[i] ?? "<end of file>"}\n  generated: ${b[i] ?? "<end of file>"})\n` +
        "Run `npm run generate` in clients/typescript and commit src/schema.d.ts.",
    );
    process.exit(1);
  }
  console.log("src/schema.d.ts matches docs/openapi.json");
} finally {
  rmSync(dir, { recursive: true, force: true });
}
