// expect: uninitialised-read at line 11
// argus: block-dim 256
// argus: size a = 256 * grid_dim.x
__global__ void uninit_read(float *a) {
  __shared__ float s[512];
  int t = threadIdx.x;
  float *d = a + blockIdx.x * 256;
  if (t < 256) s[t] = d[t];
  if (t < 128) s[256 + t] = 0.0f;
  __syncthreads();
  d[t] = s[t] + s[t + 256];
}
