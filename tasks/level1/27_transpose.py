"""Out-of-place transpose (contiguous result)."""

import torch
import torch.nn as nn

M = 4096
N = 4096
# the operator chain, for planners that run without torch (the torch.fx graph says the same)
OPS = ('transpose',)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.t().contiguous()


def get_inputs():
    return [torch.randn(M, N)]


def get_init_inputs():
    return []
