// expect: race at line 8
// argus: block-dim 256
// argus: requires n > 2 && n <= 1000000
// argus: size a = n
__global__ void stencil_inplace(float *a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i > 0 && i < n - 1)
    a[i] = 0.5f * (a[i - 1] + a[i + 1]);
}
