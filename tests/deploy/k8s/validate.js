#!/usr/bin/env node
// Checks Kubernetes manifests offline against the Kubernetes API schema, as
// the npm package kubernetes-models carries it (generated from the API's
// OpenAPI definitions), in two passes per document:
//   1. the JSON schema: types, enums, required fields (the package's
//      validate(), e.g. "completions must be integer");
//   2. unknown fields: the schema allows any extra field, as the API server
//      does without strict field validation, so a misspelt field would pass;
//      the document is type-checked as a literal of the package's TypeScript
//      type instead, where an unknown field is an error with a suggestion
//      ("'terminationGracePeriodSecond' does not exist ... Did you mean ...").
// Exit 0 when clean, 1 with every problem listed.
//   node validate.js MANIFEST.yaml
'use strict';
const fs = require('fs');
const path = require('path');
const YAML = require('yaml');
const ts = require('typescript');

const file = process.argv[2];
if (!file) {
  console.error('usage: node validate.js MANIFEST.yaml');
  process.exit(2);
}
const problems = [];
const parsed = YAML.parseAllDocuments(fs.readFileSync(file, 'utf8'));
const docs = [];
for (const [i, d] of parsed.entries()) {
  if (d.errors.length) {
    problems.push(`document ${i + 1}: YAML: ${d.errors.map((e) => e.message).join('; ')}`);
    continue;
  }
  const value = d.toJS();
  if (value !== null && value !== undefined) docs.push(value);
}
if (!docs.length && !problems.length) problems.push('no documents');

// apiVersion "v1" is the core group (kubernetes-models/v1/Kind); "batch/v1"
// is kubernetes-models/batch/v1/Kind.
function modulePath(doc) {
  if (typeof doc.apiVersion !== 'string' || typeof doc.kind !== 'string' ||
      !/^[A-Za-z0-9./-]+$/.test(doc.apiVersion) || !/^[A-Za-z0-9]+$/.test(doc.kind)) {
    return null;
  }
  return `kubernetes-models/${doc.apiVersion}/${doc.kind}`;
}
const name = (doc) => `${doc.kind || '?'} ${(doc.metadata && doc.metadata.name) || '?'}`;

// Pass 1: the JSON schema.
const typed = [];
for (const doc of docs) {
  const mod = modulePath(doc);
  let Model;
  try {
    Model = mod && require(mod)[doc.kind];
  } catch (e) {
    Model = undefined;
  }
  if (!Model) {
    problems.push(`${name(doc)}: unknown apiVersion/kind ${doc.apiVersion}/${doc.kind}`);
    continue;
  }
  try {
    new Model(doc).validate();
  } catch (e) {
    problems.push(`${name(doc)}: ${e.message}`);
  }
  typed.push({doc, mod});
}

// A JSON value as a TypeScript literal, with keys that are identifiers left
// unquoted: TypeScript suggests the right name only for those.
function literal(value, indent) {
  if (Array.isArray(value)) {
    return `[${value.map((v) => literal(v, indent)).join(', ')}]`;
  }
  if (value && typeof value === 'object') {
    const inner = indent + '  ';
    const fields = Object.entries(value).map(([k, v]) =>
      `${inner}${/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(k) ? k : JSON.stringify(k)}: ${literal(v, inner)}`);
    return fields.length ? `{\n${fields.join(',\n')}\n${indent}}` : '{}';
  }
  return JSON.stringify(value);
}

// Pass 2: unknown fields, through TypeScript's excess-property check on a
// generated source file that exists only in memory.
const checkFile = path.join(__dirname, '__manifest_check__.ts');
const starts = [];
let source = '';
typed.forEach(({doc, mod}, i) => {
  source += `import type { I${doc.kind} as T${i} } from "${mod}";\n`;
});
typed.forEach(({doc}, i) => {
  starts.push(source.length);
  source += `export const doc${i}: T${i} = ${literal(doc, '')};\n`;
});
const options = {
  noEmit: true, strict: true, skipLibCheck: true, types: [],
  target: ts.ScriptTarget.ES2020, module: ts.ModuleKind.CommonJS,
  moduleResolution: ts.ModuleResolutionKind.Node10,
};
const host = ts.createCompilerHost(options);
const getSourceFile = host.getSourceFile.bind(host);
const fileExists = host.fileExists.bind(host);
const readFile = host.readFile.bind(host);
host.getSourceFile = (f, lang, ...rest) =>
  f === checkFile ? ts.createSourceFile(f, source, lang, true) : getSourceFile(f, lang, ...rest);
host.fileExists = (f) => f === checkFile || fileExists(f);
host.readFile = (f) => (f === checkFile ? source : readFile(f));
if (typed.length) {
  const program = ts.createProgram([checkFile], options, host);
  const sf = program.getSourceFile(checkFile);
  // The field path of the node at a position: spec.template.spec.containers[0].x
  const pathAt = (pos) => {
    const parts = [];
    for (let node = sf; node;) {
      if (ts.isPropertyAssignment(node)) parts.push(node.name.text);
      if (ts.isArrayLiteralExpression(node)) {
        const index = node.elements.findIndex((e) => e.pos <= pos && pos < e.end);
        if (index >= 0) parts.push(`[${index}]`);
      }
      node = node.getChildren(sf).find((c) => c.pos <= pos && pos < c.end);
    }
    return parts.join('.').replace(/\.\[/g, '[');
  };
  for (const d of ts.getPreEmitDiagnostics(program)) {
    const text = ts.flattenDiagnosticMessageText(d.messageText, ' ');
    if (d.file !== sf || d.start === undefined) {
      problems.push(`type check: ${text}`);
      continue;
    }
    let i = starts.length - 1;
    while (i > 0 && starts[i] > d.start) i--;
    problems.push(`${name(typed[i].doc)}: ${pathAt(d.start)}: ${text}`);
  }
}

if (problems.length) {
  console.error(`${file}: ${problems.length} problem(s):\n  ` + problems.join('\n  '));
  process.exit(1);
}
console.log(`${file}: ${docs.length} documents match the Kubernetes API schema ` +
            `(${docs.map(name).join(', ')})`);
