"""x @ W.T + b (an nn.Linear's layout), then tanh."""

import torch
import torch.nn as nn

M = 1024
N = 1024
K = 1024
# the operator chain, for planners that run without torch (the torch.fx graph says the same)
OPS = ('matmul_tb', 'bias', 'tanh')


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, W, b):
        return torch.tanh(torch.matmul(x, W.T) + b)


def get_inputs():
    return [torch.randn(M, K), torch.randn(N, K), torch.randn(N)]


def get_init_inputs():
    return []
