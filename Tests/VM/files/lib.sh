# Helpers of the VM scenario (sourced). Every check prints one line
#   CHECK ok|FAIL | what | expected | seen
# which run.sh counts. Nothing here sleeps for an outcome: waits poll a condition with a deadline.

# check WHAT EXPECTED SEEN: ok when SEEN equals EXPECTED.
check() {
    local what=$1 expected=$2 seen=$3
    if [ "$seen" = "$expected" ]; then
        printf 'CHECK ok | %s | %s | %s\n' "$what" "$expected" "$seen"
    else
        printf 'CHECK FAIL | %s | %s | %s\n' "$what" "$expected" "$seen"
    fi
}

# check_match WHAT PATTERN SEEN: ok when SEEN matches the extended regular expression PATTERN.
check_match() {
    local what=$1 pattern=$2 seen=$3
    if [[ $seen =~ $pattern ]]; then
        printf 'CHECK ok | %s | /%s/ | %s\n' "$what" "$pattern" "$seen"
    else
        printf 'CHECK FAIL | %s | /%s/ | %s\n' "$what" "$pattern" "$seen"
    fi
}

# check_no_match WHAT PATTERN SEEN: ok when SEEN does not match PATTERN.
check_no_match() {
    local what=$1 pattern=$2 seen=$3
    if [[ $seen =~ $pattern ]]; then
        printf 'CHECK FAIL | %s | no /%s/ | %s\n' "$what" "$pattern" "$seen"
    else
        printf 'CHECK ok | %s | no /%s/ | %s\n' "$what" "$pattern" "$(head -c 200 <<<"$seen")"
    fi
}

# wait_until SECONDS COMMAND...: runs COMMAND every 50 ms until it succeeds (0) or SECONDS pass (1).
wait_until() {
    local deadline=$(($(date +%s%N) + $1 * 1000000000))
    shift
    until "$@"; do
        [ "$(date +%s%N)" -lt "$deadline" ] || return 1
        sleep 0.05
    done
}

# A write to an extctl that has exited fails (EPIPE) instead of ending the scenario.
trap '' PIPE

# EXTCTL: how extctl is run (a user's extctl through runuser for the user unit).
EXTCTL=(extctl)

# json FILTER: reads a JSON document on stdin and prints FILTER of it, a Python expression of
# `d` (the document), or "?" when it does not apply.
json() {
    python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
    v = eval(sys.argv[1])
except Exception:
    v = "?"
print("null" if v is None else v)' "$1"
}

# status ID FILTER: FILTER of the extension's status document (its `extensions[0]` is `e`).
status() {
    "${EXTCTL[@]}" status --json "$1" 2>/dev/null | json "(lambda e: $2)(d['extensions'][0])"
}

# talk ID COMMAND...: acts as a host with `extctl open ID`: prints the pid line extctl prints,
# then sends each COMMAND over the request channel and prints the answer line; then closes
# extctl's input (a dismiss) and prints its exit status as "exit N". Each read waits at
# most 60 s; a line that never comes prints "(no answer)".
talk() {
    local id=$1 line fifo i o pid
    shift
    fifo=$(mktemp -d)
    mkfifo "$fifo/in" "$fifo/out"
    "${EXTCTL[@]}" open --timeout 60 "$id" <"$fifo/in" >"$fifo/out" 2>&1 &
    pid=$!
    exec {i}>"$fifo/in" {o}<"$fifo/out"
    if read -r -t 60 line <&"$o"; then echo "$line"; else echo "(no answer)"; fi
    for command in "$@"; do
        echo "$command" >&"$i" 2>/dev/null
        if read -r -t 60 line <&"$o"; then echo "$line"; else echo "(no answer)"; fi
    done
    exec {i}>&-
    # What extctl prints after the dismiss (an interruption, say) is drained, then its status.
    while read -r -t 60 line <&"$o"; do echo "$line"; done
    exec {o}<&-
    wait "$pid"
    echo "exit $?"
    rm -rf "$fifo"
}

# proc_state PID: the state letter of /proc/PID/stat, or "-" when there is no such process.
proc_state() {
    local stat
    [[ $1 =~ ^[0-9]+$ ]] || { echo -; return; }
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || { echo -; return; }
    stat=${stat##*) }
    echo "${stat%% *}"
}

# Whether the extension ID is in STATE (for wait_until).
is_state() { [ "$(status "$1" "e['state']")" = "$2" ]; }
