#!/usr/bin/env node
// What cloudformation/spotguard-batch.yaml promises spotguard's users
// (docs/fleet.md), beyond what the resource specification checks:
//   - the retry strategy, replayed as Batch evaluates it (first rule whose
//     patterns all match; RETRY when none does): 75, 74 and "Host EC2 ...
//     terminated." retry, every other exit ends the job;
//   - the Spot compute environment and its launch template: IMDSv2 required,
//     hop limit 2, MIME multi-part user data turning on ECS spot draining with
//     a container stop timeout that fits the agent's stop (2 x stop_grace +
//     15 s, docs/agent.md "How it ends") and the whole two-minute notice;
//   - the job: {index} in the job name, GPU, the job role, no init in front
//     of spotguard;
//   - the job role: S3 on the sweep's prefix only, and the two price reads
//     (ec2:DescribeSpotPriceHistory, pricing:GetProducts, which take no
//     resource), nothing else.
// Writes the user data's shell script to SHELL_OUT for ShellCheck.
// Exit 0 when clean, 1 with every broken promise listed.
//   node batch_contract.js TEMPLATE.yaml SHELL_OUT
'use strict';
const fs = require('fs');
const {loadTemplate} = require('./cfn_yaml');

const [file, shellOut] = process.argv.slice(2);
const doc = loadTemplate(file);
const problems = [];
const expect = (ok, what) => { if (!ok) problems.push(what); };
const R = doc.Resources || {};
const ofType = (type) => Object.values(R).filter((r) => r.Type === type);
const param = (v) => (v && v.Ref && doc.Parameters[v.Ref] ? doc.Parameters[v.Ref].Default : v);
const seconds = (d) => {
  const m = /^(\d+)(s|m)$/.exec(String(d));
  return m ? Number(m[1]) * (m[2] === 'm' ? 60 : 1) : NaN;
};

// The job definition and its retry strategy.
const [jd] = ofType('AWS::Batch::JobDefinition');
const cp = (jd && jd.Properties.ContainerProperties) || {};
const env = Object.fromEntries((cp.Environment || []).map((e) => [e.Name, e.Value]));
const rs = (jd && jd.Properties.RetryStrategy) || {};
const rules = rs.EvaluateOnExit || [];
expect(jd, 'no AWS::Batch::JobDefinition');
expect(rules.length >= 1 && rules.length <= 5, `EvaluateOnExit has ${rules.length} rules; Batch takes 1 to 5`);
const attempts = Number(param(rs.Attempts));
expect(attempts >= 2 && attempts <= 10, `Attempts ${attempts}: an interruption needs at least 2, Batch allows at most 10`);
const glob = (pattern, value) => {
  if (pattern === undefined) return true;
  if (value === undefined) return false;
  const p = String(pattern);
  return p.endsWith('*') ? String(value).startsWith(p.slice(0, -1)) : String(value) === p;
};
const decide = ({exitCode, reason, statusReason}) => {
  const rule = rules.find((r) => glob(r.OnExitCode, exitCode) && glob(r.OnReason, reason) &&
                                 glob(r.OnStatusReason, statusReason));
  return rule ? String(rule.Action).toUpperCase() : 'RETRY';
};
const essential = 'Essential container in task exited';
for (const [exitCode, want, what] of [
  ['75', 'RETRY', 'stopped before completion'], ['74', 'RETRY', 'interrupted, newest not committed'],
  ['1', 'EXIT', 'failed'], ['2', 'EXIT', 'configuration error'], ['4', 'EXIT', 'fenced'],
  ['7', 'EXIT', 'an unknown exit'], ['750', 'EXIT', 'an exit that starts with 75'],
  ['137', 'EXIT', 'killed']]) {
  const got = decide({exitCode, reason: essential, statusReason: essential});
  expect(got === want, `exit ${exitCode} (${what}) is ${got}, not ${want}`);
}
const host = decide({reason: 'Host EC2 (instance i-0123456789abcdef0) terminated.',
                     statusReason: 'Host EC2 (instance i-0123456789abcdef0) terminated.'});
