#!/usr/bin/env python3
"""Turns the trials of bench/notice_stalled_bench.py into the Markdown
fragment of bench/sections/08-notice-stalled.sh.

    notice_stalled_report.py TSV --md OUT.md --poll-s 2 --hold-s 5
                             [--load-before X --load-after Y] [--note TEXT]
"""
import argparse
import csv
import statistics


def num(r, key):
    return float(r[key])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tsv")
    ap.add_argument("--md", required=True)
    ap.add_argument("--poll-s", type=float, required=True)
    ap.add_argument("--hold-s", type=float, required=True)
    ap.add_argument("--load-before", default="")
    ap.add_argument("--load-after", default="")
    ap.add_argument("--note", default="")
    args = ap.parse_args()
    every = list(csv.DictReader(open(args.tsv), delimiter="\t"))
    answers = [r for r in every if r["kind"] == "answers"]
    never = [r for r in every if r["kind"] == "never"]
    if not answers or not never:
        raise SystemExit("notice_stalled_report: trials of both kinds needed in " + args.tsv)
    bound = args.poll_s + 1
    # The agent takes the posting time to be the deadline less 120 s (as EC2
    # posts them); a notice of N s reads as posted 120 - N s earlier than it was.
    read = lambda r: num(r, "read_after_s") - (120 - num(r, "in_s"))
    det = [num(r, "detect_s") for r in every]
    agent_read = [read(r) for r in every]
    within = sum(1 for d in det if d <= bound)
    within_agent = sum(1 for d in agent_read if d <= bound)
    n_all = len(every)

    lines = [
        "## Notice under a stalled store (%d + %d trials)" % (len(answers), len(never)),
        "",
        "Measured by `bench/sections/08-notice-stalled.sh` (`bench/notice_stalled_bench.py`): the "
        "Release `spotguard run` with JSON logs, the IMDS simulator, and the S3 gateway behind "
        "`tests/tools/fault_proxy.py`, supervising `examples/simple_trainer.py` (0.02 s steps, a "
        "checkpoint every 20 steps and on SIGUSR1). Config: preset generic, `checkpoint_signal: "
        "SIGUSR1`, `settle_time: 300ms`, `upload_interval: 1s`, `stop_grace: 5s`, "
        "`imds.poll_interval` at its default %.0f s, lease defaults. Each trial waits for the "
        "agent's first commit, then freezes the store (`freeze_match` on the next lease renewal: "
        "from then on every S3 request is held, neither forwarded nor answered), waits until the "
        "proxy holds a request, waits a random 0-%.0f s (so the notice falls anywhere in the poll "
        "cycle) and posts a terminate notice. Detection is the time from the POST to the agent's "
        "`INTERRUPTION NOTICE` log line; the agent's own figure (\"read X.Xs after it was "
        "posted\") counts from the notice's deadline less 120 s, and EC2 (like the simulator) "
        "gives the deadline in whole seconds, so it reads up to 1 s more than the POST-based "
        "figure. Times below are seconds from the POST, all on one clock."
        % (args.poll_s, args.poll_s),
        "",
        "What this shows: that a notice is read in time, and the trainer stopped before the "
        "deadline, while every request to the store hangs.",
        "",
    ]
    if args.note:
        lines += [args.note, ""]
    if args.load_before or args.load_after:
        lines += ["1-minute load average before / after this section: %s / %s (2 cores)."
                  % (args.load_before or "?", args.load_after or "?"), ""]
    lines += [
        "**Detection while the store hangs** (all %d trials): bound (what the product promises: "
        "one poll interval + 1 s) %.0f s; measured median %.2f s, max %.2f s, %d of %d within the "
        "bound; the agent's own figure median %.1f s, max %.1f s, %d of %d within it."
        % (n_all, bound, statistics.median(det), max(det), within, n_all,
           statistics.median(agent_read), max(agent_read), within_agent, n_all),
        "",
    ]
    cycle = [num(r, "wait_before_s") + num(r, "detect_s") for r in every]
    if max(cycle) - min(cycle) < 0.25 * args.poll_s:
        lines += [
            "Wait before the POST + detection: %.2f-%.2f s in every trial, about one poll "
            "interval. The freeze engages at the same point of the agent's cycle each time (the "
            "lease renewal of a periodic upload), so the random wait places the notice evenly "
            "over the poll cycle, and every notice was read at the very next poll, on schedule, "
            "as if the store answered: the frozen store delayed no poll." % (min(cycle), max(cycle)),
            "",
        ]
    if within < n_all or within_agent < n_all:
        lines += ["⚠ Some detections took longer than the bound; see the tables.", ""]

    commit = [num(r, "commit_s") for r in answers]
    codes = [int(r["exit_code"]) for r in answers]
    lines += [
        "### The store answers again (%d trials)" % len(answers),
        "",
        "Notice in 120 s. The store stays frozen until %.0f s after the agent logged the notice, "
        "then the proxy is released: the held requests reach the gateway late, in arrival "
        "order, and the trial waits for the agent's exit. Expected: exit 75 (interrupted, final "
        "snapshot committed)." % args.hold_s,
        "",
        "| trial | wait before POST | requests held at POST / detection / release | detection | agent: read after "
        "| release | notice → commit | release → commit | exit | exit code |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in answers:
        lines.append("| %s | %.2f | %s / %s / %s | %.2f | %.1f | %.2f | %.2f | %.2f | %.2f | %s |" % (
            r["trial"], num(r, "wait_before_s"), r["held_at_post"], r["held_at_detect"],
            r["held_at_release"],
            num(r, "detect_s"), num(r, "read_after_s"), num(r, "release_s"), num(r, "commit_s"),
            num(r, "commit_s") - num(r, "release_s"), num(r, "exit_s"), r["exit_code"]))
    rc = [num(r, "commit_s") - num(r, "release_s") for r in answers]
    held = {(r["held_at_post"], r["held_at_detect"], r["held_at_release"]) for r in answers}
    if len(held) == 1:
        lines += [
            "",
            "The proxy held %s request(s) at the POST, at the detection and at the release in "
            "every trial: from the renewal that froze the store (the lease renewal before a "
            "periodic snapshot's commit) to the release, the agent sent the store nothing more; "
            "the final snapshot's requests went out once the held one was answered."
            % held.pop()[0],
        ]
    lines += [
        "",
        "Outcome: %d of %d exited 75 with the final snapshot committed. Notice → commit median "
        "%.2f s, max %.2f s (%.0f s of it the store's freeze after the detection); release → "
        "commit median %.2f s, max %.2f s; the %.0f s notice had %.0f s or more left at the commit."
        % (codes.count(75), len(codes), statistics.median(commit), max(commit), args.hold_s,
           statistics.median(rc), max(rc), 120, min(num(r, "deadline_s") - num(r, "commit_s")
                                                   for r in answers)),
        "",
    ]

    codes = [int(r["exit_code"]) for r in never]
    gap = max(abs(num(r, "trainer_gone_s") - num(r, "trainer_stopped_s")) for r in never)
    lines += [
        "### The store never answers (%d trials)" % len(never),
        "",
        "Notice in 30 s; the proxy is never released (it is killed after the agent's exit, so "
        "the held requests never land). Expected: the final upload given up on 10 s before the "
        "deadline, the trainer stopped in time, exit 74 (the previous snapshot is the resume "
        "point); the exit waits at most 15 s for the requests still hanging. \"agent: read "
        "after\" is the agent's figure less 90 s (it takes any notice to be posted 120 s before "
        "its deadline). Trainer stopped: the agent's \"the trainer stopped\" line (the trainer's "
        "process gone, as the script saw it, within %.2f s of it)." % gap,
        "",
        "| trial | detection | agent: read after | deadline | gave up | trainer stopped | "
        "agent exit | trainer stopped before the deadline | exit code |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in never:
        lines.append("| %s | %.2f | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f | %s |" % (
            r["trial"], num(r, "detect_s"), read(r), num(r, "deadline_s"), num(r, "giveup_s"),
            num(r, "trainer_stopped_s"), num(r, "exit_s"),
            num(r, "deadline_s") - num(r, "trainer_stopped_s"), r["exit_code"]))
    before = [num(r, "deadline_s") - num(r, "trainer_stopped_s") for r in never]
    after = [num(r, "exit_s") - num(r, "deadline_s") for r in never]
    lines += [
        "",
        "Outcome: %d of %d exited 74. The trainer was stopped %.2f-%.2f s before the deadline "
        "(the promise: given up on 10 s before it, then stopped). The agent's process ended "
        "from %+.2f to %+.2f s after the deadline: after giving up it waits up to 15 s for the "
        "requests still hanging, so with a store that never answers its process can outlive the "
        "deadline (give-up at deadline - 10 s, plus 15 s); the trainer is stopped by then and "
        "nothing more is written, so on EC2 the instance's end cuts only that wait."
        % (codes.count(74), len(codes), min(before), max(before), min(after), max(after)),
        "",
    ]
    with open(args.md, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
