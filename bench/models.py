"""Models the harness trains: CIFAR ResNet-18, the small fast ResNet-9, or none.

- `resnet18`: torchvision's ResNet-18 with the CIFAR stem (3x3 conv, stride 1, no max-pool),
  about 0.56 GFLOP per 32x32 image forward; 50k img/s training on an H100 (bf16, eager step;
  73k compiled: results/2026-11-22-h100-step/REPORT.md).
- `resnet9`: the DAWNBench / airbench-style ResNet-9 (Myrtle.ai), a few times cheaper.
  `resnet9-w<F>` scales its widths by F (e.g. `resnet9-w0.25`, `resnet9-w2`): the compute knob
  that moves model-only throughput continuously, to find where each pipeline stops keeping up.
"""
from __future__ import annotations

import re

from torch import nn
from torchvision.models import resnet18 as tv_resnet18

from pipelines.config import NUM_CLASSES

MODELS = ("resnet18", "resnet9", "none")


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
    model = tv_resnet18(num_classes=num_classes)
    model.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model


_WIDTH = re.compile(r"resnet9-w(\d+(?:\.\d+)?)")


def check_model(name: str) -> str:
    """`name` if it names a trainable model, else ValueError naming it."""
    width = _WIDTH.fullmatch(name)
    if name in MODELS[:-1] or (width and 0 < float(width.group(1)) <= 16):
        return name
    raise ValueError(f"model={name!r}: expected resnet18, resnet9 or resnet9-w<F> with 0 < F <= 16")


def build_model(name: str) -> nn.Module:
    check_model(name)
    if name == "resnet18":
        return resnet18()
    width = _WIDTH.fullmatch(name)
    return resnet9(width=float(width.group(1)) if width else 1.0)
