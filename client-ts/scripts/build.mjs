// The package's two builds, each with its type declarations: ESM in dist/ and CommonJS in
// dist/cjs/ (whose package.json says "commonjs", so Node and TypeScript read its .js and .d.ts
// files as CommonJS). package.json's "exports" gives `import` the one and `require` the other.
// Plain Node and the project's own tsc: `node scripts/build.mjs` (npm run build).

import { spawnSync } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const PACKAGE_DIR = join(dirname(fileURLToPath(import.meta.url)), "..");
const TSC = join(PACKAGE_DIR, "node_modules", "typescript", "bin", "tsc");
const DIST = join(PACKAGE_DIR, "dist");

rmSync(DIST, { recursive: true, force: true });
for (const project of ["tsconfig.json", "tsconfig.cjs.json"]) {
  const { status } = spawnSync(process.execPath, [TSC, "-p", project], { cwd: PACKAGE_DIR, stdio: "inherit" });
  if (status !== 0) {
    console.error(`tsc -p ${project} failed`);
    process.exit(status ?? 1);
  }
}
writeFileSync(join(DIST, "cjs", "package.json"), `${JSON.stringify({ type: "commonjs" }, null, 2)}\n`);
