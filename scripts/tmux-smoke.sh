#!/usr/bin/env bash
# End-to-end smoke test of the real TUI in a real terminal (tmux), against the loopback fake server:
# Models lists fake/m -> select it, run kind "speed only", run -> the Run screen shows "complete"
# (and `forgetui runs` agrees) -> Results lists the run -> Cases shows a case count -> q quits.
#
#   bash scripts/tmux-smoke.sh
#
# Everything lives in a temporary FORGETUI_HOME and a private tmux server (its own socket, no user
# tmux.conf), removed at exit, also on failure. Every wait is bounded; a pass takes about 7 s.
# FORGETUI_CMD (default "uv run forgetui") and PYTHON_CMD (default "uv run python") pick the
# commands. Without tmux it fails with an install hint (.ci/run installs tmux with apt-get).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

FORGETUI_CMD=${FORGETUI_CMD:-uv run forgetui}
PYTHON_CMD=${PYTHON_CMD:-uv run python}
read -r -a FORGETUI <<<"$FORGETUI_CMD"
read -r -a PYTHON <<<"$PYTHON_CMD"

if ! command -v tmux >/dev/null 2>&1; then
    echo "FAIL tmux smoke test needs tmux: install it with 'sudo apt-get install tmux'" \
         "(Debian/Ubuntu), 'sudo dnf install tmux' (Fedora) or 'brew install tmux' (macOS)" >&2
    exit 1
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/forgetui-smoke.XXXXXX")
export FORGETUI_HOME="$WORK/home"
SOCK="forgetui-smoke-$$"
SESSION="smoke"
TMUX_=(tmux -L "$SOCK" -f /dev/null)
SERVER_PID=""
LAST_PANE=""

cleanup() {
    "${TMUX_[@]}" kill-server >/dev/null 2>&1 || true
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill "$SERVER_PID" 2>/dev/null || true
        for _ in $(seq 20); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$SERVER_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

pane() { "${TMUX_[@]}" capture-pane -p -t "$SESSION" 2>/dev/null || true; }

fail() {
    echo "FAIL $*"
    echo "---- pane (120x36) ----"
    if [ -n "$LAST_PANE" ]; then printf '%s\n' "$LAST_PANE"; else pane; fi
    echo "-----------------------"
    if [ -s "$WORK/fakeserver.log" ]; then echo "---- fake server ----"; tail -n 20 "$WORK/fakeserver.log"; fi
    exit 1
}

# wait_for REGEX SECONDS WHAT: poll the pane (every 0.2 s, bounded) until it matches REGEX.
wait_for() {
    local regex=$1 limit=$2 what=$3 i
    for ((i = 0; i < limit * 5; i++)); do
        LAST_PANE=$(pane)
        if grep -Eq -- "$regex" <<<"$LAST_PANE"; then echo "PASS $what"; return 0; fi
        sleep 0.2
    done
    fail "$what (no match for /$regex/ within ${limit}s)"
}

# 1. The fake server (20 tokens a request, 1 ms apart), its URL from its first stdout line.
"${PYTHON[@]}" tests/fakeserver.py --model m --tokens 20 --gap-s 0.001 --max-lifetime-s 90 \
    >"$WORK/fakeserver.out" 2>"$WORK/fakeserver.log" &
SERVER_PID=$!
URL=""
for _ in $(seq 100); do  # 20 s at most (the first `uv run` may sync the environment)
    URL=$(sed -n 's/^FAKESERVER_URL=//p' "$WORK/fakeserver.out" 2>/dev/null || true)
    [ -n "$URL" ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || fail "fake server exited early"
    sleep 0.2
done
[ -n "$URL" ] || fail "fake server did not print its URL within 20 s"
echo "PASS fake server at $URL"

# 2. A config with that one provider, where forgetui looks for it under this FORGETUI_HOME.
CONFIG=$("${FORGETUI[@]}" locate config) || fail "$FORGETUI_CMD locate config failed"
case "$CONFIG" in "$FORGETUI_HOME"/*) ;; *) fail "config path $CONFIG is not under FORGETUI_HOME";; esac
mkdir -p "$(dirname "$CONFIG")"
printf '[[providers]]\nname = "fake"\nbase_url = "%s"\n' "$URL" >"$CONFIG"

# 3. The TUI in a detached 120x36 tmux session. The pane stays after the app exits, so a traceback
#    can be shown; the app's exit status goes to a file (tmux 3.3 does not always reap the pane's
#    process, so #{pane_dead_status} can stay empty).
APP="env FORGETUI_HOME=$(printf %q "$FORGETUI_HOME") TERM=xterm-256color $FORGETUI_CMD; echo \$? >$(printf %q "$WORK/exit-status")"
"${TMUX_[@]}" new-session -d -s "$SESSION" -x 120 -y 36 -c "$ROOT" "$APP"
"${TMUX_[@]}" set-option -t "$SESSION" remain-on-exit on >/dev/null
keys() { "${TMUX_[@]}" send-keys -t "$SESSION" "$@"; }

wait_for '\[ \] +fake/m' 30 "Models screen lists fake/m"
keys Space
wait_for '\[x\] +fake/m' 5 "fake/m selected"
keys m
wait_for 'speed only' 5 "run kind is speed only"
keys r
wait_for 'Run [0-9]{8}-[0-9]{6}-[^ ]+ +complete' 30 "Run screen shows the run complete"
RUN_ID=$(grep -Eo 'Run [0-9]{8}-[0-9]{6}-[^ ]+ +complete' <<<"$LAST_PANE" | head -n1 | awk '{print $2}')
RUNS=$("${FORGETUI[@]}" runs) || fail "$FORGETUI_CMD runs failed"
if grep -Eq "^$RUN_ID +complete " <<<"$RUNS"; then
    echo "PASS forgetui runs lists $RUN_ID as complete"
else
    LAST_PANE=$RUNS
    fail "forgetui runs does not list $RUN_ID as complete"
fi

keys 3
wait_for "runs, newest first" 10 "Results screen shows the run list"
wait_for "$RUN_ID" 10 "Results screen shows run $RUN_ID"
keys 4
wait_for '[0-9]+ of [0-9]+ cases' 10 "Cases screen shows a case count"

# 4. q quits (no run is active): the app exits with status 0 and the pane dies.
keys q
for _ in $(seq 50); do
    [ -s "$WORK/exit-status" ] && [ "$("${TMUX_[@]}" display-message -p -t "$SESSION" '#{pane_dead}' 2>/dev/null)" = 1 ] && break
    sleep 0.2
done
LAST_PANE=$(pane)
[ -s "$WORK/exit-status" ] || fail "q did not quit the app within 10 s"
STATUS=$(cat "$WORK/exit-status")
[ "$STATUS" = 0 ] || fail "the app exited with status $STATUS"
[ "$("${TMUX_[@]}" display-message -p -t "$SESSION" '#{pane_dead}' 2>/dev/null)" = 1 ] || fail "the pane is still alive"
"${TMUX_[@]}" kill-session -t "$SESSION"
if "${TMUX_[@]}" has-session -t "$SESSION" 2>/dev/null; then fail "tmux session still there"; fi
echo "PASS q quit the app (exit status 0), session ended"
echo "PASS tmux smoke test"
