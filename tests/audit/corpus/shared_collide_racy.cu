// expect: race at line 8
// argus: block-dim 128
// argus: size a = 128 * grid_dim.x
__global__ void collide(float *a) {
  __shared__ float s[64];
  int t = threadIdx.x;
  float *d = a + blockIdx.x * 128;
  s[t / 2] = d[t];
  __syncthreads();
  d[t] = s[t / 2];
}
