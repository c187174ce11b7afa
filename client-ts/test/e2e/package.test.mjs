// The built package as other projects use it, against a real `serve --demo`: an ES module project
// (`import`) and a CommonJS one (`require()`), each type-checked by tsc against the declarations
// its format resolves to and then run with node; and the README's first example, unedited but
// for the printed key, in such a project with `COMMERCE_BASE_URL` exported as the README says.
// Each project is a temporary directory whose node_modules/commerce-client links to this package.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { SKIP, startServer } from "./server.mjs";

const PACKAGE_DIR = realpathSync(join(dirname(fileURLToPath(import.meta.url)), "..", ".."));
const ESM_TYPES = join(PACKAGE_DIR, "dist", "index.d.ts");
const CJS_TYPES = join(PACKAGE_DIR, "dist", "cjs", "index.d.ts");
const REPO = join(PACKAGE_DIR, "..");
const TSC = join(PACKAGE_DIR, "node_modules", "typescript", "bin", "tsc");
const KEY_PLACEHOLDER = '"sk_sandbox_…"';
const DEMO_BOOKS = 10; // the demo catalogue's books (server/src/commerce_api/demo.py)
const run = promisify(execFile);

let server;
let printedBaseUrl;
const projects = [];

before(async () => {
  if (SKIP) return;
  server = await startServer();
  // `serve` announces "Commerce API (sandbox) on http://localhost:PORT/v1" on stderr.
  printedBaseUrl = /Commerce API \(sandbox\) on (http:\S+\/v1)/.exec(server.stderr())?.[1];
  assert.ok(printedBaseUrl, `serve printed no URL:\n${server.stderr()}`);
});

after(async () => {
  await server?.stop();
  for (const dir of projects) rmSync(dir, { recursive: true, force: true });
});

/** A project of `type` ("module" or "commonjs") that depends on this package. */
function project(type, files) {
  const dir = mkdtempSync(join(tmpdir(), `commerce-client-${type}-`));
  projects.push(dir);
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: `shop-${type}`, private: true, type }));
  mkdirSync(join(dir, "node_modules"));
  symlinkSync(PACKAGE_DIR, join(dir, "node_modules", "commerce-client"), "dir");
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

/** The project's environment: none of the caller's COMMERCE_* variables, plus `settings`. */
function environ(settings) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("COMMERCE_")));
  return { ...env, ...settings };
}

/** tsc on `file` in `dir` as a Node project of its package.json's type; the files it read.
 * (`--skipLibCheck`, as most projects: the declarations' own checks are the build's.) */
async function typeCheck(dir, file, { emit = false } = {}) {
  const args = [TSC, "--strict", "--skipLibCheck", "--target", "ES2022", "--module", "nodenext"];
  args.push("--types", "node", "--typeRoots", join(PACKAGE_DIR, "node_modules", "@types"), "--listFiles");
  if (!emit) args.push("--noEmit");
  try {
    const { stdout } = await run(process.execPath, [...args, file], { cwd: dir, timeout: 90_000 });
    return stdout.split("\n").map((line) => line.trim());
  } catch (error) {
    assert.fail(`tsc found errors in ${file}:\n${error.stdout}${error.stderr}`);
  }
}

async function node(dir, file, env) {
  const { stdout } = await run(process.execPath, [file], { cwd: dir, env, timeout: 60_000 });
  return JSON.parse(stdout);
}

// The same program in both formats: a typed call, an error class, and which file was loaded.
const TYPED = `
import { CommerceClient, NotFoundError, type Product } from "commerce-client";

export async function check(client: CommerceClient): Promise<Product | NotFoundError> {
  return client.products.get("prod_1").catch((error: unknown) => {
    if (error instanceof NotFoundError) return error;
    throw error;
  });
}
// @ts-expect-error: the options are typed
new CommerceClient({ maxRetries: "2" });
`;

