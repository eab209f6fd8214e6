"""GEMM plus a residual matrix."""

import torch
import torch.nn as nn

M = 1024
N = 1024
K = 1024
# the operator chain, for planners that run without torch (the torch.fx graph says the same)
OPS = ('matmul', 'add')


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B, D):
        return torch.matmul(A, B) + D


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N), torch.randn(M, N)]


def get_init_inputs():
    return []
