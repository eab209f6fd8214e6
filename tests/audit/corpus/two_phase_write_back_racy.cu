// expect: race at line 11
// argus: block-dim 256
// argus: size a = 256 * grid_dim.x
__global__ void write_back(float *a) {
  __shared__ float s[256];
  int t = threadIdx.x;
  float *d = a + blockIdx.x * 256;
  s[t] = d[t];
  __syncthreads();
  float v = s[255 - t];
  s[t] = v * 2.0f;
  __syncthreads();
  d[t] = s[t];
}
