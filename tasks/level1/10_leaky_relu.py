"""Leaky ReLU (0.01)."""

import torch
import torch.nn as nn

BATCH = 4096
DIM = 4096
# the operator chain, for planners that run without torch (the torch.fx graph says the same)
OPS = ('leaky_relu',)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.nn.functional.leaky_relu(x, negative_slope=0.01)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
