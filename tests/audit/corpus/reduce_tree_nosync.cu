// expect: race at line 12
// argus: block-dim 256
// argus: size in = n
// argus: size out = grid_dim.x
__global__ void reduce_nosync(const float *in, float *out, int n) {
  __shared__ float s[256];
  int t = threadIdx.x;
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[t] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (t < k) s[t] += s[t + k];
  }
  __syncthreads();
  if (t == 0) out[blockIdx.x] = s[0];
}
