// expect: clean
// argus: block-dim 256
// argus: size a = 256 * grid_dim.x
__global__ void barrier_uniform(float *a, int mode) {
  __shared__ float s[256];
  int t = threadIdx.x;
  float *d = a + blockIdx.x * 256;
  s[t] = d[t];
  __syncthreads();
  if (mode > 0) {
    float v = s[255 - t];
    __syncthreads();
    s[t] = v;
    __syncthreads();
  }
  d[t] = s[t];
}
