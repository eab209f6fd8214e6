"""Batched matmul: C[b] = A[b] @ B[b]."""

import torch
import torch.nn as nn

BATCH = 16
M = 256
N = 256
K = 256
# the operator chain, for planners that run without torch (the torch.fx graph says the same)
OPS = ('bmm',)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.bmm(A, B)


def get_inputs():
    return [torch.randn(BATCH, M, K), torch.randn(BATCH, K, N)]


def get_init_inputs():
    return []
