#!/usr/bin/env bash
# Cleans up after test processes that died without cleaning up (SIGKILL, OOM, crash).
# harness/env records every process group, temp dir and network namespace it creates in
# .cache/run/<test pid>.json; for each file whose owner process is gone, this kills the
# recorded process groups, removes the recorded temp dirs and namespaces, and deletes
# the file. Safe to run any time: files of live owners are left alone, and it never
# signals a process that is not a member of a recorded group started after its record
# (a reused pid or process group id is recognised by its start time and skipped).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
RUN_DIR="$ROOT/.cache/run"
[[ -d "$RUN_DIR" ]] || exit 0
shopt -s nullglob
files=("$RUN_DIR"/[0-9]*.json)
((${#files[@]})) || exit 0

exec python3 - "${files[@]}" <<'PY'
import json, os, re, signal, shutil, subprocess, sys, tempfile, time

def stat(pid):
    """(pgid, starttime) of a live process, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return None
    rest = s[s.rfind(")") + 2:].split()
    if rest[0] == "Z":
        return None  # zombie: nothing left to kill
    return int(rest[2]), int(rest[19])

def members(pgid, start):
    """Live processes of recorded group pgid that started no earlier than its leader."""
    leader = stat(pgid)
    if leader is not None and leader[1] != start:
        return []  # pid reused by an unrelated process: not ours
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        st = stat(int(d))
        if st and st[0] == pgid and st[1] >= start:
            out.append(int(d))
    return out

tmp_root = os.path.realpath(tempfile.gettempdir())
for path in sys.argv[1:]:
    m = re.fullmatch(r"(\d+)\.json", os.path.basename(path))
    if not m:
        continue
    try:
        with open(path) as f:
            rec = json.load(f)
    except (OSError, ValueError) as e:
        print(f"reap: skipping unreadable {path}: {e}", file=sys.stderr)
        continue
    owner = int(rec.get("owner", m.group(1)))
    st = stat(owner)
    if st is not None and (not rec.get("ownerStart") or st[1] == rec["ownerStart"]):
        continue  # owner alive: its own exit handlers clean up
    killed = 0
    for g in rec.get("groups", []):
        pgid, start = int(g["pgid"]), int(g.get("start", 0))
        if pgid <= 1:
            continue
        for _ in range(50):
            pids = members(pgid, start)
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        else:
            print(f"reap: group {pgid} ({g.get('name')}) still has processes", file=sys.stderr)
    removed = 0
    for d in rec.get("tempDirs", []):
        real = os.path.realpath(d)
        # Only ever temp dirs harness/env made: <tmp>/fastfence-*
        if os.path.dirname(real) == tmp_root and os.path.basename(real).startswith("fastfence-"):
            if os.path.exists(real):
                shutil.rmtree(real, ignore_errors=True)
                removed += 1
    ns_deleted = 0
    for ns in rec.get("netns", []):
        if re.fullmatch(r"[A-Za-z0-9_.-]+", ns) and os.path.exists(f"/run/netns/{ns}"):
            if subprocess.run(["ip", "netns", "delete", ns]).returncode == 0:
                ns_deleted += 1
    os.remove(path)
    print(f"reap: owner {owner} gone: killed {killed} process(es), removed {removed} dir(s), {ns_deleted} netns")
PY
