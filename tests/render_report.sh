#!/usr/bin/env bash
# Renders the HTML report of the example export in headless Chromium and checks that the charts
# are really there: in the DOM Chromium built (--dump-dom: every SVG chart and its marks) and in
# the picture (a PNG of the expected size that is not a blank page).
#
# usage: render_report.sh KVTUNE-CACHE EXPORT.json [OUT.png]
# Exit status 77 (skipped) when no Chromium is installed (Debian: apt-get install chromium).
set -euo pipefail
tool=$1
export_json=$2
png_out=${3:-}

browser=""
for candidate in chromium chromium-browser google-chrome; do
  if command -v "$candidate" > /dev/null 2>&1; then
    browser=$candidate
    break
  fi
done
if [ -z "$browser" ]; then
  echo "render_report: no chromium found; skipping (apt-get install chromium)"
  exit 77
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "render_report: FAILED: $*" >&2
  exit 1
}

"$tool" import "$export_json" --cache "$work/cache.db" > /dev/null
"$tool" report --html "$work/report.html" --cache "$work/cache.db" > /dev/null
entries=$(grep -c '"problem_key"' "$export_json")
devices=$(grep -o '"device_id": "[0-9a-f]*"' "$export_json" | sort -u | wc -l)

# No network, no profile left behind; --no-sandbox because CI runs as root.
flags=(--headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars --no-first-run
       --user-data-dir="$work/profile" --window-size=1500,2200)
url="file://$work/report.html"

"$browser" "${flags[@]}" --dump-dom "$url" > "$work/dom.html" 2> "$work/chromium-dom.log" ||
  fail "chromium --dump-dom failed: $(tail -3 "$work/chromium-dom.log")"
count() { grep -o "$1" "$work/dom.html" | wc -l; }
[ "$(count '<svg class="roofline"')" -eq "$devices" ] || fail "expected $devices roofline charts"
[ "$(count '<svg class="bandwidth"')" -eq "$devices" ] || fail "expected $devices bandwidth charts"
[ "$(count '<svg class="speedup"')" -eq "$devices" ] || fail "expected $devices speedup charts"
[ "$(count '<svg class="distribution"')" -eq "$entries" ] || fail "expected $entries distribution charts"
[ "$(count 'class="point winner"')" -eq "$entries" ] || fail "expected $entries winner points on the rooflines"
[ "$(count '<path class="winner"')" -eq "$entries" ] || fail "expected the winner marked in $entries distributions"
[ "$(count '<path class="seed"')" -ge 1 ] || fail "no seed design marked"
[ "$(count '<rect class="heuristic"')" -ge 1 ] || fail "no heuristic marked"
[ "$(count 'class="ceiling copy"')" -ge 1 ] || fail "no copy-bandwidth ceiling drawn"
[ "$(count '<circle class="variant"')" -ge 100 ] || fail "the variant distributions are nearly empty"

"$browser" "${flags[@]}" --screenshot="$work/report.png" "$url" > "$work/chromium-png.log" 2>&1 ||
  fail "chromium --screenshot failed: $(tail -3 "$work/chromium-png.log")"
[ -f "$work/report.png" ] || fail "no PNG written"
# PNG signature, then the IHDR width and height (big-endian) at bytes 16..23.
[ "$(head -c 8 "$work/report.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || fail "not a PNG"
read -r width height < <(od -An -tu1 -j16 -N8 "$work/report.png" |
  awk '{ print ($1*16777216 + $2*65536 + $3*256 + $4), ($5*16777216 + $6*65536 + $7*256 + $8) }')
[ "$width" -eq 1500 ] && [ "$height" -eq 2200 ] || fail "PNG is ${width}x${height}, expected 1500x2200"
# A blank or nearly blank 1500x2200 page compresses to a few KiB; charts, text and thousands of
# dots do not.
size=$(stat -c %s "$work/report.png")
[ "$size" -gt 100000 ] || fail "PNG is only $size bytes: the page looks blank"
if command -v python3 > /dev/null 2>&1; then
  # Decode the PNG (no third-party modules) and count distinct colours in the chart area.
  colours=$(python3 - "$work/report.png" << 'EOF'
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
pos, idat, width, height, ctype = 8, b"", 0, 0, 0
while pos < len(data):
    length, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + length]
    if kind == b"IHDR":
        width, height, depth, ctype = struct.unpack(">IIBB", body[:10])
    elif kind == b"IDAT":
        idat += body
    pos += 12 + length
channels = {2: 3, 6: 4}[ctype]
raw, stride = zlib.decompress(idat), width * channels
previous, seen = bytearray(stride), set()
for y in range(min(height, 1400)):  # the charts of the first device are in the top rows
    line = raw[y * (stride + 1):(y + 1) * (stride + 1)]
    f, cur = line[0], bytearray(line[1:])
    for i in range(stride):
        a = cur[i - channels] if i >= channels else 0
        b = previous[i]
        c = previous[i - channels] if i >= channels else 0
        if f == 1: cur[i] = (cur[i] + a) & 255
        elif f == 2: cur[i] = (cur[i] + b) & 255
        elif f == 3: cur[i] = (cur[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            cur[i] = (cur[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    previous = cur
    if y % 4 == 0:
        for x in range(0, width, 3):
            seen.add(bytes(cur[x * channels:x * channels + 3]))
print(len(seen))
EOF
  )
  [ "$colours" -ge 50 ] || fail "only $colours colours in the rendering: the charts are missing"
  echo "render_report: $colours distinct colours"
fi
if [ -n "$png_out" ]; then
  cp "$work/report.png" "$png_out"
fi
echo "render_report: ok ($devices devices, $entries problems, ${width}x${height} PNG of $size bytes)"
