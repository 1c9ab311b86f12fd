#!/usr/bin/env bash
# code_sandbox.sh GRPO SOURCE_DIR — builtin.code through `grpo reward score` (issue 33, item 4):
# - correct programs score 1 and partial ones the fraction passed, for both test formats (asserts
#   and stdin/stdout pairs), and scoring = all gives 0 for a partial one;
# - hostile programs (fork bomb, 10 GB allocation, endless loop, a socket to a server on the host,
#   writes outside the tmpfs, reads of the host's files, 1 GB of output) each score 0 within the
#   limits, a correct program after each still scores 1, nothing outside the sandbox changes and
#   nothing of them is left running; their tests would pass were they not sandboxed (the read,
#   write and socket ones are run once with sandbox = none to show it);
# - a sandbox that bubblewrap cannot build makes the reward refuse to start, saying why.
# - the reference solutions of examples/code all score 1.
# Where this machine's kernel refuses unprivileged user namespaces the test says so and skips (77).
set -uo pipefail
grpo=$(realpath "$1")
examples=$(realpath "$2")/examples
dir=$(mktemp -d -p "$PWD" code_sandbox.XXXXXX) # not under /tmp: the sandbox has its own /tmp
cleanup() { kill "$server" 2>/dev/null; rm -rf "$dir" "$fakebin" "/tmp/grpo_code_marker_$$"; }
trap cleanup EXIT
fakebin=
server=
cd "$dir" || exit 1
fail=0
bad() { echo "FAIL: $*"; fail=1; }

cat > run.ini <<'EOF'
[reward.code]
plugin = builtin.code
time_limit = 3
cpu_limit = 3
[reward.all]
plugin = builtin.code
scoring = all
time_limit = 3
cpu_limit = 3
EOF
echo '{"completion": "```python\nprint(1)\n```", "tests": "assert True"}' > probe.jsonl
if ! out=$("$grpo" reward score --config run.ini --input probe.jsonl 2>&1); then
    if [[ $out == *"cannot run programs in its sandbox"* ]]; then
        echo "SKIP: this machine refuses bubblewrap's sandbox (user namespaces?): $out"
        exit 77
    fi
    echo "FAIL: grpo reward score on a trivial program: $out"; exit 1
fi

# A server on the host that a sandboxed program must not reach: it records any connection.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])')
python3 - "$port" "$dir/contacted" <<'EOF' &
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8)
while True:
    c, _ = s.accept(); open(sys.argv[2], "a").write("x"); c.sendall(b"token-42\n"); c.close()
EOF
server=$!
echo "host secret $$" > secret.txt
marker_tmp=/tmp/grpo_code_marker_$$
for i in $(seq 50); do # until it listens
    python3 -c "import socket; socket.create_connection(('127.0.0.1', $port)).close()" \
        2>/dev/null && break
    sleep 0.1
done
rm -f contacted

# The rows: NAME, completion code, tests (JSON). Hostile ones pass their tests unless sandboxed.
python3 - "$dir" "$port" "$marker_tmp" <<'EOF'
import json, sys
d, port, marker_tmp = sys.argv[1], int(sys.argv[2]), sys.argv[3]
add = "def add(a, b):\n    return a + b\n"
good = ("good", add, "assert add(1, 2) == 3\nassert add(2, 2) == 4")
rows = [
    good,
    ("asserts_partial", "def add(a, b):\n    return a * b\n",   # 2 != 3, 4 == 4, 0 != 5, 9 == 9
     "assert add(1, 2) == 3\nassert add(2, 2) == 4\nassert add(0, 5) == 5\nassert add(3, 3) == 9"),
    ("io_good", "n = int(input())\nprint(n * 2)\n",
     [{"input": "2\n", "output": "4\n"}, {"input": "5", "output": "10"}]),
    ("io_partial", "n = int(input())\nprint(n * n)\n",           # 2*2 == 4, 3*3 != 6, 0*0 == 0
     [{"input": "2", "output": "4"}, {"input": "3", "output": "6"}, {"input": "0", "output": "0"}]),
    ("fork_bomb", "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n"
     "        pass\n", "assert True"), good,
    ("memory_10g", "x = bytearray(10 * 2**30)\nx[-1] = 1\nok = True\n", "assert ok"), good,
    ("loop", "while True:\n    pass\n", "assert True"), good,
    ("socket", "import socket\ns = socket.create_connection(('127.0.0.1', %d), timeout=2)\n"
     "got = s.recv(100).decode()\n" % port, "assert got.startswith('token-42')"), good,
    ("write_outside", "import os\nwrote = []\nfor p in [%r, %r, '/usr/grpo_marker', "
     "'/grpo_marker']:\n    try:\n        open(p, 'w').write('x')\n        wrote.append(p)\n"
     "    except OSError:\n        pass\nopen(%r, 'w').write('inside')\n"
     % (d + "/written", d + "/../written_" + str(port), marker_tmp),
     "assert wrote"), good,
    ("read_host", "found = ''\nfor p in [%r, '/etc/passwd', '/etc/hostname', '/root/.bashrc']:\n"
     "    try:\n        found += open(p).read()\n    except OSError:\n        pass\n"
     % (d + "/secret.txt"), "assert found"), good,
    ("read_host_io", "print(open(%r).read().strip())\n" % (d + "/secret.txt"),
     [{"input": "", "output": open(d + "/secret.txt").read()}]), good,
    ("print_1g", "import sys\nsys.stdout.write('x' * 2**30)\nok = True\n", "assert ok"), good,
]
def line(name, code, tests, **extra):
    return json.dumps(dict(name=name, completion="Here:\n```python\n" + code + "```\n",
                           tests=tests, **extra)) + "\n"
