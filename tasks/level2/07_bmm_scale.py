"""Batched matmul scaled by a constant."""

import torch
import torch.nn as nn

ALPHA = 0.25
BATCH = 16
M = 256
N = 256
K = 256
# the operator chain, for planners that run without torch (the torch.fx graph says the same)
OPS = ('bmm', 'scale')


class Model(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, A, B):
        return torch.bmm(A, B) * self.alpha


def get_inputs():
    return [torch.randn(BATCH, M, K), torch.randn(BATCH, K, N)]


def get_init_inputs():
    return [ALPHA]
