#!/usr/bin/env bash
# Renders a chaos timeline picture in a real browser (headless Chromium) and
# checks that the result is not blank.
#
#   scripts/render-chaos-plot.sh [--build-dir DIR] [--svg FILE] [--out PNG]
#
# Without --svg it first draws one: `redlock-chaos --scenario
# kleppmann-clock-jump --seed 1 --plot TMP` from the build tree (about 15 s,
# real redis-servers). It then checks the SVG parses as XML, renders it with
# Debian's chromium to a PNG (--out, default a temporary file), decodes the
# PNG and requires enough non-white pixels in several colours.
#
# Needs chromium (not part of scripts/setup.sh):
#   apt-get install -y --no-install-recommends chromium
# and python3 (standard library only).
#
# Exit status: 0 rendered and not blank; 1 failure; 77 chromium is not
# installed (a skip for ctest), except with CI=true, where that is a failure.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=build
svg=""
out=""
while (($#)); do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    --svg) svg="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "render-chaos-plot.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

browser=""
for candidate in chromium chromium-browser; do
  if command -v "$candidate" >/dev/null 2>&1; then browser=$(command -v "$candidate"); break; fi
done
if [[ -z "$browser" ]]; then
  echo "render-chaos-plot.sh: chromium is not installed;" \
       "apt-get install -y --no-install-recommends chromium" >&2
  if [[ "${CI:-}" == "true" ]]; then exit 1; fi
  exit 77
fi
if ! command -v python3 >/dev/null 2>&1; then
  echo "render-chaos-plot.sh: python3 is needed to check the picture" >&2
  exit 1
fi

work=$(mktemp -d /tmp/redlock-render-XXXXXX)
browser_pid=""
cleanup() {
  if [[ -n "$browser_pid" ]]; then kill "$browser_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

if [[ -z "$svg" ]]; then
  chaos="$build_dir/chaos/redlock-chaos"
  if [[ ! -x "$chaos" ]]; then
    echo "render-chaos-plot.sh: $chaos not built (scripts/setup.sh builds it)" >&2
    exit 1
  fi
  "$chaos" --scenario kleppmann-clock-jump --seed 1 --plot "$work/plots" >"$work/chaos.log" 2>&1 || {
    # The picture is drawn whatever the verdict; a harness failure is not ours to judge here.
    echo "render-chaos-plot.sh: redlock-chaos exited $?; its output:" >&2
    cat "$work/chaos.log" >&2
  }
  svg="$work/plots/kleppmann-clock-jump.svg"
fi
if [[ ! -s "$svg" ]]; then
  echo "render-chaos-plot.sh: no picture at $svg" >&2
  exit 1
fi
[[ -n "$out" ]] || out="$work/picture.png"
out=$(realpath -m "$out")

# The size the picture asks for, so the screenshot holds all of it.
read -r width height < <(python3 - "$svg" <<'EOF'
import sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag.endswith("svg"), root.tag
print(int(float(root.get("width"))), int(float(root.get("height"))))
EOF
)
echo "render-chaos-plot.sh: $svg parses as XML, ${width}x${height}"

# Bounded: the browser gets 90 s, then it is killed (by pid).
"$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --disable-default-apps --hide-scrollbars --user-data-dir="$work/profile" \
  --screenshot="$out" --window-size="$width,$height" "file://$(realpath "$svg")" \
  >"$work/browser.log" 2>&1 &
browser_pid=$!
for _ in $(seq 1 90); do
  kill -0 "$browser_pid" 2>/dev/null || break
  sleep 1
done
if kill -0 "$browser_pid" 2>/dev/null; then
  echo "render-chaos-plot.sh: chromium did not finish within 90 s" >&2
  exit 1
fi
wait "$browser_pid" || true
browser_pid=""
if [[ ! -s "$out" ]]; then
  echo "render-chaos-plot.sh: chromium wrote no screenshot; its output:" >&2
  cat "$work/browser.log" >&2
  exit 1
fi

# Decodes the PNG (zlib + the five scanline filters) and counts the pixels
# that are not white, and their colours.
python3 - "$out" "$width" "$height" <<'EOF'
import struct
import sys
import zlib

path, want_w, want_h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
data = open(path, "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, ihdr = 8, b"", None
while pos < len(data):
    (length,) = struct.unpack(">I", data[pos:pos + 4])
    kind = data[pos + 4:pos + 8]
    body = data[pos + 8:pos + 8 + length]
    pos += 12 + length
    if kind == b"IHDR":
        ihdr = struct.unpack(">IIBBBBB", body)
    elif kind == b"IDAT":
        idat += body
    elif kind == b"IEND":
        break
width, height, depth, color, _, _, interlace = ihdr
assert depth == 8 and interlace == 0, f"unsupported PNG: depth {depth}, interlace {interlace}"
channels = {0: 1, 2: 3, 4: 2, 6: 4}[color]
raw = zlib.decompress(idat)
stride = width * channels
rows, prev, i = [], bytearray(stride), 0
for _ in range(height):
    f = raw[i]
    line = bytearray(raw[i + 1:i + 1 + stride])
    i += 1 + stride
    for x in range(stride):
        a = line[x - channels] if x >= channels else 0
        b = prev[x]
        c = prev[x - channels] if x >= channels else 0
        if f == 1:
            line[x] = (line[x] + a) & 255
        elif f == 2:
            line[x] = (line[x] + b) & 255
        elif f == 3:
            line[x] = (line[x] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(line)
    prev = line
inked, colors = 0, set()
for line in rows:
    for x in range(0, stride, channels):
        px = tuple(line[x:x + min(channels, 3)])
        if min(px) < 235:
            inked += 1
            colors.add(tuple(v // 32 for v in px))
total = width * height
share = inked / total
print(f"render-chaos-plot.sh: {path}: {width}x{height}, {share:.1%} of the pixels inked, "
      f"{len(colors)} colour classes")
if width < want_w * 0.9 or height < want_h * 0.5:
    sys.exit(f"render-chaos-plot.sh: screenshot {width}x{height} smaller than the picture")
if share < 0.03 or len(colors) < 6:
    sys.exit("render-chaos-plot.sh: the rendered picture is blank or nearly so")
EOF
echo "render-chaos-plot.sh: OK ($out)"
