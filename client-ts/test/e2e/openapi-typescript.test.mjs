// A stock generator on the served document: openapi-typescript (from the npm registry) makes
// types of GET /v1/openapi.json of a real server, with `format: date-time` mapped to a type of
// its own (openapi-typescript's documented `transform` option), and `tsc --noEmit` checks
// test/fixtures/openapi-typescript/program.ts against them: timestamps are date-times, and every
// event type has a webhook with its payload.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import openapiTS, { astToString } from "openapi-typescript";
import ts from "typescript";

import { SKIP, startServer } from "./server.mjs";

const PACKAGE_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const PROGRAM = join(PACKAGE_DIR, "test", "fixtures", "openapi-typescript", "program.ts");
const TSC = join(PACKAGE_DIR, "node_modules", "typescript", "bin", "tsc");
// A timestamp is a string on the wire; the brand makes "any string" and "a date-time" differ.
const DATE_TIME = 'export type DateTime = string & { readonly format: "date-time" };\n';

let server;
let workdir;

before(async () => {
  if (SKIP) return;
  server = await startServer();
  workdir = mkdtempSync(join(tmpdir(), "commerce-openapi-typescript-"));
});

after(async () => {
  await server?.stop();
  if (workdir) rmSync(workdir, { recursive: true, force: true });
});

test("openapi-typescript's types of the served document type-check a program", { skip: SKIP, timeout: 120_000 }, async () => {
  const response = await fetch(`${server.origin}/v1/openapi.json`);
  assert.equal(response.status, 200);
  const document = await response.json();

  const ast = await openapiTS(document, {
    transform(schema) {
      if (schema.format === "date-time") return ts.factory.createTypeReferenceNode("DateTime");
      return undefined;
    },
  });
  writeFileSync(join(workdir, "schema.ts"), DATE_TIME + astToString(ast));
  copyFileSync(PROGRAM, join(workdir, "program.ts"));

  const args = [TSC, "--noEmit", "--strict", "--noUnusedLocals", "--target", "ES2022"];
  args.push("--module", "ESNext", "--moduleResolution", "Bundler", "program.ts");
  try {
    await promisify(execFile)(process.execPath, args, { cwd: workdir, timeout: 90_000 });
  } catch (error) {
    assert.fail(`tsc found errors in the program or the generated types:\n${error.stdout}${error.stderr}`);
  }
});
