"""y = A @ x with x a column (K x 1)."""

import torch
import torch.nn as nn

M = 4096
K = 4096
# the operator chain, for planners that run without torch (the torch.fx graph says the same)
OPS = ('matmul',)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, x):
        return torch.matmul(A, x)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, 1)]


def get_init_inputs():
    return []