const USE = `
  const client = new CommerceClient(); // COMMERCE_API_KEY, COMMERCE_BASE_URL
  const page = await client.products.list({ category: "books", limit: 2 });
  let missing = null;
  try {
    await client.products.get("prod_missing");
  } catch (error) {
    missing = error instanceof NotFoundError ? error.statusCode : String(error);
  }
  console.log(JSON.stringify({ resolved, count: page.data.length, missing, version: VERSION }));
`;

test("an ES module project imports the ESM build and its types", { skip: SKIP, timeout: 120_000 }, async () => {
  const dir = project("module", {
    "check.ts": TYPED,
    "main.js":
      'import { CommerceClient, NotFoundError, VERSION } from "commerce-client";\n' +
      'const resolved = fileURLToPath(import.meta.resolve("commerce-client"));\n' +
      `import { fileURLToPath } from "node:url";\n${USE}`,
  });
  const files = await typeCheck(dir, "check.ts");
  assert.ok(files.includes(ESM_TYPES) && !files.includes(CJS_TYPES), files.join("\n"));

  const out = await node(dir, "main.js", environ({ COMMERCE_API_KEY: server.clientKey, COMMERCE_BASE_URL: server.baseUrl }));
  assert.deepEqual(out, { resolved: join(PACKAGE_DIR, "dist", "index.js"), count: 2, missing: 404, version: "0.1.0" });
});

test("a CommonJS project requires the CommonJS build and its types", { skip: SKIP, timeout: 120_000 }, async () => {
  const dir = project("commonjs", {
    "check.ts": TYPED,
    "main.js":
      'const { CommerceClient, NotFoundError, VERSION } = require("commerce-client");\n' +
      'const resolved = require("node:fs").realpathSync(require.resolve("commerce-client"));\n' +
      `(async () => {${USE}})();\n`,
  });
  const files = await typeCheck(dir, "check.ts");
  assert.ok(files.includes(CJS_TYPES) && !files.includes(ESM_TYPES), files.join("\n"));

  const out = await node(dir, "main.js", environ({ COMMERCE_API_KEY: server.clientKey, COMMERCE_BASE_URL: server.baseUrl }));
  assert.deepEqual(out, { resolved: join(PACKAGE_DIR, "dist", "cjs", "index.js"), count: 2, missing: 404, version: "0.1.0" });
});

/** The first fenced block of `language` that starts a line (not an indented one). */
function firstBlock(markdown, language) {
  const match = new RegExp(`^\`\`\`${language}\\n([\\s\\S]*?)^\`\`\`$`, "m").exec(markdown);
  assert.ok(match, `no \`\`\`${language} block in the README`);
  return match[1];
}

test("the README's first example runs against make serve as printed", { skip: SKIP, timeout: 120_000 }, async () => {
  const readme = readFileSync(join(PACKAGE_DIR, "README.md"), "utf8");
  const shell = firstBlock(readme, "sh");
  const example = firstBlock(readme, "ts");
  assert.ok(readme.indexOf(shell) < readme.indexOf(example), "the export comes before the example");
  const exported = [...shell.matchAll(/^export COMMERCE_BASE_URL=(\S+)$/gm)].map((match) => match[1]);
  const port = /^PORT \?= (\d+)$/m.exec(readFileSync(join(REPO, "Makefile"), "utf8"))?.[1];
  // The README's URL is the one `make serve` prints, on its port.
  assert.deepEqual(exported, [printedBaseUrl.replace(/:\d+\/v1$/, `:${port}/v1`)]);
  assert.equal(example.split(KEY_PLACEHOLDER).length, 2, `the example has one ${KEY_PLACEHOLDER}`);

  const dir = project("module", { "example.ts": example.replace(KEY_PLACEHOLDER, JSON.stringify(server.clientKey)) });
  await typeCheck(dir, "example.ts", { emit: true });
  const { stdout } = await run(process.execPath, ["example.js"], {
    cwd: dir,
    env: environ({ COMMERCE_BASE_URL: printedBaseUrl }),
    timeout: 60_000,
  });
  const lines = stdout.trim().split("\n");
  assert.equal(lines.length, DEMO_BOOKS, stdout);
  for (const line of lines) assert.match(line, /^prod_\w+ .+ \d+(\.\d+)?$/);
});
