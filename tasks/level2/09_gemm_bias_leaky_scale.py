"""GEMM, bias, leaky ReLU, scale."""

import torch
import torch.nn as nn

ALPHA = 2.0
M = 1024
N = 1024
K = 1024
# the operator chain, for planners that run without torch (the torch.fx graph says the same)
OPS = ('matmul', 'bias', 'leaky_relu', 'scale')


class Model(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, A, B, bias):
        return torch.nn.functional.leaky_relu(torch.matmul(A, B) + bias, negative_slope=0.01) * self.alpha


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N), torch.randn(N)]


def get_init_inputs():
    return [ALPHA]
