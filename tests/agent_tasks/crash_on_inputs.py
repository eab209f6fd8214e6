"""A task whose get_inputs() kills its process with SIGSEGV, standing in for an illegal memory access
that takes the whole process down: the executor must contain it."""

import os
import signal

import torch
import torch.nn as nn

M = 8
N = 8
OPS = ("relu",)


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    os.kill(os.getpid(), signal.SIGSEGV)
    return [torch.randn(M, N)]


def get_init_inputs():
    return []
