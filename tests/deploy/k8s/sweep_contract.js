#!/usr/bin/env node
// What examples/kubernetes/sweep-job.yaml promises (docs/fleet.md), beyond
// the API schema (validate.js) and including rules the API server enforces
// that the schema does not carry:
//   - an Indexed Job, restartPolicy Never (podFailurePolicy requires it),
//     podReplacementPolicy Failed when set (the only value it allows);
//   - podFailurePolicy replayed as the Job controller applies it (first
//     matching rule; no match counts): exits 75 and 74 of the spotguard
//     container and the DisruptionTarget condition are ignored, the other
//     exits are not; FailIndex only with backoffLimitPerIndex;
//   - spotguard is the container's command, its config file comes from the
//     ConfigMap, the job name there holds {index}, and the checkpoint dir is
//     a volume;
//   - terminationGracePeriodSeconds fits the agent's stop: 2 x stop_grace +
//     15 s (docs/agent.md, "How it ends"), the rest for the upload.
// Exit 0 when clean, 1 with every broken promise listed.
//   node sweep_contract.js MANIFEST.yaml
'use strict';
const fs = require('fs');
const YAML = require('yaml');

const file = process.argv[2];
const docs = YAML.parseAllDocuments(fs.readFileSync(file, 'utf8')).map((d) => d.toJS()).filter(Boolean);
const problems = [];
const expect = (ok, what) => { if (!ok) problems.push(what); };
const job = docs.find((d) => d.kind === 'Job') || {};
const spec = job.spec || {};
const pod = (spec.template && spec.template.spec) || {};
const containers = pod.containers || [];

expect(spec.completionMode === 'Indexed', `completionMode is ${spec.completionMode}, not Indexed: no JOB_COMPLETION_INDEX`);
expect(spec.completions >= 1 && spec.parallelism >= 1, 'completions and parallelism must be set');
expect(pod.restartPolicy === 'Never', `restartPolicy is ${pod.restartPolicy}: podFailurePolicy requires Never`);
expect(spec.podReplacementPolicy === undefined || spec.podReplacementPolicy === 'Failed',
       `podReplacementPolicy ${spec.podReplacementPolicy}: only Failed is allowed with podFailurePolicy`);

// The spotguard container: its command, its config, its checkpoints.
const sg = containers.find((c) => (c.command || [])[0] === 'spotguard');
if (!sg) {
  problems.push('no container runs spotguard as its command');
} else {
  const cmd = sg.command;
  expect(cmd[1] === 'run' && cmd[2] === '-c' && cmd[cmd.length - 1] === '--', `command ${cmd} is not spotguard run -c FILE --`);
  const configPath = cmd[3] || '';
  const mount = (sg.volumeMounts || []).find((m) => configPath.startsWith(m.mountPath + '/'));
  const volume = mount && (pod.volumes || []).find((v) => v.name === mount.name);
  const cm = volume && volume.configMap && docs.find((d) => d.kind === 'ConfigMap' && d.metadata.name === volume.configMap.name);
  const key = configPath.slice(((mount && mount.mountPath) || '').length + 1);
  let config;
  try {
    config = JSON.parse(cm.data[key]);
  } catch (e) {
    problems.push(`${configPath}: not JSON from a ConfigMap of this file (${e.message})`);
  }
  if (config) {
    expect(/\{index\}/.test(config.job), `job ${config.job} does not hold {index}: the children would share one prefix`);
    expect((sg.volumeMounts || []).some((m) => m.mountPath === config.checkpoint_dir),
           `checkpoint_dir ${config.checkpoint_dir} is not a volume`);
    const m = /^(\d+)s$/.exec(config.stop_grace || '60s');
    const grace = m ? Number(m[1]) : NaN;
    const need = 2 * grace + 15;
    expect(pod.terminationGracePeriodSeconds >= need,
           `terminationGracePeriodSeconds ${pod.terminationGracePeriodSeconds} is under 2 x stop_grace + 15 = ${need}`);
    // The agent plans its SIGTERM path to end before stop_timeout (default
    // 120 s): the kill must not come earlier.
    const t = /^(\d+)s$/.exec(config.stop_timeout || '120s');
    const stopTimeout = t ? Number(t[1]) : NaN;
    expect(stopTimeout <= pod.terminationGracePeriodSeconds,
           `stop_timeout ${config.stop_timeout || '120s (the default)'} is longer than terminationGracePeriodSeconds ${pod.terminationGracePeriodSeconds}: the kill would come first`);
  }
  // The policy, as the Job controller applies it to a failed pod.
  const rules = (spec.podFailurePolicy && spec.podFailurePolicy.rules) || [];
  const decide = (exitCode, conditions) => {
    for (const r of rules) {
      if (r.onExitCodes) {
        const e = r.onExitCodes;
        if (e.containerName && e.containerName !== sg.name) continue;
        const listed = e.values.includes(exitCode);
        if (e.operator === 'In' ? listed : !listed) return r.action;
      } else if ((r.onPodConditions || []).some((p) => conditions.includes(p.type) && (p.status || 'True') === 'True')) {
        return r.action;
      }
    }
    return 'Count';
  };
  for (const code of [75, 74]) expect(decide(code, []) === 'Ignore', `exit ${code} is ${decide(code, [])}, not Ignore`);
  expect(decide(137, ['DisruptionTarget']) === 'Ignore', 'a pod with DisruptionTarget is not ignored');
  for (const code of [1, 2, 4, 7, 137]) {
    expect(decide(code, []) !== 'Ignore', `exit ${code} is ignored: a failing trial would be retried forever`);
  }
  expect(!rules.some((r) => r.action === 'FailIndex') || spec.backoffLimitPerIndex !== undefined,
         'FailIndex needs backoffLimitPerIndex');
}

if (problems.length) {
  console.error(`${file}: ${problems.length} broken promise(s):\n  ` + problems.join('\n  '));
  process.exit(1);
}
console.log(`${file}: Indexed, exits 75 and 74 and DisruptionTarget ignored, other exits counted; ` +
            `grace ${pod.terminationGracePeriodSeconds}s fits the stop`);
