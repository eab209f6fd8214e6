// expect: barrier-divergence at line 12
// expect: uninitialised-read at line 13
// argus: block-dim 256
// argus: size in = n
// argus: size out = n
__global__ void barrier_return(const float *in, float *out, int n) {
  __shared__ float s[256];
  int t = threadIdx.x;
  int i = blockIdx.x * blockDim.x + t;
  if (i >= n) return;
  s[t] = in[i];
  __syncthreads();
  out[i] = s[255 - t];
}
