"""Elementwise sum of two matrices."""

import torch
import torch.nn as nn

BATCH = 4096
DIM = 4096
# the operator chain, for planners that run without torch (the torch.fx graph says the same)
OPS = ('add',)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return x + y


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
