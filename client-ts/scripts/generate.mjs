#!/usr/bin/env node
// Generates src/generated/schema.ts from the OpenAPI snapshot openapi.json (plain Node, no
// dependencies).
//
//   npm run generate          openapi.json -> src/generated/schema.ts
//   npm run openapi:update    first refresh openapi.json from the server in this repository
//                             (../.venv/bin/python, create_app().openapi()), then generate
//   node scripts/generate.mjs --check
//                             exit 1 when src/generated/schema.ts is not what openapi.json
//                             generates (the unit tests do the same)
//
// The output has one type alias per component schema, an `Operations` type (method, path,
// path parameters, query, body, response of every /v1 operation) and the `OPERATIONS` table the
// client sends requests from, so a changed API changes the client's types, and the compile-time
// checks in src/types.ts fail where the hand-written parts no longer match.

import { createHash } from "node:crypto";
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const PACKAGE_DIR = join(dirname(fileURLToPath(import.meta.url)), "..");
export const SNAPSHOT_PATH = join(PACKAGE_DIR, "openapi.json");
export const OUTPUT_PATH = join(PACKAGE_DIR, "src", "generated", "schema.ts");
export const REPO_PYTHON = join(PACKAGE_DIR, "..", ".venv", "bin", "python");
const API_PREFIX = "/v1";
const HTTP_METHODS = ["get", "post", "put", "patch", "delete"];

