#!/usr/bin/env node
// What cloudformation/spotguard-training.yaml promises for multi-node jobs
// (docs/multi-node.md), beyond what the resource specification checks:
//   - NodeCount (a Number, default 1, at least 1) is the Auto Scaling group's
//     desired and maximum capacity and reaches the job config through
//     bootstrap.env (NODES), as TrainingPort does (GROUP_PORT);
//   - PlacementGroup none|cluster: a cluster placement group only under a
//     condition on it, and the group joins it only then;
//   - the nodes' security group exists only for NodeCount above 1, is the
//     launch template's then, and lets in only itself: every ingress names it
//     as the source (no CIDR, so never 0.0.0.0/0), on TCP TrainingPort and
//     the ephemeral range 32768-65535 where gloo and NCCL listen;
//   - a rule refuses NodeCount above 1 without VpcId;
//   - the instance role may read the instance's prices
//     (ec2:DescribeSpotPriceHistory, pricing:GetProducts), and nothing is
//     allowed on "*" but those and autoscaling:DescribeAutoScalingInstances
//     (none of the three takes a resource).
// Exit 0 when clean, 1 with every broken promise listed.
//   node training_contract.js TEMPLATE.yaml
'use strict';
const {loadTemplate} = require('./cfn_yaml');

const file = process.argv[2];
const doc = loadTemplate(file);
const problems = [];
const expect = (ok, what) => { if (!ok) problems.push(what); };
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
const P = doc.Parameters || {};
const R = doc.Resources || {};
const C = doc.Conditions || {};
const ofType = (type) => Object.entries(R).filter(([, r]) => r.Type === type);
const props = (name) => (R[name] && R[name].Properties) || {};

// NodeCount and its wiring.
const nc = P.NodeCount || {};
expect(nc.Type === 'Number' && String(nc.Default) === '1' && String(nc.MinValue) === '1',
       'NodeCount must be a Number parameter, default 1, MinValue 1');
const [[groupName, group] = []] = ofType('AWS::AutoScaling::AutoScalingGroup');
const gp = (group && group.Properties) || {};
expect(group, 'no Auto Scaling group');
expect(same(gp.DesiredCapacity, {Ref: 'NodeCount'}), `${groupName}.DesiredCapacity is not NodeCount`);
expect(same(gp.MaxSize, {Ref: 'NodeCount'}), `${groupName}.MaxSize is not NodeCount`);
const userData = JSON.stringify(props('LaunchTemplate').LaunchTemplateData || {});
expect(userData.includes('NODES=${NodeCount}'), 'the user data does not write NODES=${NodeCount} into bootstrap.env');
expect(userData.includes('GROUP_PORT=${TrainingPort}'),
       'the user data does not write GROUP_PORT=${TrainingPort} into bootstrap.env');
const port = P.TrainingPort || {};
expect(port.Type === 'Number' && String(port.Default) === '29500', 'TrainingPort must be a Number, default 29500');
expect(Number(port.MaxValue) < 32768, 'TrainingPort may reach the ephemeral range (MaxValue must be below 32768)');

// The placement group.
const pg = P.PlacementGroup || {};
expect(same(pg.AllowedValues, ['none', 'cluster']) && pg.Default === 'none',
       'PlacementGroup must allow none|cluster, default none');
expect(same(C.UseClusterPlacement, {'Fn::Equals': [{Ref: 'PlacementGroup'}, 'cluster']}),
       'condition UseClusterPlacement must be PlacementGroup == cluster');
const placements = ofType('AWS::EC2::PlacementGroup');
expect(placements.length === 1, `${placements.length} placement groups, want 1`);
for (const [name, r] of placements) {
  expect(r.Condition === 'UseClusterPlacement', `${name} is created without condition UseClusterPlacement`);
  expect((r.Properties || {}).Strategy === 'cluster', `${name}.Strategy is not cluster`);
  expect(same(gp.PlacementGroup, {'Fn::If': ['UseClusterPlacement', {Ref: name}, {Ref: 'AWS::NoValue'}]}),
         `${groupName}.PlacementGroup is not ${name} under UseClusterPlacement`);
}

