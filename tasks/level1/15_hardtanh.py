"""Hardtanh to [-1, 1]."""

import torch
import torch.nn as nn

BATCH = 4096
DIM = 4096
# the operator chain, for planners that run without torch (the torch.fx graph says the same)
OPS = ('hardtanh',)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.nn.functional.hardtanh(x, min_val=-1.0, max_val=1.0)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
