# usage: bash bench/plans/ffcv-for-device.sh [PYTHON3.12], here, from the project root, where pip reaches
#   the package index and the system has OpenCV and libjpeg-turbo (apt-get install libopencv-dev
#   libturbojpeg0-dev pkg-config): the `ffcv` pipeline's package for the GPU machine, whose image runs
#   Python 3.12 and has no package index and no apt.
# Writes .devcarry/ffcv.tar.xz (ignored by git: .git/info/exclude) holding, under ffcv/:
#   site/  FFCV built for CPython 3.12 against this system's OpenCV and libjpeg-turbo, and the one
#          pure-Python package it imports there that the image lacks: pytorch-pfn-extras (its GPU
#          normalization, which also imports CuPy: the image has it); the rest it imports (numpy,
#          numba, torch, cv2, PIL, tqdm) the image has;
#   lib/   the shared libraries its extension needs (ldd), glibc's and the compiler runtime's excepted;
# and .devcarry/ffcv-env.sh. There, from the project root, with .devcarry carried:
#   source .devcarry/ffcv-env.sh   (unpacks into /tmp/ffcv once; puts site/ on PYTHONPATH, lib/ on LD_LIBRARY_PATH)
# Then it checks the package with this machine's Python 3.12 (PYTHON3.12, default pyenv's 3.12.1): the
# extension's libraries resolve to lib/ or glibc, and it loads beside OpenCV's own wheel, as it does there.
set -euo pipefail
python=${1:-/root/.pyenv/versions/3.12.1/bin/python}
FFCV=1.0.2 PFN_EXTRAS=0.9.0
SYSTEM='^(linux-vdso|libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|ld-linux-x86-64)\.so'   # what the image has
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$python" -m pip wheel -q --no-deps -w "$work/wheels" "ffcv==$FFCV"
"$python" -m pip download -q --no-deps --only-binary=:all: -d "$work/wheels" "pytorch-pfn-extras==$PFN_EXTRAS"
mkdir -p "$work/ffcv/site" "$work/ffcv/lib"
for wheel in "$work"/wheels/*.whl; do "$python" -m zipfile -e "$wheel" "$work/ffcv/site"; done
extension=$(ls "$work"/ffcv/site/ffcv/_libffcv.cpython-312-*.so)
ldd "$extension" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r name path; do
  if ! [[ $name =~ $SYSTEM ]]; then cp -L "$path" "$work/ffcv/lib/$name"; fi
done

# the check: every library from lib/ or glibc and the compiler runtime; loaded after cv2, in a Python 3.12 venv
unresolved=$(LD_LIBRARY_PATH="$work/ffcv/lib" ldd "$extension" | awk '$2 == "=>" {print $1, $3}' \
  | grep -vE "^[^ ]+ $work/ffcv/lib/" | grep -vE "$SYSTEM" || true)
if [ -n "$unresolved" ]; then echo "ffcv-for-device.sh: not from the package: $unresolved" >&2; exit 1; fi
"$python" -m venv "$work/venv"
"$work/venv/bin/pip" install -q numpy numba pillow opencv-python-headless tqdm
LD_LIBRARY_PATH="$work/ffcv/lib" "$work/venv/bin/python" -c "import cv2, ctypes, sys, numba
ctypes.CDLL(sys.argv[1]); print('ffcv-for-device.sh: the extension loads beside cv2', cv2.__version__)" "$extension"

mkdir -p .devcarry
tar -C "$work" -cJf .devcarry/ffcv.tar.xz ffcv
cat > .devcarry/ffcv-env.sh <<'EOF'
# source on the GPU machine, from the project root: FFCV for its Python 3.12 (bench/plans/ffcv-for-device.sh)
[ -d /tmp/ffcv/site/ffcv ] || tar -xJf .devcarry/ffcv.tar.xz -C /tmp || return 1
export PYTHONPATH=/tmp/ffcv/site${PYTHONPATH:+:$PYTHONPATH}
export LD_LIBRARY_PATH=/tmp/ffcv/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
EOF
ls -l .devcarry/ffcv.tar.xz .devcarry/ffcv-env.sh
