#!/usr/bin/env bash
# Renders an HTML report in headless Chromium, saves a PNG screenshot of it, and prints how
# long the page took to render, so that a report's look and its load time can be checked
# without a desktop. Chromium runs with every network-facing feature off and every host name
# resolving to nothing: a report must need nothing from the network, and this run would show
# it if it did (blank charts, no styles). The resolver rule also stops Chromium's own
# background calls (update checks, account probes), which the flags alone do not.
#
# Usage: scripts/screenshot.sh REPORT.html OUT.png
#   WINDOW=1400,2400  window size in pixels (width,height); the screenshot is this size.
#   RUNS=3            timed runs of each page; the fastest counts (other load on the machine
#                     only ever adds time).
# Needs Debian's chromium package: apt-get update && apt-get install -y chromium
#
# The render time is the screenshot run's wall time minus that of the same run on an empty
# page, so Chromium's own start-up is not counted; each is the fastest of RUNS runs.
set -euo pipefail

if [ $# -ne 2 ]; then
    echo "usage: $0 REPORT.html OUT.png" >&2
    exit 2
fi
report="$1"
out="$2"
if [ ! -f "$report" ]; then
    echo "$0: no such file: $report" >&2
    exit 2
fi
browser="$(command -v chromium || command -v chromium-browser || true)"
if [ -z "$browser" ]; then
    echo "$0: chromium not found; install it with: apt-get update && apt-get install -y chromium" >&2
    exit 2
fi
window="${WINDOW:-1400,2400}"
runs="${RUNS:-3}"
report_url="file://$(cd "$(dirname "$report")" && pwd)/$(basename "$report")"
out_abs="$(cd "$(dirname "$out")" && pwd)/$(basename "$out")"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

# Runs one headless screenshot of URL into FILE and prints its wall time in seconds.
shoot() {
    local url="$1" file="$2" profile start end
    profile="$(mktemp -d -p "$scratch")"
    start=$(date +%s.%N)
    "$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --no-pings --disable-domain-reliability --disable-client-side-phishing-detection \
        --disable-default-apps --disable-breakpad --host-resolver-rules="MAP * ~NOTFOUND" \
        --hide-scrollbars --user-data-dir="$profile" --window-size="$window" \
        --screenshot="$file" "$url" >"$scratch/log" 2>&1 || {
        cat "$scratch/log" >&2
        return 1
    }
    end=$(date +%s.%N)
    awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }'
}

# The fastest of RUNS runs of `shoot URL FILE`.
fastest() {
    local best="" t
    for _ in $(seq "$runs"); do
        t=$(shoot "$1" "$2")
        best=$(awk -v a="$t" -v b="$best" 'BEGIN { print (b == "" || a < b) ? a : b }')
    done
    echo "$best"
}

printf '<!DOCTYPE html><title>blank</title>' >"$scratch/blank.html"
baseline=$(fastest "file://$scratch/blank.html" "$scratch/blank.png")
total=$(fastest "$report_url" "$out_abs")
size=$(stat -c %s "$report")
printf '%s: %d bytes; screenshot %s (%s)\n' "$report" "$size" "$out" "$window"
awk -v t="$total" -v b="$baseline" -v n="$runs" 'BEGIN {
    r = t - b; if (r < 0) r = 0
    printf "render time %.2f s (Chromium run %.2f s, of which start-up on an empty page %.2f s; fastest of %d)\n", r, t, b, n
}'
