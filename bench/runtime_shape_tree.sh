#!/usr/bin/env bash
# The dwconv templates with the shape constants ignored, for A/B runs of what they buy:
#   bench/runtime_shape_tree.sh OUT_DIR
#   kvtune_variant_time --ab OUT_DIR/dwconv ...     (--machine-code: no GPU)
# Copies kernel_templates/common.cuh and kernel_templates/dwconv/*.cu, *.cuh, *.h into OUT_DIR and
# rewrites kvt_shape_fits to accept every argument and kvt_with_shape to return its argument, so
# every name compiles as before but reads C and the planes at run time (the form before a kernel
# took them as constants).
set -euo pipefail
out=${1:?usage: runtime_shape_tree.sh OUT_DIR}
here="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$out/dwconv"
cp "$here/kernel_templates/common.cuh" "$out/"
cp "$here"/kernel_templates/dwconv/*.cu "$here"/kernel_templates/dwconv/*.cuh "$here"/kernel_templates/dwconv/*.h "$out/dwconv/"
python3 - "$out/dwconv/dwconv.cu" <<'PY'
import re, sys
path = sys.argv[1]
text = open(path).read()
fits = re.compile(r"(bool kvt_shape_fits\(const KvtDwConvParams& p\) \{\n)  return [^\n]*\n")
shape = re.compile(r"(KvtDwConvParams kvt_with_shape\(KvtDwConvParams p\) \{\n)(.*?\n)(  return p;\n)", re.S)
text, n_fits = fits.subn(r"\1  return true;  // runtime_shape_tree.sh: the constants ignored\n", text)
text, n_shape = shape.subn(r"\1\3", text)
if (n_fits, n_shape) != (1, 1):
    sys.exit(f"runtime_shape_tree.sh: kvt_shape_fits / kvt_with_shape not found as expected in {path}")
open(path, "w").write(text)
PY
echo "$out/dwconv"