expect(host === 'RETRY', `an instance reclaimed under the job (Host EC2 ... terminated.) is ${host}, not RETRY`);
const last = rules[rules.length - 1] || {};
expect(String(last.Action).toUpperCase() === 'EXIT' && last.OnReason === '*' && !last.OnExitCode &&
       !last.OnStatusReason, 'the last rule is not EXIT on OnReason "*" (Batch retries what no rule matches)');

// The container.
expect(/\{index\}/.test(JSON.stringify(env.SPOTGUARD_JOB)), 'SPOTGUARD_JOB does not hold {index}: the children would share one prefix');
expect(JSON.stringify(env.SPOTGUARD_FLEET_MAX_ATTEMPTS) === JSON.stringify(rs.Attempts),
       'SPOTGUARD_FLEET_MAX_ATTEMPTS is not the retry strategy\'s Attempts: status cannot warn near the cap');
expect(env.SPOTGUARD_ON_COMPLETE === 'mark', 'on_complete is not mark (Batch ends the instance, not spotguard)');
expect(cp.JobRoleArn, 'no JobRoleArn');
expect((cp.ResourceRequirements || []).some((r) => r.Type === 'GPU'), 'no GPU resource requirement');
expect(!(cp.LinuxParameters && cp.LinuxParameters.InitProcessEnabled === true), 'an init process runs in front of spotguard (PID 1)');
const stopGrace = seconds(env.SPOTGUARD_STOP_GRACE || '60s');
expect(stopGrace > 0, `SPOTGUARD_STOP_GRACE ${env.SPOTGUARD_STOP_GRACE} is not N s or N m`);

// The compute environment and its launch template.
const [ce] = ofType('AWS::Batch::ComputeEnvironment');
const cr = (ce && ce.Properties.ComputeResources) || {};
expect(ce && ce.Properties.Type === 'MANAGED', 'the compute environment is not MANAGED');
expect(cr.Type === 'SPOT', `ComputeResources.Type is ${cr.Type}, not SPOT`);
expect(cr.AllocationStrategy === 'SPOT_PRICE_CAPACITY_OPTIMIZED', `AllocationStrategy is ${cr.AllocationStrategy}`);
const types = param(cr.InstanceTypes);
const typeList = Array.isArray(types) ? types : String(types).split(',');
expect(typeList.length >= 3, `only ${typeList.length} instance types: Spot needs several pools`);
expect(typeList.every((t) => /^(g|p)\d/.test(t)), `not all instance types have GPUs: ${typeList}`);
const ltName = cr.LaunchTemplate && cr.LaunchTemplate.LaunchTemplateId && cr.LaunchTemplate.LaunchTemplateId.Ref;
const lt = R[ltName];
expect(lt && lt.Type === 'AWS::EC2::LaunchTemplate', 'the compute environment has no launch template of this stack');
const ltd = (lt && lt.Properties.LaunchTemplateData) || {};
const md = ltd.MetadataOptions || {};
expect(md.HttpTokens === 'required', `HttpTokens is ${md.HttpTokens}, not required (IMDSv2)`);
expect(Number(md.HttpPutResponseHopLimit) === 2, `HttpPutResponseHopLimit is ${md.HttpPutResponseHopLimit}: a container needs 2`);
const userData = ltd.UserData && ltd.UserData['Fn::Base64'];
if (typeof userData !== 'string') {
  problems.push('the launch template has no literal Fn::Base64 user data');
} else {
  const boundary = (/^Content-Type: multipart\/mixed; boundary="([^"]+)"$/m.exec(userData) || [])[1];
  expect(/^MIME-Version: 1\.0$/m.test(userData) && boundary, 'the user data is not MIME multi-part (Batch requires it)');
  const parts = boundary ? userData.split(`--${boundary}`) : [];
  expect(parts.length >= 3 && parts[parts.length - 1].startsWith('--'), 'the MIME parts do not end with the closing boundary');
  const shell = parts.find((p) => /^\s*Content-Type: text\/x-shellscript/m.test(p));
  if (!shell) {
    problems.push('no text/x-shellscript part in the user data');
  } else {
    const script = shell.replace(/^\s*Content-Type:[^\n]*\n\n/, '');
    fs.writeFileSync(shellOut, script);
    const setting = (k) => (new RegExp(`^${k}=(.*)$`, 'm').exec(script) || [])[1];
    expect(setting('ECS_ENABLE_SPOT_INSTANCE_DRAINING') === 'true', 'ECS spot draining is not turned on');
    const stop = seconds(setting('ECS_CONTAINER_STOP_TIMEOUT'));
    const need = Math.max(120, 2 * stopGrace + 15);
    expect(stop >= need, `ECS_CONTAINER_STOP_TIMEOUT ${setting('ECS_CONTAINER_STOP_TIMEOUT')} is under ${need}s ` +
           `(the notice's 120 s, and 2 x stop_grace + 15 s)`);
  }
}

