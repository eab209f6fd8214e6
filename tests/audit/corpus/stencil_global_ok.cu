// expect: clean
// argus: block-dim 256
// argus: requires n > 2 && n <= 1000000
// argus: size in = n
// argus: size out = n
__global__ void stencil_global(const float *in, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i > 0 && i < n - 1) out[i] = 0.25f * in[i - 1] + 0.5f * in[i] + 0.25f * in[i + 1];
}
