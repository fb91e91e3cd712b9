python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD
for c in "tvjpeg after 0 resnet 256" "tvjpeg after 0 eager 256" "tvjpeg after 0 busy 256" "tvjpeg after 0 resnet 32" "dataloader after 0 resnet 256"; do
  set -- $c; echo "=== $c"
  timeout 120 python .devcarry/repro.py $@ 2>&1 | grep -v "Warn\|warn\|^\s*$" | cut -c1-200 | tail -22
done
