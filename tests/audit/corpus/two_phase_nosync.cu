// expect: race at line 9
// argus: block-dim 256
// argus: size a = 256 * grid_dim.x
__global__ void two_phase_nosync(float *a) {
  __shared__ float s[256];
  int t = threadIdx.x;
  float *d = a + blockIdx.x * 256;
  s[t] = d[t];
  d[t] = s[(t + 1) % 256];
}