with open("rows.jsonl", "w") as f:
    for r in rows: f.write(line(*r))
    f.write(json.dumps({"name": "no_code", "completion": "add is a + b",
                        "tests": "assert True"}) + "\n")
    f.write(json.dumps({"name": "no_tests", "completion": "```\nprint(1)\n```"}) + "\n")
with open("leaky.jsonl", "w") as f:
    for r in rows:
        if r[0] in ("socket", "read_host", "read_host_io"): f.write(line(*r))
    f.write(line("write_outside", "open(%r, 'w').write('x')\nwrote = 1\n" % (d + "/written"),
                 "assert wrote"))
EOF

start=$(date +%s)
"$grpo" reward score --config run.ini --input rows.jsonl > scores.jsonl 2> stderr.txt
rc=$?; took=$(( $(date +%s) - start ))
[[ $rc == 0 ]] || bad "grpo reward score exited $rc: $(tail -3 stderr.txt)"
# line N of scores.jsonl is line N of rows.jsonl
python3 - rows.jsonl scores.jsonl <<'EOF' || fail=1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
scores = [json.loads(l) for l in open(sys.argv[2])]
expect = {"good": (1, 1), "asserts_partial": (0.5, 0), "io_good": (1, 1), "io_partial": (2/3, 0),
          "no_code": (0, 0), "no_tests": (None, None)}
bad = 0
if len(scores) != len(rows):
    print("FAIL: %d rows, %d scores" % (len(rows), len(scores))); sys.exit(1)
for r, s in zip(rows, scores):
    want = expect.get(r["name"], (0, 0))
    got = (s["rewards"]["code"], s["rewards"]["all"])
    ok = all((w is None and g is None) or (w is not None and g is not None and abs(w - g) < 1e-6)
             for w, g in zip(want, got))
    print("%s %-16s scored %s (fraction) %s (all), expected %s" % ("ok  " if ok else "FAIL",
          r["name"], got[0], got[1], want))
    bad |= not ok
sys.exit(bad)
EOF
# 7 hostile programs x 2 rewards at <= 3 s each, the rest fast: bounded well under the sum
[[ $took -le 60 ]] || bad "the run took $took s"
[[ ! -e contacted ]] || bad "a sandboxed program reached the host's server"
for f in written "../written_$port" /usr/grpo_marker /grpo_marker "$marker_tmp"; do
    [[ ! -e $f ]] || bad "a sandboxed program wrote $f on the host"
done
sleep 1
# harness processes whose grpo is gone (those under another run's live grpo are not ours)
left=$(python3 - <<'PY'
import os
def cmd(p):
    try:
        return open("/proc/%s/cmdline" % p, "rb").read().replace(b"\0", b" ").decode("latin-1")
    except OSError:
        return ""
def parent(p):
    try:
        return open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()[1]
    except (OSError, IndexError):
        return "0"
for p in filter(str.isdigit, os.listdir("/proc")):
    if "_grpo_harness" not in cmd(p):
        continue
    q = p
    while q not in ("0", "1") and "grpo reward score" not in cmd(q):
        q = parent(q)
    if q in ("0", "1"):
        print(p, end=" ")
PY
)
[[ -z $left ]] || bad "sandboxed processes are still running: $left"

# The same read, write and socket programs without the sandbox pass: the checks above can fail.
printf '[reward.code]\nplugin = builtin.code\nsandbox = none\ntime_limit = 5\n' > none.ini
"$grpo" reward score --config none.ini --input leaky.jsonl > leaky_scores.jsonl 2> none_err.txt
n=$(grep -c '"code": 1}' leaky_scores.jsonl)
[[ $n == 4 ]] || bad "with sandbox = none the leaky programs scored $(cat leaky_scores.jsonl)"
[[ -e contacted && -e written ]] || bad "with sandbox = none nothing reached the server or the disk"
grep -q "sandbox = none: the completions' code runs WITHOUT isolation" none_err.txt ||
    bad "sandbox = none did not warn: $(cat none_err.txt)"

# A bubblewrap that cannot build its namespaces: the reward refuses to start and says why.
fakebin=$(mktemp -d) # where uid 65534 can run it
chmod 755 "$fakebin"
printf '#!/bin/sh\necho "bwrap: No permissions to create new namespace" >&2\nexit 1\n' \
    > "$fakebin/bwrap"
chmod 755 "$fakebin/bwrap"
out=$(PATH="$fakebin:$PATH" "$grpo" reward score --config run.ini --input probe.jsonl 2>&1)
rc=$?
[[ $rc != 0 && $out == *"No permissions to create new namespace"* &&
   $out == *"sandbox = none"* ]] || bad "a refused sandbox gave exit $rc: $out"
out=$(PATH=/nonexistent "$grpo" reward score --config run.ini --input probe.jsonl 2>&1)
[[ $? != 0 && $out == *bubblewrap* ]] || bad "without bwrap on PATH: $out"

# examples/code: every reference solution passes its problem's tests.
n=$("$grpo" reward score --config run.ini --input "$examples/code/solutions.jsonl" |
    grep -c '"code": 1, "all": 1}')
[[ $n == 12 ]] || bad "examples/code/solutions.jsonl: $n of 12 reference solutions scored 1"

[[ $fail == 0 ]] &&
    echo "ok   builtin.code: hostile programs score 0 in ${took} s with the host unharmed"
exit $fail
