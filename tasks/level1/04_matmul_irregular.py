"""C = A @ B with sizes that are no multiple of any tile."""

import torch
import torch.nn as nn

M = 1000
N = 777
K = 333
# the operator chain, for planners that run without torch (the torch.fx graph says the same)
OPS = ('matmul',)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
