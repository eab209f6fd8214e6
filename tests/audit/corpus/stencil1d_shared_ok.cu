// expect: clean
// argus: block-dim 128
// argus: requires n > 0 && n <= 1000000
// argus: size in = n + 2
// argus: size out = n
__global__ void stencil1d(const float *in, float *out, int n) {
  __shared__ float s[130];
  int t = threadIdx.x;
  int i = blockIdx.x * blockDim.x + t;
  if (i < n) {
    s[t + 1] = in[i + 1];
    if (t == 0) s[0] = in[i];
    if (t == blockDim.x - 1 || i == n - 1) s[t + 2] = in[i + 2];
  }
  __syncthreads();
  if (i < n) out[i] = s[t] + s[t + 1] + s[t + 2];
}