// The job role: S3 on the sweep's prefix, and the instance's prices for
// `spotguard report` (docs/operations.md, "Cost"), nothing else.
const PRICE_ACTIONS = ['ec2:DescribeSpotPriceHistory', 'pricing:GetProducts'];
const isPriceStatement = (s) => JSON.stringify([].concat(s.Action).sort()) === JSON.stringify(PRICE_ACTIONS);
const role = R[cp.JobRoleArn && cp.JobRoleArn['Fn::GetAtt'] && cp.JobRoleArn['Fn::GetAtt'][0]];
expect(role && role.Type === 'AWS::IAM::Role', 'JobRoleArn is not a role of this stack');
const trust = role ? JSON.stringify(role.Properties.AssumeRolePolicyDocument) : '';
expect(trust.includes('ecs-tasks.amazonaws.com'), 'the job role is not for ECS tasks');
expect(!role || !role.Properties.ManagedPolicyArns, 'the job role has managed policies');
const statements = role ? role.Properties.Policies.flatMap((p) => p.PolicyDocument.Statement) : [];
for (const s of statements) {
  const actions = [].concat(s.Action);
  const where = JSON.stringify(s.Resource);
  if (isPriceStatement(s)) {
    expect(s.Effect === 'Allow' && s.Resource === '*' && !s.Condition,
           `the price reads ${actions} on ${where}: they take no resource, "*" only`);
    continue;
  }
  expect(actions.every((a) => /^s3:[A-Za-z]+$/.test(a)), `the job role allows ${actions}: only S3 actions are needed`);
  expect(s.Effect === 'Allow' && !where.includes('"*"'), `a statement on ${where}`);
  if (actions.some((a) => /Object|Multipart(Upload|UploadParts)$/.test(a) && a !== 's3:ListBucketMultipartUploads')) {
    expect(/:::\$\{B\}\/spotguard\/\$\{SweepName\}-\*\/\*"/.test(where), `object actions ${actions} on ${where}, not the sweep's prefix`);
  }
  if (actions.includes('s3:ListBucket')) {
    expect(JSON.stringify(s.Condition || {}).includes('spotguard/${SweepName}-*'), 'ListBucket is not limited to the sweep\'s prefix');
  }
}
expect(statements.some((s) => [].concat(s.Action).includes('s3:PutObject')), 'the job role cannot write snapshots');
expect(statements.some(isPriceStatement), 'the job role cannot read the instance\'s prices (' +
       PRICE_ACTIONS.join(', ') + ')');

if (problems.length) {
  console.error(`${file}: ${problems.length} broken promise(s):\n  ` + problems.join('\n  '));
  process.exit(1);
}
console.log(`${file}: retries 75, 74 and Host EC2 terminations, exits on the rest; Spot ` +
            `${cr.AllocationStrategy} over ${typeList.length} types; IMDSv2, hop limit 2; ` +
            `spot draining, stop timeout fits; job role on the sweep's prefix and the price reads only`);
