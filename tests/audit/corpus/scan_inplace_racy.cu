// expect: race at line 12
// argus: block-dim 256
// argus: size in = n
// argus: size out = n
__global__ void scan_inplace(const float *in, float *out, int n) {
  __shared__ float s[256];
  int t = threadIdx.x;
  int i = blockIdx.x * blockDim.x + t;
  s[t] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (int off = 1; off < 256; off <<= 1) {
    if (t >= off) s[t] += s[t - off];
    __syncthreads();
  }
  if (i < n) out[i] = s[t];
}
