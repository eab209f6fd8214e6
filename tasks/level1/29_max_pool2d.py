"""Max pooling 2x2, stride 2, over [BATCH, CH, H, W]."""

import torch
import torch.nn as nn

BATCH = 16
CH = 32
H = 128
W = 128
# the operator chain, for planners that run without torch (the torch.fx graph says the same)
OPS = ('max_pool2d',)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.nn.functional.max_pool2d(x, 2, 2)


def get_inputs():
    return [torch.randn(BATCH, CH, H, W)]


def get_init_inputs():
    return []