/** The live document of the server in this repository, as a JSON string. */
export function liveOpenApiText(python = REPO_PYTHON) {
  return execFileSync(
    python,
    [
      "-c",
      "import json; from commerce_api.app.factory import create_app; " +
        "print(json.dumps(create_app().openapi(), indent=2, ensure_ascii=False))",
    ],
    { encoding: "utf8", cwd: join(PACKAGE_DIR, ".."), maxBuffer: 64 * 1024 * 1024 },
  );
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

function propertyName(name) {
  return IDENTIFIER.test(name) ? name : JSON.stringify(name);
}

function refName(ref) {
  const prefix = "#/components/schemas/";
  if (!ref.startsWith(prefix)) throw new Error(`unsupported $ref ${ref}`);
  const name = ref.slice(prefix.length);
  if (!IDENTIFIER.test(name)) throw new Error(`schema name ${name} is not an identifier`);
  return name;
}

function comment(lines, indent) {
  const text = lines.filter(Boolean).join("\n").replaceAll("*/", "*\\/").trim();
  if (!text) return "";
  const body = text.split("\n").map((line) => `${indent} *${line ? " " + line : ""}`);
  return `${indent}/**\n${body.join("\n")}\n${indent} */\n`;
}

function constraints(schema) {
  const found = [];
  for (const key of ["minLength", "maxLength", "minimum", "maximum", "minItems", "maxItems", "multipleOf"]) {
    if (schema[key] !== undefined) found.push(`${key} ${schema[key]}`);
  }
  if (schema.default !== undefined) found.push(`default ${JSON.stringify(schema.default)}`);
  return found.length ? `(${found.join(", ")})` : "";
}

function union(types) {
  const unique = [...new Set(types)];
  return unique.length === 1 ? unique[0] : unique.join(" | ");
}

/** The TypeScript type of a JSON schema. */
function tsType(schema, indent) {
  if (schema === true || schema === undefined || Object.keys(schema).length === 0) return "unknown";
  if (schema.$ref) return refName(schema.$ref);
  if (schema.const !== undefined) return JSON.stringify(schema.const);
  if (schema.enum) return union(schema.enum.map((value) => JSON.stringify(value)));
  if (schema.anyOf || schema.oneOf) {
    return union((schema.anyOf ?? schema.oneOf).map((part) => wrap(tsType(part, indent))));
  }
  if (schema.allOf) return schema.allOf.map((part) => wrap(tsType(part, indent))).join(" & ");
  if (Array.isArray(schema.type)) {
    return union(schema.type.map((type) => tsType({ ...schema, type }, indent)));
  }
  switch (schema.type) {
    case "string":
      return "string";
    case "integer":
    case "number":
      return "number";
    case "boolean":
      return "boolean";
    case "null":
      return "null";
    case "array":
      return `Array<${tsType(schema.items, indent)}>`;
    case "object":
    case undefined:
      return objectType(schema, indent);
    default:
      throw new Error(`unsupported schema type ${JSON.stringify(schema.type)}`);
  }
}

function wrap(type) {
  return type.includes(" ") && !type.startsWith("{") && !type.startsWith("Array<") ? `(${type})` : type;
}

function objectType(schema, indent) {
  const properties = Object.entries(schema.properties ?? {});
  const extra = schema.additionalProperties;
  if (properties.length === 0) {
    if (extra && extra !== true) return `Record<string, ${tsType(extra, indent)}>`;
    return "Record<string, unknown>";
  }
  const required = new Set(schema.required ?? []);
  const inner = indent + "  ";
  const members = properties.map(([name, property]) => {
    const doc = comment([property.description, constraints(property)], inner);
    const optional = required.has(name) ? "" : "?";
    return `${doc}${inner}${propertyName(name)}${optional}: ${tsType(property, inner)};`;
  });
  return `{\n${members.join("\n")}\n${indent}}`;
}

function jsonContentSchema(content) {
  return content?.["application/json"]?.schema;
}

function operationEntry(path, method, operation) {
  const params = operation.parameters ?? [];
  const pathParams = params.filter((p) => p.in === "path").map((p) => p.name);
  const query = params.filter((p) => p.in === "query");
  const queryType = query.length
    ? objectType(
        {
          properties: Object.fromEntries(
            query.map((p) => [p.name, { ...p.schema, description: p.description ?? p.schema?.description }]),
          ),
          required: query.filter((p) => p.required).map((p) => p.name),
        },
        "    ",
      )
    : "Record<string, never>";
  const body = jsonContentSchema(operation.requestBody?.content);
  const bodyType = body ? tsType(body, "    ") : "never";
  const success = Object.keys(operation.responses ?? {}).filter((status) => /^2\d\d$/.test(status)).sort();
  if (success.length !== 1) throw new Error(`${method} ${path}: expected one 2xx response`);
  const [status] = success;
  const response = jsonContentSchema(operation.responses[status].content);
  const responseType = response && status !== "204" ? tsType(response, "    ") : "void";
  return {
    id: operation.operationId,
    method: method.toUpperCase(),
    path: path.slice(API_PREFIX.length),
    summary: operation.summary,
    pathParams,
    queryType,
    bodyType,
    responseType,
    status: Number(status),
    idempotent: params.some((p) => p.in === "header" && p.name === "Idempotency-Key"),
  };
}

/** The text of src/generated/schema.ts for the OpenAPI document `text`. */
export function generate(text) {
  const document = JSON.parse(text);
  const digest = createHash("sha256").update(text).digest("hex");
  const out = [];
  out.push(
    "// GENERATED by scripts/generate.mjs from openapi.json: do not edit by hand.",
    "// Regenerate with `npm run generate` (or `npm run openapi:update` to refresh the snapshot",
    "// from the server first); the tests fail while this file and openapi.json disagree.",
    `// openapi.json sha256: ${digest}`,
    `// ${document.info?.title ?? "API"} ${document.info?.version ?? ""} (OpenAPI ${document.openapi})`,
    "",
    "/* eslint-disable */",
    "",
  );

  for (const [name, schema] of Object.entries(document.components?.schemas ?? {})) {
    if (!IDENTIFIER.test(name)) throw new Error(`schema name ${name} is not an identifier`);
    out.push(comment([schema.description], "") + `export type ${name} = ${tsType(schema, "")};`, "");
  }

  const operations = [];
  for (const [path, item] of Object.entries(document.paths ?? {})) {
    if (!path.startsWith(API_PREFIX + "/")) continue; // /healthz, /readyz: not the client's
    for (const method of HTTP_METHODS) {
      if (item[method]) operations.push(operationEntry(path, method, item[method]));
    }
  }
  const ids = new Set();
  for (const op of operations) {
    if (!op.id || !IDENTIFIER.test(op.id) || ids.has(op.id)) throw new Error(`bad operationId ${op.id}`);
    ids.add(op.id);
  }

  out.push("/** Every `/v1` operation: what it takes and what it answers (paths are relative to the base URL). */");
  out.push("export type Operations = {");
  for (const op of operations) {
    out.push(comment([`${op.method} ${op.path}${op.summary ? ": " + op.summary : ""}`], "  ").trimEnd());
    out.push(`  ${op.id}: {`);
    out.push(`    method: ${JSON.stringify(op.method)};`);
    out.push(`    path: ${JSON.stringify(op.path)};`);
    out.push(`    pathParams: [${op.pathParams.map((p) => `${p}: string`).join(", ")}];`);
    out.push(`    query: ${op.queryType};`);
    out.push(`    body: ${op.bodyType};`);
    out.push(`    response: ${op.responseType};`);
    out.push(`    status: ${op.status};`);
    out.push(`    idempotent: ${op.idempotent};`);
    out.push("  };");
  }
  out.push("};", "");
  out.push("export type OperationId = keyof Operations;", "");
  out.push("/** Method and path of each operation, for sending requests. */");
  out.push("export const OPERATIONS = {");
  for (const op of operations) {
    out.push(`  ${op.id}: { method: ${JSON.stringify(op.method)}, path: ${JSON.stringify(op.path)} },`);
  }
  out.push("} as const satisfies { [K in OperationId]: Pick<Operations[K], \"method\" | \"path\"> };", "");
  return out.join("\n");
}

function main(argv) {
  if (argv.includes("--update-snapshot")) {
    const live = liveOpenApiText();
    JSON.parse(live); // refuse to write anything that is not JSON
    writeFileSync(SNAPSHOT_PATH, live.endsWith("\n") ? live : live + "\n");
    console.log(`wrote ${SNAPSHOT_PATH}`);
  }
  const generated = generate(readFileSync(SNAPSHOT_PATH, "utf8"));
  if (argv.includes("--check")) {
    const current = readFileSync(OUTPUT_PATH, "utf8");
    if (current !== generated) {
      console.error(`${OUTPUT_PATH} is out of date: run npm run generate`);
      process.exit(1);
    }
    console.log("src/generated/schema.ts is up to date");
    return;
  }
  writeFileSync(OUTPUT_PATH, generated);
  console.log(`wrote ${OUTPUT_PATH}`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main(process.argv.slice(2));
}
