#!/usr/bin/env python3
"""PyTorch twin of `leanback bench resnet18`: torchvision resnet18 (10 classes) with the CIFAR
stem (conv1 3x3 stride 1 padding 1, maxpool Identity), BatchNorm in training mode, one fixed
batch of 64 (--batch: configs/resnet18_cifar10.json trains with 128) N(0, 1) 32x32x3 images, SGD (lr 0.1, momentum 0.9, weight decay 5e-4); full
training steps, medians per phase, one JSON line with the C++ bench's fields.

Usage: python tools/bench/resnet18.py [--batch N] [--iters N] [--warmup N] [--threads N] [--json]

A torchvision built for another torch aborts the interpreter on import, so the import is
probed in a child process first; without a usable torchvision the same network is built from
the inline copy of torchvision's resnet18 below ("model_source" in the JSON says which).
"""
import os
import subprocess
import sys

import train_step_common as common
import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    """torchvision.models.resnet.BasicBlock."""

    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False),
                                            nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet18(nn.Module):
    """torchvision.models.resnet18 (same modules, order and init), conv1/maxpool as given."""

    def __init__(self, num_classes):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        layers, inplanes = [], 64
        for i, planes in enumerate([64, 128, 256, 512]):
            stride = 1 if i == 0 else 2
            layers.append(nn.Sequential(BasicBlock(inplanes, planes, stride),
                                        BasicBlock(planes, planes)))
            inplanes = planes
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def torchvision_usable():
    probe = subprocess.run([sys.executable, "-c", "import train_step_common, torchvision"],
                           cwd=os.path.dirname(os.path.abspath(__file__)),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return probe.returncode == 0


def main():
    a = common.parse_args(__doc__, lambda p: p.add_argument("--batch", type=int, default=64))
    B = a.batch
    if torchvision_usable():
        import torchvision
        model = torchvision.models.resnet18(num_classes=10)
        source = f"torchvision {torchvision.__version__}"
    else:
        model = ResNet18(num_classes=10)
        source = "inline copy of torchvision resnet18"
    model.conv1 = torch.nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
    model.maxpool = torch.nn.Identity()
    images = torch.randn(B, 3, 32, 32)
    labels = torch.randint(0, 10, (B,))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    return common.run(
        "resnet18", a, model, opt, lambda: F.cross_entropy(model(images), labels),
        {"model": {"depth": 18, "cifar_stem": True, "classes": 10}, "batch": {"B": B, "image": 32},
         "optimizer": "sgd_momentum", "model_source": source})


if __name__ == "__main__":
    sys.exit(main())
