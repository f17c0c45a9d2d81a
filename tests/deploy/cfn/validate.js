#!/usr/bin/env node
// Checks a CloudFormation template against the CloudFormation resource
// specification (the @aws-cdk/cfnspec package): resource types, property
// names (with a did-you-mean), required properties, property shapes (object,
// list, primitive), and that every Ref, Fn::GetAtt, Fn::Sub ${...} and
// Condition names something that exists. Exit 0 when clean, 1 with every
// problem listed.
//   node validate.js TEMPLATE.yaml
'use strict';
const spec = require('@aws-cdk/cfnspec').specification();
const {loadTemplate} = require('./cfn_yaml');

function closest(word, candidates) {
  const dist = (a, b) => {
    const d = Array.from({length: a.length + 1}, (_, i) => [i, ...Array(b.length).fill(0)]);
    for (let j = 1; j <= b.length; j++) d[0][j] = j;
    for (let i = 1; i <= a.length; i++) {
      for (let j = 1; j <= b.length; j++) {
        d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1,
                           d[i - 1][j - 1] + (a[i - 1].toLowerCase() === b[j - 1].toLowerCase() ? 0 : 1));
      }
    }
    return d[a.length][b.length];
  };
  let best = '', bestD = Math.max(2, Math.floor(word.length / 3)) + 1;
  for (const c of candidates) {
    const dd = dist(word, c);
    if (dd < bestD) { best = c; bestD = dd; }
  }
  return best;
}

const problems = [];
const file = process.argv[2];
const doc = loadTemplate(file);
const params = doc.Parameters || {};
const resources = doc.Resources || {};
const conditions = doc.Conditions || {};
const isIntrinsic = (v) => v && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length === 1 &&
    (Object.keys(v)[0] === 'Ref' || Object.keys(v)[0].startsWith('Fn::'));

// Every reference, anywhere in a value.
function checkRefs(value, where) {
  if (Array.isArray(value)) { value.forEach((v, i) => checkRefs(v, `${where}[${i}]`)); return; }
  if (!value || typeof value !== 'object') return;
  for (const [k, v] of Object.entries(value)) {
    if (k === 'Ref') {
      if (typeof v === 'string' && !v.startsWith('AWS::') && !(v in params) && !(v in resources)) {
        problems.push(`${where}: Ref to unknown "${v}"`);
      }
    } else if (k === 'Fn::GetAtt') {
      const [res, attr] = Array.isArray(v) ? v : String(v).split('.');
      if (!(res in resources)) {
        problems.push(`${where}: Fn::GetAtt of unknown resource "${res}"`);
      } else {
        const t = spec.ResourceTypes[resources[res].Type];
        if (t && !(t.Attributes && attr in t.Attributes)) {
          problems.push(`${where}: ${resources[res].Type} has no attribute "${attr}"`);
        }
      }
    } else if (k === 'Fn::Sub') {
      const text = Array.isArray(v) ? v[0] : v;
      const vars = Array.isArray(v) && v[1] ? v[1] : {};
      for (const m of String(text).matchAll(/\$\{([^}!]+)\}/g)) {
        const name = m[1].split('.')[0];
        if (!name.startsWith('AWS::') && !(name in params) && !(name in resources) && !(name in vars)) {
          problems.push(`${where}: \${${m[1]}} in Fn::Sub names nothing`);
        }
      }
      if (Array.isArray(v) && v[1]) checkRefs(v[1], `${where}.Fn::Sub`);
    } else if (k === 'Fn::If' || k === 'Condition') {
      const name = Array.isArray(v) ? v[0] : v;
      if (typeof name === 'string' && !(name in conditions)) {
        problems.push(`${where}: unknown condition "${name}"`);
      }
      if (Array.isArray(v)) checkRefs(v.slice(1), `${where}.${k}`);
    } else {
      checkRefs(v, `${where}.${k}`);
    }
  }
}

function propertyTypeSpec(resourceType, name) {
  return spec.PropertyTypes[`${resourceType}.${name}`] || spec.PropertyTypes[name];
}

// A property bag against its spec (a resource's or a property type's).
function checkProperties(props, propSpecs, resourceType, where) {
  if (isIntrinsic(props)) return;
  if (!props || typeof props !== 'object' || Array.isArray(props)) {
    problems.push(`${where}: must be an object`);
    return;
  }
  for (const [name, ps] of Object.entries(propSpecs)) {
    if (ps.Required && !(name in props)) problems.push(`${where}: required property ${name} is missing`);
  }
  for (const [name, value] of Object.entries(props)) {
    const ps = propSpecs[name];
    if (!ps) {
      const guess = closest(name, Object.keys(propSpecs));
      problems.push(`${where}.${name}: unknown property${guess ? `; did you mean ${guess}?` : ''}`);
      continue;
    }
    checkValue(value, ps, resourceType, `${where}.${name}`);
  }
}

function checkValue(value, ps, resourceType, where) {
  if (isIntrinsic(value)) return;
  if (ps.PrimitiveType) {
    if (ps.PrimitiveType === 'Json') return;
    if (typeof value === 'object' && value !== null) problems.push(`${where}: must be a ${ps.PrimitiveType}`);
    return;
  }
  if (ps.Type === 'List' || ps.Type === 'Map') {
    const items = ps.Type === 'List' ? value : value;
    if (ps.Type === 'List' && !Array.isArray(items)) { problems.push(`${where}: must be a list`); return; }
    const entries = ps.Type === 'List' ? items.map((v, i) => [i, v]) : Object.entries(items || {});
    for (const [i, item] of entries) {
      if (isIntrinsic(item)) continue;
      if (ps.PrimitiveItemType) {
        if (typeof item === 'object' && item !== null && ps.PrimitiveItemType !== 'Json') {
          problems.push(`${where}[${i}]: must be a ${ps.PrimitiveItemType}`);
        }
      } else if (ps.ItemType) {
        const t = propertyTypeSpec(resourceType, ps.ItemType);
        if (t && t.Properties) checkProperties(item, t.Properties, resourceType, `${where}[${i}]`);
      }
    }
    return;
  }
  if (ps.Type) {
    const t = propertyTypeSpec(resourceType, ps.Type);
    if (t && t.Properties) checkProperties(value, t.Properties, resourceType, where);
  }
}

for (const [name, r] of Object.entries(resources)) {
  const where = `Resources.${name}`;
  const t = spec.ResourceTypes[r.Type];
  if (!t) {
    problems.push(`${where}: unknown resource type ${r.Type}`);
    continue;
  }
  checkProperties(r.Properties || {}, t.Properties || {}, r.Type, `${where}.Properties`);
  checkRefs(r.Properties || {}, `${where}.Properties`);
  if (r.Condition && !(r.Condition in conditions)) problems.push(`${where}: unknown condition ${r.Condition}`);
  for (const dep of [].concat(r.DependsOn || [])) {
    if (!(dep in resources)) problems.push(`${where}.DependsOn: unknown resource ${dep}`);
  }
}
checkRefs(doc.Outputs || {}, 'Outputs');
checkRefs(conditions, 'Conditions');
if (!Object.keys(resources).length) problems.push('the template has no resources');

if (problems.length) {
  console.error(`${file}: ${problems.length} problem(s):\n  ` + problems.join('\n  '));
  process.exit(1);
}
console.log(`${file}: ${Object.keys(resources).length} resources match the CloudFormation specification`);
