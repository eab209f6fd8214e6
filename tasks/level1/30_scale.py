"""Multiply by a constant."""

import torch
import torch.nn as nn

ALPHA = 0.125
BATCH = 4096
DIM = 4096
# the operator chain, for planners that run without torch (the torch.fx graph says the same)
OPS = ('scale',)


class Model(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return x * self.alpha


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [ALPHA]
