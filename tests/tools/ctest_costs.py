#!/usr/bin/env python3
"""Writes tests/ctest_costs.txt from the output of a `scripts/test.sh` run.

CTest starts the tests of a parallel run in descending order of cost, and
takes each test's cost from <build>/Testing/Temporary/CTestCostData.txt,
which a fresh build dir does not have: its tests then start in the order
they were declared, and the longest could start last. scripts/test.sh
copies this file there when the build dir has none (docs/testing.md,
"Parallel runs"). Refresh it after tests were added or changed a lot:

    python3 tests/tools/ctest_costs.py build/test-run.log > tests/ctest_costs.txt
"""
import re
import sys


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    done = re.compile(r"^\s*\d+/\d+ Test\s+#\d+: (\S+) .*?\s([\d.]+) sec\s*$")
    costs = {}
    with open(sys.argv[1], encoding="utf-8", errors="replace") as log:
        for line in log:
            m = done.match(line)
            if m:
                costs[m.group(1)] = float(m.group(2))
    if not costs:
        print(f"{sys.argv[1]}: no finished test found (not the output of ctest?)", file=sys.stderr)
        return 1
    # CTestCostData.txt: "<test> <runs> <average seconds>" per line, then
    # "---" and the tests that failed last time (none here).
    for name in sorted(costs):
        print(f"{name} 1 {costs[name]:.2f}")
    print("---")
    return 0


if __name__ == "__main__":
    sys.exit(main())
