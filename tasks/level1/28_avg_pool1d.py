"""Average pooling, window 4, stride 4, over the last axis of [BATCH, CH, LEN]."""

import torch
import torch.nn as nn

BATCH = 64
CH = 64
LEN = 4096
# the operator chain, for planners that run without torch (the torch.fx graph says the same)
OPS = ('avg_pool1d',)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.nn.functional.avg_pool1d(x, 4, 4)


def get_inputs():
    return [torch.randn(BATCH, CH, LEN)]


def get_init_inputs():
    return []