// The nodes' security group.
expect(same(C.MultiNode, {'Fn::Not': [{'Fn::Equals': [{Ref: 'NodeCount'}, '1']}]}),
       'condition MultiNode must be NodeCount != 1');
const groups = ofType('AWS::EC2::SecurityGroup');
expect(groups.length === 1, `${groups.length} security groups, want 1`);
const [[sgName, sg] = []] = groups;
const self = {'Fn::GetAtt': [sgName, 'GroupId']};
if (sg) {
  expect(sg.Condition === 'MultiNode', `${sgName} is created without condition MultiNode`);
  expect(!(sg.Properties || {}).SecurityGroupIngress,
         `${sgName} has inline ingress; ingress must be AWS::EC2::SecurityGroupIngress from the group itself`);
  expect(same(props('LaunchTemplate').LaunchTemplateData.SecurityGroupIds,
              {'Fn::If': ['MultiNode', [self], {Ref: 'AWS::NoValue'}]}),
         `the launch template does not put the instances in ${sgName} under MultiNode`);
}
const ingress = ofType('AWS::EC2::SecurityGroupIngress');
const covers = (from, to) => ingress.some(([, r]) => {
  const p = r.Properties || {};
  return p.IpProtocol === 'tcp' && same(p.FromPort, from) && same(p.ToPort, to);
});
for (const [name, r] of ingress) {
  const p = r.Properties || {};
  expect(r.Condition === 'MultiNode', `${name} is created without condition MultiNode`);
  expect(same(p.GroupId, self), `${name} does not add to ${sgName}`);
  expect(same(p.SourceSecurityGroupId, self), `${name} lets in more than ${sgName} itself`);
  expect(!('CidrIp' in p) && !('CidrIpv6' in p) && !('SourcePrefixListId' in p),
         `${name} opens ${sgName} to addresses (${p.CidrIp || p.CidrIpv6 || p.SourcePrefixListId})`);
  expect(p.IpProtocol === 'tcp', `${name} is not TCP only (${p.IpProtocol})`);
}
expect(covers({Ref: 'TrainingPort'}, {Ref: 'TrainingPort'}), 'no ingress on TCP TrainingPort (the rendezvous)');
expect(covers(32768, 65535), 'no ingress on TCP 32768-65535 (the collectives)');
expect(ingress.length === 2, `${ingress.length} ingress rules, want exactly the rendezvous and the collectives`);

// No VPC, no security group: a rule says so before anything is created.
const rule = ((doc.Rules || {}).MultiNodeNeedsVpc) || {};
expect(same(rule.RuleCondition, C.MultiNode) &&
       (rule.Assertions || []).some((a) => same(a.Assert, {'Fn::Not': [{'Fn::Equals': [{Ref: 'VpcId'}, '']}]})),
       'no rule MultiNodeNeedsVpc asserting VpcId when NodeCount != 1');

// The actions the instance role allows on every resource.
const statements = ofType('AWS::IAM::Role').flatMap(([, r]) =>
  ((r.Properties || {}).Policies || []).flatMap((p) => p.PolicyDocument.Statement));
const onAll = statements.filter((s) => s.Resource === '*').flatMap((s) => [].concat(s.Action)).sort();
expect(same(onAll, ['autoscaling:DescribeAutoScalingInstances', 'ec2:DescribeSpotPriceHistory',
                    'pricing:GetProducts']),
       `the role allows ${JSON.stringify(onAll)} on "*": want the price reads ` +
       '(ec2:DescribeSpotPriceHistory, pricing:GetProducts) and autoscaling:DescribeAutoScalingInstances, no more');

if (problems.length) {
  console.error(`${file}: ${problems.length} broken promise(s):\n  ` + problems.join('\n  '));
  process.exit(1);
}
console.log(`${file}: the multi-node wiring holds (NodeCount, placement group, security group); ` +
            'the role reads the prices and nothing more on "*"');
