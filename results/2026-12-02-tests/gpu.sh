# The GPU tests of a commit on the GPU machine (DALI carried: .devcarry/env.sh), from the project root:
#   bash results/2026-12-02-tests/gpu.sh   -> $OUT/pytest-gpu-<commit>.txt, $OUT/versions-<commit>.txt
set -u
. .devcarry/env.sh
sha=${PIPEBENCH_GIT_COMMIT:0:7}
python -c "import torch, torchvision, nvidia.dali as d; print('torch', torch.__version__, 'torchvision', \
torchvision.__version__, 'dali', d.__version__, torch.cuda.get_device_name())" > "$OUT/versions-$sha.txt" 2>&1
timeout 560 python -m pytest -q -rs -p no:cacheprovider -m gpu > "$OUT/pytest-gpu-$sha.txt" 2>&1
echo "rc $?" >> "$OUT/pytest-gpu-$sha.txt"
tail -25 "$OUT/pytest-gpu-$sha.txt"
