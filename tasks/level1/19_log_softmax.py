"""Log-softmax over the last axis."""

import torch
import torch.nn as nn

BATCH = 4096
DIM = 2048
# the operator chain, for planners that run without torch (the torch.fx graph says the same)
OPS = ('log_softmax',)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.log_softmax(x, dim=1)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
