"""Models the harness trains: CIFAR ResNet-18, the small fast ResNet-9, or none.

- `resnet18`: torchvision's ResNet-18 with the CIFAR stem (3x3 conv, stride 1, no max-pool),
  about 0.56 GFLOP per 32x32 image forward; FIELD.md measured 26k img/s training on an H100 (fp32).
- `resnet9`: the DAWNBench / airbench-style ResNet-9 (Myrtle.ai), a few times cheaper.
"""
from __future__ import annotations

import torch
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


def resnet9(num_classes: int = NUM_CLASSES) -> nn.Module:
    return nn.Sequential(
        _conv_bn(3, 64), _conv_bn(64, 128, pool=True), _Residual(128),
        _conv_bn(128, 256, pool=True), _conv_bn(256, 512, pool=True), _Residual(512),
        nn.AdaptiveMaxPool2d(1), nn.Flatten(), nn.Linear(512, num_classes))


def resnet18(num_classes: int = NUM_CLASSES) -> nn.Module:
    model = tv_resnet18(num_classes=num_classes)
    model.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model


def build_model(name: str) -> nn.Module:
    if name == "resnet18":
        return resnet18()
    if name == "resnet9":
        return resnet9()
    raise ValueError(f"model={name!r}: expected one of {MODELS[:-1]}")
