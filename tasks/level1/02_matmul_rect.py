"""C = A @ B, tall A and wide B."""

import torch
import torch.nn as nn

M = 2048
N = 1536
K = 512
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
