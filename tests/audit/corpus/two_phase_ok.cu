// expect: clean
// argus: block-dim 256
// argus: size a = 256 * grid_dim.x
__global__ void two_phase(float *a) {
  __shared__ float s[256];
  int t = threadIdx.x;
  float *d = a + blockIdx.x * 256;
  s[t] = d[t];
  __syncthreads();
  d[t] = s[(t + 1) % 256];
}
