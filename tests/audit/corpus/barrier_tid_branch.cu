// expect: barrier-divergence at line 11
// argus: block-dim 256
// argus: size a = 256 * grid_dim.x
__global__ void barrier_branch(float *a) {
  __shared__ float s[256];
  int t = threadIdx.x;
  float *d = a + blockIdx.x * 256;
  s[t] = d[t];
  if (t < 128) {
    s[t] += 1.0f;
    __syncthreads();
  }
  d[t] = s[t];
}
