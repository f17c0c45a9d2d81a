// A CloudFormation template as plain data: YAML with the short forms (!Ref,
// !GetAtt, !Sub, ...) read as the long forms they stand for ({Ref: x},
// {"Fn::GetAtt": [resource, attribute]}, {"Fn::Sub": ...}). Shared by the
// template checks in this directory.
'use strict';
const fs = require('fs');
const YAML = require('yaml');

const FNS = ['Base64', 'Cidr', 'FindInMap', 'GetAZs', 'ImportValue', 'Join', 'Select', 'Split',
             'Sub', 'If', 'Equals', 'Not', 'And', 'Or', 'Transform'];
const tags = [
  {tag: '!Ref', resolve: (v) => ({Ref: v})},
  {tag: '!Condition', resolve: (v) => ({Condition: v})},
  {tag: '!GetAtt', resolve: (v) => ({'Fn::GetAtt': typeof v === 'string' ? v.split(/\.(.*)/s).slice(0, 2) : v})},
  {tag: '!GetAtt', collection: 'seq', resolve: (v) => ({'Fn::GetAtt': v.toJSON()})},
];
for (const fn of FNS) {
  for (const collection of [undefined, 'seq', 'map']) {
    tags.push({tag: '!' + fn, collection,
               resolve: (v) => ({['Fn::' + fn]: v && v.toJSON ? v.toJSON() : v})});
  }
}

function loadTemplate(file) {
  return YAML.parse(fs.readFileSync(file, 'utf8'), {customTags: tags});
}

module.exports = {loadTemplate};
