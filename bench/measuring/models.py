"""Models the harness trains: the built-in CIFAR ResNets, or the user's own.

Built in:
- `resnet18`: torchvision's ResNet-18 with the CIFAR stem (3x3 conv, stride 1, no max-pool),
  about 0.56 GFLOP per 32x32 image forward.
- `resnet9`: the DAWNBench / airbench-style ResNet-9 (Myrtle.ai), a few times cheaper.
  `resnet9-w<F>` scales its widths by F (e.g. `resnet9-w0.25`, `resnet9-w2`): the compute knob
  that moves model-only throughput continuously, to find where each pipeline stops keeping up.
- `vit-s4`, `vit-b4`: torchvision's VisionTransformer at ViT-S and ViT-B sizes (12 layers; 384 and
  768 wide) on 4x4 patches of a 32x32 image (64 tokens): a transformer at CIFAR's size, for
  32-px images only.

The user's own (a "model spec"):
- `torchvision:<name>`: any classification builder of `torchvision.models` (e.g.
  `torchvision:resnet50`, `torchvision:mobilenet_v3_small`), built with 10 classes, no weights.
- `timm:<name>`: any `timm.create_model` name, 10 classes, no pretrained weights (timm installed).
- `<module>:<callable>` or `<path/to/file.py>:<callable>`: a callable taking no arguments that
  returns an `nn.Module` with 10 outputs.
`check_model(spec, image_size)` builds the model and runs it on a 2-image batch at that size; a
spec that cannot be built, or whose output is not 2 x 10 logits, is a one-line `ValueError`
(`bench.running.plan.check_models` runs it, user code in a process of its own, and names the spec). Rows
carry the spec as given.
"""
from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import torch
from torch import nn

from pipelines.config import NUM_CLASSES

BUILT_IN = ("resnet18", "resnet9", "resnet9-w<F>", "vit-s4", "vit-b4")
VITS = {"vit-s4": (384, 6), "vit-b4": (768, 12)}   # width, heads; 12 layers, MLP 4x wide, 4x4 patches
_WIDTH = re.compile(r"resnet9-w(\d+(?:\.\d+)?)")


def _conv_bn(cin: int, cout: int, pool: bool = False) -> nn.Sequential:
    layers = [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]
    if pool:
        layers.append(nn.MaxPool2d(2))
    return nn.Sequential(*layers)


class _Residual(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.body = nn.Sequential(_conv_bn(channels, channels), _conv_bn(channels, channels))

    def forward(self, x):
        return x + self.body(x)


def resnet9(num_classes: int = NUM_CLASSES, width: float = 1.0) -> nn.Module:
    c1, c2, c3, c4 = (max(8, round(c * width / 8) * 8) for c in (64, 128, 256, 512))
    return nn.Sequential(
        _conv_bn(3, c1), _conv_bn(c1, c2, pool=True), _Residual(c2),
        _conv_bn(c2, c3, pool=True), _conv_bn(c3, c4, pool=True), _Residual(c4),
        nn.AdaptiveMaxPool2d(1), nn.Flatten(), nn.Linear(c4, num_classes))


def resnet18(num_classes: int = NUM_CLASSES) -> nn.Module:
    from torchvision.models import resnet18 as tv_resnet18   # torchvision's models are imported where built: seconds
    model = tv_resnet18(num_classes=num_classes)
    model.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model


def vit(width: int, heads: int, num_classes: int = NUM_CLASSES) -> nn.Module:
    from torchvision.models import VisionTransformer
    return VisionTransformer(image_size=32, patch_size=4, num_layers=12, num_heads=heads, hidden_dim=width,
                             mlp_dim=4 * width, num_classes=num_classes)


def _user_callable(target: str, name: str):
    """The callable `name` of a module name or a .py file."""
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_file():
            raise ValueError(f"no such file: {path}")
        loaded = importlib.util.spec_from_file_location(f"pipebench_user_model_{path.stem}", path)
        module = importlib.util.module_from_spec(loaded)
        loaded.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    builder = getattr(module, name, None)
    if not callable(builder):
        raise ValueError(f"{target} has no callable {name!r}")
    return builder


def build_model(spec: str) -> nn.Module:
    """The model a spec names (module docstring), 10 classes, on the CPU."""
    width = _WIDTH.fullmatch(spec)
    if spec == "resnet18":
        return resnet18()
    if spec == "resnet9" or (width and 0 < float(width.group(1)) <= 16):
        return resnet9(width=float(width.group(1)) if width else 1.0)
    if spec in VITS:
        return vit(*VITS[spec])
    source, sep, name = spec.rpartition(":")
    if not sep or not source or not name:
        raise ValueError(f"expected {', '.join(BUILT_IN)} (0 < F <= 16), torchvision:<name>, timm:<name>, "
                         "<module>:<callable> or <file.py>:<callable>")
    if source == "torchvision":
        import torchvision
        if name not in torchvision.models.list_models(module=torchvision.models):
            raise ValueError(f"torchvision.models has no classification model {name!r}")
        return torchvision.models.get_model(name, num_classes=NUM_CLASSES)
    if source == "timm":
        try:
            import timm
        except ImportError:
            raise ValueError("timm is not installed: pip install -e '.[peers]'") from None
        if name not in timm.list_models():
            raise ValueError(f"timm has no model {name!r}")
        return timm.create_model(name, pretrained=False, num_classes=NUM_CLASSES)
    model = _user_callable(source, name)()
    if not isinstance(model, nn.Module):
        raise ValueError(f"{name}() returned {type(model).__name__}, not a torch.nn.Module")
    return model


CHECK_TIMEOUT_S = 120.0   # building a model and running two images on the CPU: far more than any takes


def runs_user_code(spec: str) -> bool:
    """Whether building `spec` runs the user's code (a module or file of theirs), not ours or a library's."""
    source, sep, _ = spec.rpartition(":")
    return bool(sep) and source not in ("torchvision", "timm")


def check_model(spec: str, image_size: int = 32) -> None:
    """Raise a one-line ValueError (the reason, without the spec) unless `spec` builds a model that
    gives 2 x 10 logits for 2 images of `image_size` px. User code is checked in a process of its
    own (`bench.running.plan.check_models`)."""
    model = build_model(spec).eval()
    try:
        with torch.no_grad():
            out = model(torch.zeros(2, 3, image_size, image_size).normal_(generator=torch.Generator().manual_seed(0)))
    except Exception as e:   # a model built for other image sizes (a ViT's patches, say)
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise ValueError(f"2 images of {image_size} px: {type(e).__name__}: {first}") from None
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (2, NUM_CLASSES):
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(f"2 images of {image_size} px gave {shape}, expected (2, {NUM_CLASSES}) logits")
