"""GEMM scaled by a constant."""

import torch
import torch.nn as nn

ALPHA = 0.5
M = 1024
N = 1024
K = 1024
# the operator chain, for planners that run without torch (the torch.fx graph says the same)
OPS = ('matmul', 'scale')


class Model(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, A, B):
        return torch.matmul(A, B) * self.alpha


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return [ALPHA]
